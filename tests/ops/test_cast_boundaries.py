"""float -> int casts exactly at the edges of the target range: dtype.max + 1 (128.0 -> int8) and
dtype.min - 1 must saturate, NaN goes to 0, values just inside truncate. Both the kernel path (a value
loaded from memory) and the constant-folding path (tgfn/uop/alu.py) are checked, on every device."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.dtype import DType, dtypes
from tests.strategies import round_bf16
from tgfn_drivers import BackendUnavailable, require_backend

INTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32,
        dtypes.uint64)
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _representable(value: float, src: DType) -> bool:
  with np.errstate(over="ignore"):
    held = round_bf16(value) if src is dtypes.bfloat16 else np.asarray(value, src.np)
    return bool(np.isnan(held)) if math.isnan(value) else float(held) == value


def _expected(value: float, dst: DType) -> int:
  if math.isnan(value): return 0
  if math.isinf(value): return dst.max if value > 0 else dst.min
  return max(dst.min, min(dst.max, math.trunc(value)))


@pytest.mark.parametrize("dst", INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("src", FLOATS, ids=lambda d: d.name)
def test_float_to_int_cast_at_the_range_edges(device: str, src: DType, dst: DType) -> None:
  edges = [float(dst.max) + 1, float(dst.min) - 1, float(dst.max) + 0.5, float(dst.min) - 0.5,
           float(2 * (dst.max + 1)), -0.75, float("nan"), float("inf"), float("-inf")]
  values = [v for v in edges if _representable(v, src)]
  want = np.array([_expected(v, dst) for v in values], dst.np)
  host = np.array(values, np.float32 if src is dtypes.bfloat16 else src.np)
  loaded = tnp.array(host, dtype=src).astype(dst)
  np.testing.assert_array_equal(np.asarray(loaded), want, err_msg=f"{src.name} -> {dst.name} of {values}")
  folded = tnp.stack([tnp.full((), v, dtype=src).astype(dst) for v in values])  # casts of constants, one kernel
  np.testing.assert_array_equal(np.asarray(folded), want, err_msg=f"constant {src.name} -> {dst.name} of {values}")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 33])
def test_narrowing_then_widening_rounds(device, n):
  """float64 -> float32 -> float64 rounds to float32 (gcc 12's SLP vectorizer folded the pair of a short
  loop into a copy on the CPU)."""
  x = np.random.default_rng(n).random(n)
  got = np.asarray(tnp.array(x).astype(tnp.float32).astype(tnp.float64))
  np.testing.assert_array_equal(got, x.astype(np.float32).astype(np.float64))


def test_float64_to_float16_rounds_once(device):
  """Each value lies just past a float16 tie; through float32 it would land on the tie and round to even
  (1 + 2**-11 + 2**-30 -> 1.0, 2**-25 + 2**-50 -> 0, 65520 - 2**-20 -> inf). NumPy and JAX round once."""
  x = np.array([1 + 2 ** -11 + 2 ** -30, -(1 + 2 ** -11 + 2 ** -30), 2 ** -25 + 2 ** -50, 65520 - 2 ** -20])
  want = x.astype(np.float16)
  assert want.tolist() == [1 + 2 ** -10, -(1 + 2 ** -10), 2 ** -24, 65504.0]
  np.testing.assert_array_equal(np.asarray(tnp.array(x).astype(tnp.float16)), want)


def test_float64_to_float16_rounds_once_in_opencl_c(monkeypatch):
  """OpenCL C holds float16 as bits and converts to it in code of its own (tg_d2h), which a CPU run never
  compiles: checked here whenever OpenCL is available."""
  try:
    require_backend("OPENCL")
  except BackendUnavailable as e:
    pytest.skip(str(e))
  monkeypatch.setenv("DEV", "OPENCL")
  test_float64_to_float16_rounds_once("OPENCL")
