"""vmap(f)(xs) equals tnp.stack([f(x) for x in xs]) for every record of tests/op_registry.py and every
function of the STRUCTURAL table (movement, indexing, linear algebra), in values, shapes and dtypes.

Each function runs twice: once under a single vmap, and once under vmap of vmap against a double loop.
The in_axes (0, 1, -1, None) and out_axes (0, 1, -1) rotate through `AXES` from one function to the
next, so each choice meets every arity many times without multiplying the number of kernels (each costs
a C compilation). The single vmap uses float32 (or the record's only dtypes), the nested one an integer
or bool dtype where the record takes one. Values come from the record's domain, specials (NaN, +-inf,
-0.0) included: batching must not change what they produce. The sweeps run on CPU only; one smoke test
runs on the PYTHON reference device."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.op_registry import ALL_RECORDS, Domain, OpRecord
from tests.transforms.test_grad_registry import (ELEMENTWISE_SHAPES, REDUCTION_SHAPE, STRUCTURAL, Case,
                                                 seed_of)
from tgfn.dtype import DType, dtypes
from tgfn.tree import flatten

Shape = tuple[int, ...]
Axis = Optional[int]
OUTER, INNER = 3, 2  # mapped sizes; distinct, so a wrong axis shows up as a shape error
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0])


@pytest.fixture(autouse=True)
def _cpu_unless_device(request: Any, monkeypatch: Any) -> None:
  """The sweeps run on CPU whatever DEV says; a test that asks for the `device` fixture picks its own."""
  if "device" not in request.fixturenames: monkeypatch.setenv("DEV", "CPU")


# ---- values from a record's domain, in any dtype
def domain_values(domain: Domain, dt: DType, shape: Shape, rng: np.random.Generator) -> np.ndarray:
  """Host values of `dt` from `domain`: ints in its int range (or a moderate one), floats within
  [-10, 10] and, when the domain has specials, about one special value in four (as tests/strategies.py)."""
  if dt.is_bool: return rng.random(shape) < 0.5
  if dt.is_int:
    lo, hi = domain.ints if domain.ints is not None else (domain.lo, domain.hi)
    lo = max(dt.min, -100 if lo is None else int(np.ceil(lo)))
    hi = min(dt.max, 100 if hi is None else int(np.floor(hi)))
    return rng.integers(lo, hi, shape, endpoint=True).astype(dt.np)
  lo = -10.0 if domain.lo is None else max(domain.lo, -10.0)
  hi = 10.0 if domain.hi is None else min(domain.hi, 10.0)
  x = rng.uniform(lo, hi, shape)
  if domain.min_abs: x = np.where(np.abs(x) < domain.min_abs, np.copysign(domain.min_abs, x), x)
  if domain.specials:
    x = np.where(rng.random(shape) < 0.25, rng.choice(SPECIALS, shape), x)
  return x.astype(dt.np)


def arg_dtype(rec: OpRecord, i: int, preferred: Sequence[DType]) -> DType:
  """The first of `preferred` that argument i of `rec` takes (else its first dtype: a where's bool)."""
  options = rec.dtypes_of(i)
  return next((dt for dt in preferred if dt in options), options[0])


def record_fn(rec: OpRecord, axis: Any = 1) -> tuple[Callable[..., Any], tuple[Shape, ...]]:
  """The function vmap maps for a record, and one example's argument shapes; reductions reduce over
  `axis` (keeping it, where the reduction supports keepdims and reduces an axis)."""
  if rec.kind != "reduction": return (lambda *xs: rec.fn(*xs, **rec.kwargs)), ELEMENTWISE_SHAPES[rec.nargs]
  kw = dict(rec.kwargs, keepdims=True) if rec.keepdims and axis is not None else rec.kwargs
  return (lambda x: rec.fn(x, axis=axis, **kw)), (REDUCTION_SHAPE,)


# ---- the loop that vmap must equal
def looped(f: Callable[..., Any], hosts: Sequence[np.ndarray], in_axes: Sequence[Axis], out_axes: int,
           size: int) -> list[tgfn.Array]:
  """tnp.stack([f(*hosts_i) for i in range(size)], out_axes), leaf by leaf of f's output pytree. The
  examples are sliced on the host, so every f(*hosts_i) is the same kernel on new buffers (slicing
  a device array would bake each offset into a kernel of its own)."""
  outs = [flatten(f(*[h if ax is None else np.take(h, i, ax) for h, ax in zip(hosts, in_axes)]))[0]
          for i in range(size)]
  return [tnp.stack(column, axis=out_axes) for column in zip(*outs)]


def on_device(f: Callable[..., Any]) -> Callable[..., Any]:
  return lambda *hosts: f(*map(tnp.array, hosts))


def batched_shape(shape: Shape, axis: Axis, size: int) -> Shape:
  if axis is None: return shape
  at = axis % (len(shape) + 1)
  return shape[:at] + (size,) + shape[at:]


def assert_same(got: Any, want: Sequence[tgfn.Array], what: str) -> None:
  """Leaf by leaf: the same shape and dtype, equal values (NaN equal to NaN)."""
  leaves = flatten(got)[0]
  assert len(leaves) == len(want), what
  for g, w in zip(leaves, want):
    assert g.dtype == w.dtype, f"{what}: dtype {g.dtype.name} != {w.dtype.name}"
    gv, wv = np.asarray(g), np.asarray(w)
    assert gv.shape == wv.shape, f"{what}: shape {gv.shape} != {wv.shape}"
    np.testing.assert_array_equal(gv, wv, err_msg=what)


# in_axes for up to three arguments (a unary function maps its first entry, or 0 when that is None)
# and out_axes; out_axes 1 becomes 0 for an output that is 0-d per example
AXES: tuple[tuple[tuple[Axis, ...], int], ...] = (
  ((0, 0, 0), 0), ((1, None, -1), 1), ((-1, 0, None), -1), ((None, -1, 1), 1), ((1, 1, 0), -1))
NESTED: tuple[tuple[tuple[Axis, ...], int], tuple[tuple[Axis, ...], int]] = (
  ((-1, 0, None), 1), ((0, None, 1), -1))  # (inner in_axes, out_axes), (outer in_axes, out_axes)


def axes_for(spec: tuple[Axis, ...], nargs: int) -> tuple[Axis, ...]:
  axes = spec[:nargs]
  return axes if any(a is not None for a in axes) else (0,) + axes[1:]


def out_axis(out: int, example_out: Any) -> int:
  return 0 if out == 1 and min(x.ndim for x in flatten(example_out)[0]) == 0 else out


def run_flat(f: Callable[..., Any], shapes: tuple[Shape, ...], hosts: Callable[[int, Shape], np.ndarray],
             which: int, what: str) -> None:
  in_spec, out = AXES[which % len(AXES)]
  in_axes = axes_for(in_spec, len(shapes))
  data = [hosts(i, batched_shape(s, ax, OUTER)) for i, (s, ax) in enumerate(zip(shapes, in_axes))]
  out = out_axis(out, f(*[tnp.zeros(s, d.dtype) for s, d in zip(shapes, data)]))
  got = tgfn.vmap(f, in_axes=in_axes, out_axes=out)(*map(tnp.array, data))
  want = looped(on_device(f), data, in_axes, out, OUTER)
  assert_same(got, want, f"{what} in_axes={in_axes} out_axes={out}")


def run_nested(f: Callable[..., Any], shapes: tuple[Shape, ...], hosts: Callable[[int, Shape], np.ndarray],
               what: str) -> None:
  (inner_spec, inner_out), (outer_spec, outer_out) = NESTED
  inner_axes, outer_axes = axes_for(inner_spec, len(shapes)), axes_for(outer_spec, len(shapes))
  data = [hosts(i, batched_shape(batched_shape(s, ai, INNER), ao, OUTER))
          for i, (s, ai, ao) in enumerate(zip(shapes, inner_axes, outer_axes))]
  inner_out = out_axis(inner_out, f(*[tnp.zeros(s, d.dtype) for s, d in zip(shapes, data)]))
  got = tgfn.vmap(tgfn.vmap(f, inner_axes, inner_out), outer_axes, outer_out)(*map(tnp.array, data))
  inner = lambda *hs: looped(on_device(f), hs, inner_axes, inner_out, INNER)
  want = looped(inner, data, outer_axes, outer_out, OUTER)
  assert_same(got, want, f"{what} nested in_axes={outer_axes}/{inner_axes} out_axes={outer_out}/{inner_out}")


# ---- the sweeps
FLOAT_FIRST = (dtypes.float32, dtypes.int32, dtypes.bool)
INT_FIRST = (dtypes.int32, dtypes.uint8, dtypes.bool, dtypes.float32)


def record_hosts(rec: OpRecord, preferred: Sequence[DType]) -> Callable[[int, Shape], np.ndarray]:
  rng = np.random.default_rng(seed_of(rec.name))
  return lambda i, shape: domain_values(rec.domain(i), arg_dtype(rec, i, preferred), shape, rng)


@pytest.mark.parametrize("rec", ALL_RECORDS, ids=str)
def test_record_vmap_equals_loop(rec: OpRecord) -> None:
  f, shapes = record_fn(rec, axis=1)
  run_flat(f, shapes, record_hosts(rec, FLOAT_FIRST), ALL_RECORDS.index(rec), rec.name)


@pytest.mark.parametrize("rec", ALL_RECORDS, ids=str)
def test_record_nested_vmap_equals_double_loop(rec: OpRecord) -> None:
  f, shapes = record_fn(rec, axis=None)
  run_nested(f, shapes, record_hosts(rec, INT_FIRST), rec.name)


def structural_hosts(case: Case) -> Callable[[int, Shape], np.ndarray]:
  rng = np.random.default_rng(seed_of(case.name))
  return lambda i, shape: rng.uniform(-2, 2, shape).astype(np.float32)


@pytest.mark.parametrize("case", STRUCTURAL, ids=str)
def test_structural_vmap_equals_loop(case: Case) -> None:
  run_flat(case.fn, case.shapes, structural_hosts(case), STRUCTURAL.index(case), case.name)


@pytest.mark.parametrize("case", STRUCTURAL, ids=str)
def test_structural_nested_vmap_equals_double_loop(case: Case) -> None:
  run_nested(case.fn, case.shapes, structural_hosts(case), case.name)


@pytest.mark.parametrize("device", ["PYTHON"], indirect=True)
def test_smoke_on_the_reference_device(device: str) -> None:
  """One elementwise record, one reduction and a gather, batched on the PYTHON interpreter."""
  f = lambda x, y: (tnp.maximum(x, y).sum(0), x[np.array([1, 0, 1])])
  hosts = lambda i, shape: np.random.default_rng(i).uniform(-1, 1, shape).astype(np.float32)
  run_flat(f, ((3,), (3,)), hosts, 1, "smoke")
