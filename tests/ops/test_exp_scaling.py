"""exp builds its 2^n from exponent bits: one exp2 (of the fraction) per element, not three (2^n used to be
two exp2 calls of integers, each a lane-by-lane libm call in small kernels), with results bit-identical to
that three-exp2 form everywhere: overflow to inf, gradual underflow, and NaN as before."""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine import realize as realize_mod

# (ln 2 split, clamp) of the three-exp2 form, as tgfn/ops/elementwise.py had them
_LN2_SPLIT = {np.float32: (0.693145751953125, 1.4286068203094173e-06),
              np.float64: (0.6931471803691238, 1.9082149292705877e-10)}
_CLAMP = {np.float32: 200.0, np.float64: 1500.0}


def _three_exp2_exp(x):
  """exp(x) as 2^f * 2^half * 2^(n - half), each power an exp2: the form exp had before."""
  dtype = np.dtype(x.dtype.name).type
  hi, lo = _LN2_SPLIT[dtype]
  bound = _CLAMP[dtype]
  x = tnp.where(x < -bound, dtype(-bound), tnp.where(x > bound, dtype(bound), x))
  n = tnp.trunc(x * (1.0 / np.log(2.0)))
  f = ((x - n * hi) - n * lo) * (1.0 / np.log(2.0))
  half = tnp.trunc(n * 0.5)
  return tnp.exp2(f) * tnp.exp2(half) * tnp.exp2(n - half)


def _inputs(dtype, step: int) -> np.ndarray:
  """Every `step`-th float of the range where exp is neither 0 nor inf (and a margin), both signs, and the
  edges of overflow and (gradual) underflow."""
  if dtype is np.float32:
    top = np.float32(110).view(np.int32)
    dense = np.arange(0, top, step, dtype=np.int64).astype(np.int32).view(np.float32)
    edges = [88.72, 88.7228, 88.7229, 88.73, -87.3, -87.33, -103.9, -103.97, -104, 200, 201, 3e38, 1e-45]
  else:
    dense = np.linspace(0, 760, 2_000_000 // step)
    edges = [709, 709.78, 709.782712893384, 709.79, -708.39, -708.4, -709, -744.44, -745, -745.13, -745.14, -746,
             1500, 1501, 1e300, 5e-324]
  x = np.concatenate([dense, np.array(edges + [0.0, np.inf, np.nan], dtype)])
  return np.concatenate([x, -x]).astype(dtype)


@pytest.mark.parametrize("transcendental", ["1", "2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_is_bit_identical_to_the_three_exp2_form(device, dtype, transcendental, monkeypatch):
  monkeypatch.setenv("TRANSCENDENTAL", transcendental)  # libm exp2 (small kernels' default) or the polynomial
  # PYTHON interprets one scalar op at a time: a sample (and the edges), the CPU a dense sweep
  x = _inputs(dtype, (4_000_001 if device == "PYTHON" else 4099) if dtype is np.float32 else (8000 if device == "PYTHON" else 4))
  got = np.asarray(tnp.exp(tnp.array(x)))
  want = np.asarray(_three_exp2_exp(tnp.array(x)))
  bits = np.uint32 if dtype is np.float32 else np.uint64
  differ = np.flatnonzero(got.view(bits) != want.view(bits))
  assert differ.size == 0, f"exp differs from the three-exp2 form at x = {x[differ[:5]]}: {got[differ[:5]]} vs {want[differ[:5]]}"
  # and the edges are the right ones: inf above the largest finite result, 0 below the smallest denormal
  with np.errstate(all="ignore"): wide = np.exp(x.astype(np.longdouble)).astype(dtype)
  assert np.array_equal(np.isinf(got), np.isinf(wide)) and np.array_equal(got == 0, wide == 0)
  assert np.array_equal(np.isnan(got), np.isnan(x))


@pytest.mark.parametrize("dtype, call", [(np.float32, "exp2f"), (np.float64, "exp2")])
def test_exp_kernel_calls_exp2_once_per_element(dtype, call, monkeypatch):
  monkeypatch.setenv("TRANSCENDENTAL", "1")  # every exp2 a C library call, as in small kernels
  monkeypatch.setenv("TGFN_DISABLE_PLAN_CACHE", "1")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  x = np.linspace(-80, 80, 64).astype(dtype)
  with tgfn.Context(DEV="CPU"):  # the C source is read, whatever device the suite runs on
    np.testing.assert_allclose(np.asarray(tgfn.jit(tnp.exp)(tnp.array(x))), np.exp(x), rtol=1e-6)
  sources = [k.source for k in realize_mod._compiled.values()]
  calls = sum(len(re.findall(rf"\b{call}\(", s)) for s in sources)
  assert sources and calls == 1, f"expected one {call} call in exp's kernel, found {calls}"
