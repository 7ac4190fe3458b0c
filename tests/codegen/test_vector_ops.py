"""Vector ops rendered as whole-vector C (tgfn/renderer/cvector.py) equal the PYTHON reference bit for bit:
every kernel is forced onto a VECTOR axis of 16 lanes, its inputs hold NaN, ±inf, ±0, both signs and values
outside the range of the casts' targets, and its source must not fall back to a lane-by-lane loop."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.codegen.opts import Opt, OptError, OptOps, kernel_axes
from tgfn.codegen.pipeline import optimize
from tgfn.engine import realize as realize_mod
from tgfn.lax.primitives import bitcast_convert_type
from tgfn.uop.ops import AxisType

LANES = 16
NARROW = ("int8", "int16", "uint8", "uint16")
WIDE_INTS = ("int32", "int64", "uint32", "uint64")
FLOATS = ("float32", "float64")


def _vector_opts(ast, renderer) -> list[Opt]:
  """VECTOR on the last output axis, so every op of the kernel is a vector op (the reference takes no opts)."""
  if not renderer.supports_opts: return []
  opt = Opt(OptOps.VECTOR, len([a for a in kernel_axes(ast) if a.kind is not AxisType.REDUCE]) - 1, LANES)
  try:
    optimize(ast, [opt])
  except OptError:
    return []
  return [opt]


def _float_values(dtype: str) -> np.ndarray:
  edges = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 127.0, 128.0, -128.0, -129.0, 255.0, 256.0, 65535.5, 65536.0,
           -32768.5, 2.0**31, -2.0**31, 2.0**31 - 128, 2.0**32, 2.0**63, -2.0**63, 2.0**64, 2.0**23 + 0.5, -(2.0**23) - 1,
           2.0**52 + 0.5, 1e30, -1e30, np.nan, -np.nan, np.inf, -np.inf, 3.3e-39]
  rng = np.random.default_rng(0)
  values = np.concatenate([edges, rng.standard_normal(6 * LANES - len(edges)) * 1e3]).astype(dtype)
  return values.reshape(2, -1)


def _int_values(dtype: str, seed: int = 0) -> np.ndarray:
  info = np.iinfo(dtype)
  edges = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, -32768, 65535, 65536, 2**31 - 1, -(2**31), 2**32 - 1,
           2**63 - 1, -(2**63), 5, 7, 31, 33, 63, 64]
  edges = [v for v in edges if info.min <= v <= info.max]
  rng = np.random.default_rng(seed)
  rest = rng.integers(info.min, info.max, 6 * LANES - len(edges), dtype=dtype, endpoint=True)
  return np.concatenate([np.array(edges, dtype), rest]).reshape(2, -1)


def _values(dtype: str, seed: int = 0) -> np.ndarray:
  values = _float_values(dtype) if dtype in FLOATS else _int_values(dtype, seed)
  return values if seed == 0 else np.roll(values, seed * 5)


def _run(fn, inputs, device: str, monkeypatch) -> tuple[np.ndarray, list[str]]:
  monkeypatch.setenv("DEV", device)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  monkeypatch.setattr(realize_mod, "default_opts", _vector_opts)
  # under jit, Python scalars are constants in the kernel (eagerly they are kernel arguments, and a
  # division by an argument has no exact vector form)
  out = np.asarray(tgfn.jit(fn)(*[tnp.array(x) for x in inputs]))
  return out, [k.source for k in realize_mod._compiled.values()]


def _check(fn, inputs, monkeypatch) -> None:
  got, sources = _run(fn, inputs, "CPU", monkeypatch)
  want, _ = _run(fn, inputs, "PYTHON", monkeypatch)
  assert got.dtype == want.dtype and got.shape == want.shape
  if got.dtype.kind == "f":  # NaN payloads aside, bit for bit (the sign of zero included)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(f"u{got.itemsize}"), want[~nan].view(f"u{want.itemsize}"))
  else: np.testing.assert_array_equal(got, want)
  assert any(f"x{LANES}" in s for s in sources), "the kernel was not vectorized"
  assert not any("_l++" in s for s in sources), "a vector op was computed lane by lane"


def _pair(dtype: str) -> list[np.ndarray]: return [_values(dtype), _values(dtype, 1)]


@pytest.mark.parametrize("dtype", FLOATS + WIDE_INTS)
def test_comparisons_and_select(dtype, monkeypatch):
  _check(lambda a, b: tnp.where(a < b, a, b) + (a != b).astype(a.dtype) + tnp.where(a == b, b, a), _pair(dtype), monkeypatch)


@pytest.mark.parametrize("dtype", FLOATS + WIDE_INTS)
def test_comparison_results_stored(dtype, monkeypatch):
  _check(lambda a, b: (a < b).astype("int32") * 2 + (a != b).astype("int32"), _pair(dtype), monkeypatch)


@pytest.mark.parametrize("narrow", NARROW)
def test_narrow_int_arithmetic_compare_and_select(narrow, monkeypatch):
  def fn(a, b):
    x, y = a.astype(narrow), b.astype(narrow)
    r = tnp.where(x < y, x * y - x, tnp.maximum(x, y) + y) ^ (x & y) | (x >> 1)
    return (-r).astype("int32") + (x != y).astype("int32")
  _check(fn, _pair("int64"), monkeypatch)


def test_bool_vectors(monkeypatch):
  def fn(a, b):
    p, q = a < 0, b < 0
    return (tnp.where(p, q, ~q) ^ (p < q) | (p != q) & tnp.maximum(p, q)).astype("int32") + tnp.where(p, a, b)
  _check(fn, _pair("float32"), monkeypatch)


@pytest.mark.parametrize("dtype", FLOATS + WIDE_INTS + NARROW)
def test_max(dtype, monkeypatch):
  wide = "float64" if dtype in FLOATS else "int64"
  _check(lambda a, b: tnp.maximum(a.astype(dtype), b.astype(dtype)).astype(wide),
         [_values(wide), _values(wide, 1)] if dtype not in FLOATS else _pair(dtype), monkeypatch)


def test_select_across_lane_sizes(monkeypatch):
  _check(lambda a, b: tnp.where(a < 0.0, b, b * 3), [_values("float64"), _values("int32")], monkeypatch)


@pytest.mark.parametrize("dtype", WIDE_INTS + NARROW)
def test_constant_shifts(dtype, monkeypatch):
  bits = np.dtype(dtype).itemsize * 8
  _check(lambda a: ((a.astype(dtype) << 3) ^ (a.astype(dtype) >> (bits - 1)) ^ (a.astype(dtype) >> 1)).astype("int64"),
         [_values("int64")], monkeypatch)


@pytest.mark.parametrize("pair", [("float32", "int32"), ("float32", "uint32"), ("float64", "int64"), ("float64", "uint64")])
def test_bitcast(pair, monkeypatch):
  src, dst = pair
  _check(lambda a: bitcast_convert_type(bitcast_convert_type(a, dst) + 1, src), [_values(src)], monkeypatch)


@pytest.mark.parametrize("dst", WIDE_INTS + NARROW + FLOATS + ("bool",))
@pytest.mark.parametrize("src", FLOATS + WIDE_INTS)
def test_casts(src, dst, monkeypatch):
  wide = "float64" if dst in FLOATS else "int64"
  _check(lambda a: a.astype(dst).astype(wide) + a.astype(wide), [_values(src)], monkeypatch)


@pytest.mark.parametrize("src", NARROW + ("bool",))
def test_casts_from_narrow(src, monkeypatch):
  _check(lambda a: a.astype(src).astype("float32") + a.astype(src).astype("int64").astype("float32"),
         [_values("int32")], monkeypatch)


@pytest.mark.parametrize("dtype", FLOATS)
def test_trunc(dtype, monkeypatch):
  _check(lambda a: tnp.trunc(a), [_values(dtype)], monkeypatch)


@pytest.mark.parametrize("dtype", FLOATS + WIDE_INTS)
def test_max_reduction_into_a_vector_accumulator(dtype, monkeypatch):
  _check(lambda a, b: tnp.max(tnp.stack([a, b, a * 2]), axis=0), _pair(dtype), monkeypatch)


@pytest.mark.parametrize("dtype", WIDE_INTS + NARROW)
def test_variable_shifts(dtype, monkeypatch):
  """Amounts in [-70, 70): negative and past the width included."""
  def fn(a, b):
    x, k = a.astype(dtype), (b % 140 - 70).astype(dtype)
    return ((x << k) ^ (x >> k)).astype("int64")
  _check(fn, _pair("int64"), monkeypatch)


@pytest.mark.parametrize("dtype", WIDE_INTS + NARROW)
def test_division_by_a_constant(dtype, monkeypatch):
  _check(lambda a: ((a.astype(dtype) // 7) * 3 + (a.astype(dtype) % 5)).astype("int64"), [_values("int64")], monkeypatch)
