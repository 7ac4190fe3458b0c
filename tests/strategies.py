"""Hypothesis strategies and NumPy-side helpers for the table-driven op tests (tests/op_registry.py):
draw dtypes, shapes and values for an OpRecord, compute the reference it describes, compare.

Host data: every dtype is held in NumPy as itself, except bfloat16, held as float32 values that are
exactly bfloat16 (so tests run with or without ml_dtypes)."""
from __future__ import annotations

import math
from typing import Any, Optional, Union

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfn.numpy as tnp
from tgfn.array import Array
from tgfn.dtype import DType, dtypes, result_type
from tests.op_registry import BY_NAME, HALVES, Domain, OpRecord, Tol

Scalar = Union[bool, int, float]
SPECIALS = (float("nan"), float("inf"), float("-inf"), -0.0)
MAX_SIDE = 4  # at most 4**3 = 64 elements: the PYTHON device interprets every scalar op


def op_settings(max_examples: int) -> settings:
  """Per-test settings on top of the loaded profile. The `device` fixture is function-scoped, which is
  safe here: it only selects the default device, the same for every example. A profile asking for more
  examples (HYPOTHESIS_PROFILE=explore) gets them."""
  return settings(max_examples=max(max_examples, settings.default.max_examples), suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
    HealthCheck.filter_too_much])


_64_BIT = (dtypes.float64, dtypes.int64, dtypes.uint64, dtypes.complex128)


def device_holds(dt: DType) -> bool:
  """Whether the default device holds `dt`: every dtype, but for the 64-bit ones on a device without them (WEBGPU)."""
  from tgfn.device import Device, has_64bit
  return dt not in _64_BIT or has_64bit(Device.DEFAULT)


def held_dtypes(options: Any) -> list[DType]:
  """The dtypes among `options` that the default device holds; a test left with none is skipped, saying so."""
  held = [dt for dt in options if device_holds(dt)]
  if not held: pytest.skip(f"only 64-bit dtypes ({', '.join(dt.name for dt in options)}), which this device has not")
  return held


def host_dtype(dt: DType) -> np.dtype: return np.dtype(np.float32) if dt is dtypes.bfloat16 else dt.np


def round_bf16(x: Any) -> np.ndarray:
  """Round to the nearest bfloat16 (ties to even) through float32, as tgfn does; float32 values out."""
  f = np.asarray(x, np.float32)
  bits = f.view(np.uint32).astype(np.uint64)
  rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
  return np.where(np.isnan(f), f, rounded)


def _truncate_bf16(v: float) -> float:
  """The bfloat16 value next to `v` toward zero (its float32 bits with the low 16 cleared)."""
  bits = np.array([v], np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
  return float(bits.view(np.float32)[0])


def int_bounds(dt: DType, lo: Optional[float], hi: Optional[float]) -> tuple[int, int]:
  """[lo, hi] (None: unbounded) as ints within `dt`'s range."""
  return (dt.min if lo is None else max(dt.min, math.ceil(lo)),
          dt.max if hi is None else min(dt.max, math.floor(hi)))


def _inward(host: np.dtype, bound: float, direction: float) -> float:
  """`bound` rounded to `host`'s precision, moved one step toward `direction` if rounding went outward."""
  r = host.type(bound)
  if (float(r) - bound) * direction < 0: r = np.nextafter(r, host.type(direction * np.inf))
  return float(r)


def elements(dt: DType, domain: Domain) -> st.SearchStrategy:
  """Scalar values of `dt` from `domain` (see Domain), exactly representable in `dt`."""
  if dt.is_bool: return st.booleans()
  if dt.is_int:
    lo, hi = domain.ints if domain.ints is not None else (domain.lo, domain.hi)
    return st.integers(*int_bounds(dt, lo, hi))
  host = host_dtype(dt)
  fmax = float(np.finfo(host).max)
  lo = -fmax if domain.lo is None else _inward(host, max(domain.lo, -fmax), 1.0)
  hi = fmax if domain.hi is None else _inward(host, min(domain.hi, fmax), -1.0)
  values = st.floats(lo, hi, width={2: 16, 4: 32, 8: 64}[host.itemsize])
  if domain.min_abs:
    m = domain.min_abs
    values = values.map(lambda v: v if v == 0 or abs(v) >= m else float(host.type(math.copysign(m, v))))
  if dt is dtypes.bfloat16: values = values.map(_truncate_bf16)
  if not domain.specials: return values
  return st.one_of(values, values, values, st.sampled_from(SPECIALS))  # about one special in four


def arrays(dt: DType, shape: tuple[int, ...], domain: Domain) -> st.SearchStrategy[np.ndarray]:
  return hnp.arrays(host_dtype(dt), shape, elements=elements(dt, domain))


def shapes(n: int) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
  """`n` mutually broadcastable shapes of 0 to 3 axes (0-d, size-0 and size-1 axes included)."""
  return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3, min_side=0,
                                           max_side=MAX_SIDE).map(lambda b: b.input_shapes)


def array_shapes() -> st.SearchStrategy[tuple[int, ...]]:
  return hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=MAX_SIDE)


@st.composite
def axes(draw: Any, ndim: int, multi: bool) -> Any:
  """An `axis` argument: None, one int (maybe negative) or, if `multi`, a tuple of distinct ints."""
  options = [st.none()]
  if ndim: options.append(st.integers(-ndim, ndim - 1))
  if ndim and multi:
    picked = st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)
    options.append(picked.flatmap(lambda ax: st.tuples(*[st.sampled_from((a, a - ndim)) for a in ax])))
  return draw(st.one_of(*options))


def weak_scalar(other: DType, kind: DType, domain: Domain) -> st.SearchStrategy[Scalar]:
  """A Python scalar of `kind`'s category (bool, int or float) to combine with an array of `other`:
  ints stay within the range of the dtype they will be converted to, so they never overflow."""
  if kind.is_bool: return st.booleans()
  if kind.is_int:
    target = other if other.is_int else dtypes.int32
    lo, hi = domain.ints if domain.ints is not None else (domain.lo, domain.hi)
    return st.integers(*int_bounds(target, lo, hi))
  return elements(dtypes.float64, domain)


# ---- the NumPy side
def cast_host(values: Any, dst: DType) -> np.ndarray:
  """Host `values` (an array or a Python scalar) converted as tgfn converts them to `dst`. Only for
  value-preserving or rounding conversions: promotions and compute dtypes never go float -> int."""
  values = np.asarray(values)
  if dst.is_bool: return values != 0
  with np.errstate(over="ignore"):  # narrowing a float overflows to inf, as in tgfn
    if dst is dtypes.bfloat16: return round_bf16(values)
    return values.astype(dst.np)


def lattice_arg(x: Any, dt: DType) -> Any:
  """What result_type sees for an operand: the Python scalar itself (weak) or the array's dtype."""
  return x if isinstance(x, (bool, int, float)) else dt


def reference(rec: OpRecord, hosts: list[Any], dts: list[DType]) -> np.ndarray:
  """The expected result of `rec` in host form: operands promoted, cast to the compute dtype, `rec.ref`
  run in float64 (or exactly in an integer dtype), rounded once to the result dtype. A `fold` record is
  the chain of its binary steps, each promoting its own operands."""
  if rec.fold:
    acc, acc_dt = hosts[0], dts[0]
    for name, host, dt in zip(rec.fold, hosts[1:], dts[1:]):
      step = BY_NAME[name]
      acc, acc_dt = reference(step, [acc, host], [acc_dt, dt]), \
          step.result_dtype(result_type(lattice_arg(acc, acc_dt), lattice_arg(host, dt)))
    return acc
  promoted = result_type(*[lattice_arg(h, dt) for h, dt in zip(hosts, dts)])
  comp = rec.compute(promoted)
  ops = [cast_host(cast_host(h, promoted), comp) for h in hosts]
  if comp.is_float:
    work = (np.float32 if comp in HALVES else host_dtype(comp)) if rec.ref_in_dtype else np.float64
    ops = [o.astype(work) for o in ops]
  with np.errstate(all="ignore"):
    out = np.asarray(rec.ref(*ops, **rec.kwargs))
  return cast_host(out, rec.out(comp))


def assert_matches(got: Array, want: np.ndarray, dtype: DType, tol: Optional[Tol], context: str = "") -> None:
  """`got` has dtype `dtype` and the shape of `want`; ints and bools equal, floats within `tol`."""
  assert got.dtype == dtype, f"dtype {got.dtype.name} != expected {dtype.name} {context}"
  g = np.asarray(got)
  assert g.shape == want.shape, f"shape {g.shape} != expected {want.shape} {context}"
  if dtype.is_float:
    assert tol is not None
    np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=tol.rtol, atol=tol.atol,
                               equal_nan=True, err_msg=context)
  else:
    np.testing.assert_array_equal(g, want.astype(dtype.np), err_msg=context)


def to_tgfn(host: Any, dt: DType) -> Any:
  """A tgfn Array of `dt` from host data; Python scalars pass through (they stay weakly typed)."""
  return host if isinstance(host, (bool, int, float)) else tnp.array(host, dtype=dt)
