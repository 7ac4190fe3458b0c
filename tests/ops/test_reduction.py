"""Every reduction of tgfn against NumPy, driven by tests/op_registry.py: random dtypes, shapes with
0-d, size-0 and size-1 axes, `axis` as None, an int, a negative int or a tuple, and keepdims. Result
dtypes follow JAX (sums of small ints widen to 32 bits, means of ints are float32, arg-reductions are
int32). Runs on CPU and on the PYTHON reference device."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tgfn.numpy as tnp
from tgfn.dtype import dtypes
from tgfn.ops.axes import normalize_axes
from tests.conftest import assert_close
from tests.op_registry import REDUCTIONS, OpRecord, Tol
from tests.strategies import array_shapes, arrays, assert_matches, axes, cast_host, held_dtypes, op_settings


@pytest.mark.parametrize("rec", REDUCTIONS, ids=str)
@given(data=st.data())
@op_settings(max_examples=25)
def test_matches_numpy(device: str, rec: OpRecord, data: st.DataObject) -> None:
  dt = data.draw(st.sampled_from(held_dtypes(rec.dtypes)), label="dtype")
  shape = data.draw(array_shapes(), label="shape")
  host = data.draw(arrays(dt, shape, rec.domain(0)), label="x")
  axis = data.draw(axes(len(shape), rec.multi_axis), label="axis")
  kwargs = dict(rec.kwargs)
  if rec.keepdims: kwargs["keepdims"] = data.draw(st.booleans(), label="keepdims")
  x = tnp.array(host, dtype=dt)
  count = math.prod(shape[a] for a in normalize_axes(axis, len(shape)))
  if rec.needs_nonempty and count == 0:
    with pytest.raises(ValueError, match="empty|zero-size"):
      rec.fn(x, axis=axis, **kwargs)
    return
  got = rec.fn(x, axis=axis, **kwargs)
  if host.size == 0 and not normalize_axes(axis, len(shape)):
    # nothing reduced, nothing to compute: NumPy's median cannot even reshape this ("size 0 into (0,newaxis)")
    assert got.shape == shape and got.dtype == rec.result_dtype(dt), f"{rec.name} of {dt.name}{shape} axis={axis}"
    return
  comp, out = rec.compute(dt), rec.result_dtype(dt)
  operand = cast_host(host, comp)
  with np.errstate(all="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "mean of empty slice", "ddof <= 0"
    want = cast_host(rec.ref(operand.astype(np.float64) if comp.is_float else operand, axis, **kwargs), out)
  tol = None
  if out.is_float:
    base = rec.tol[out]
    eps = float(np.finfo(np.float64 if comp is dtypes.float64 else np.float32).eps)
    finite = operand[np.isfinite(operand)].astype(np.float64) if comp.is_float else operand.astype(np.float64)
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    tol = Tol(base.rtol + 4 * eps * count, base.atol + 4 * eps * count * scale ** rec.scale_power)
  assert_matches(got, want, out, tol, f"{rec.name} of {dt.name}{shape} axis={axis} {kwargs}")


def test_registry_covers_every_reduction() -> None:
  from tgfn.ops import reduction
  covered = {rec.fn for rec in REDUCTIONS}
  missing = [n for n in reduction.__all__ if getattr(reduction, n) not in covered]
  assert not missing, f"add records to tests/op_registry.py for {missing}"


# ---- pinned behaviour
def test_empty_reductions(device: str) -> None:
  e = tnp.zeros((0, 3), dtype=tnp.int8)
  assert_close(tnp.sum(e), np.int32(0))
  assert_close(tnp.prod(e, axis=0), np.ones(3, np.int32))
  assert_close(tnp.any(e), np.bool_(False))
  assert_close(tnp.all(e, axis=0), np.ones(3, bool))
  assert_close(tnp.max(e, axis=1), np.zeros((0,), np.int8))  # nothing is reduced over an empty axis here
  assert_close(tnp.cumsum(e, axis=0), np.zeros((0, 3), np.int32))
  assert_close(tnp.mean(e, axis=0), np.full(3, np.nan, np.float32))
  assert_close(tnp.var(tnp.zeros((0,))), np.float32(np.nan))


@pytest.mark.needs_64bit("a mean with dtype=float64")
def test_accumulation_dtypes(device: str) -> None:
  """As JAX: sums and products of small ints accumulate in 32 bits (NumPy: 64), bool counts as int32."""
  x = np.array([[100, 100], [100, 27]], np.int8)
  assert_close(tnp.sum(tnp.array(x)), np.int32(327))
  assert_close(tnp.sum(tnp.array(x.astype(np.uint8)), axis=0), np.array([200, 127], np.uint32))
  assert_close(tnp.sum(tnp.array(x > 50)), np.int32(3))
  assert_close(tnp.cumsum(tnp.array([True, True, False])), np.array([1, 2, 2], np.int32))
  assert_close(tnp.sum(tnp.array(x), dtype=tnp.int8), np.int8(71))  # an explicit dtype wraps
  assert_close(tnp.mean(tnp.array(x), axis=1, dtype=tnp.float64), np.array([100.0, 63.5]))
  assert tnp.argmax(tnp.array(x)).dtype == dtypes.int32  # NumPy: int64


def test_half_precision_statistics_round_once(device: str) -> None:
  # mean/var/std of float16 compute in float32 and round once, as JAX
  x = np.array([1.0, 2.0, 4.0, 8.5, 100.0, 0.1], np.float16)
  wide = x.astype(np.float64)
  for fn, ref in ((tnp.mean, np.mean), (tnp.var, np.var), (tnp.std, np.std)):
    assert_close(fn(tnp.array(x)), ref(wide).astype(np.float16), rtol=1e-3, atol=0)


def test_nan_handling(device: str) -> None:
  x = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, np.nan]], np.float32)
  assert_close(tnp.max(tnp.array(x), axis=1), np.array([np.nan, np.nan], np.float32))
  assert_close(tnp.argmax(tnp.array(x), axis=1), np.array([1, 0], np.int32))  # the first NaN wins
  assert_close(tnp.argmin(tnp.array(x), axis=0), np.array([1, 0, 1], np.int32))
  assert_close(tnp.any(tnp.array([0.0, np.nan])), np.bool_(True))  # NaN is truthy


def test_methods_and_aliases(device: str) -> None:
  a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5
  x = tnp.array(a)
  assert tnp.amax is tnp.max and tnp.amin is tnp.min
  assert_close(x.sum(axis=(0, -1), keepdims=True), a.sum(axis=(0, 2), keepdims=True))
  assert_close(x.mean(-2), a.mean(-2))
  assert_close(x.std(axis=0, ddof=1), a.std(axis=0, ddof=1), rtol=1e-6)
  assert_close(x.argmin(axis=2, keepdims=True), a.argmin(axis=2, keepdims=True).astype(np.int32))
  assert_close(x.cumsum(axis=-1), np.cumsum(a, axis=-1))
  assert_close(x.prod(axis=1), a.prod(axis=1), rtol=1e-6)
  assert_close(x.min(), a.min())


# ---- bad input
@pytest.mark.parametrize("fn", [tnp.sum, tnp.max, tnp.mean, tnp.var, tnp.argmax, tnp.any, tnp.cumsum])
def test_axis_out_of_range(device: str, fn) -> None:
  x = tnp.zeros((2, 3))
  with pytest.raises(ValueError, match=r"axis 2 is out of bounds for an array of dimension 2 "
                                       r"\(valid: -2..1\)"):
    fn(x, axis=2)
  with pytest.raises(ValueError, match=r"axis -3 is out of bounds for an array of dimension 2"):
    fn(x, axis=-3)
  with pytest.raises(ValueError, match="axis 0 is out of bounds for a 0-d array"):
    fn(tnp.zeros(()), axis=0)


def test_bad_axis_arguments(device: str) -> None:
  x = tnp.zeros((2, 3))
  with pytest.raises(ValueError, match=r"repeated axis in \(1, -1\)"):
    tnp.sum(x, axis=(1, -1))
  with pytest.raises(TypeError, match="axis must be an integer, got 1.5"):
    tnp.sum(x, axis=1.5)


def test_zero_size_reduction_without_identity(device: str) -> None:
  with pytest.raises(ValueError,
                     match=r"max: zero-size reduction over axes \(0,\) of shape \(0, 3\) has no identity"):
    tnp.max(tnp.zeros((0, 3)), axis=0)
  with pytest.raises(ValueError, match="min: zero-size reduction"):
    tnp.min(tnp.zeros((0,)))
  with pytest.raises(ValueError, match="argmax of an empty sequence"):
    tnp.argmax(tnp.zeros((2, 0)), axis=1)
