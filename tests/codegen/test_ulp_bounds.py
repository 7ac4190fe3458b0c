"""The ulp bounds of docs/numpy.md (tgfn.tools.ulp_table.BOUNDS) hold for every transcendental on every
path, on fixed seeded samples of each documented input range: float32 on the C library and on the
decompositions by default, float64 and the PYTHON interpreter in the slow run. The reference is NumPy in
long double, so no result depends on which SIMD path NumPy picks on this CPU."""
from __future__ import annotations

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.tools.ulp_table import BOUNDS, FUNCTIONS, cases, inputs, reference, tgfn_values, ulp_errors


def _worst(name: str, dtype: type, path: str, n: int) -> tuple[float, float]:
  """The largest ulp error over all ranges of `name` (one kernel: the ranges' samples side by side)."""
  rows = [r for r in cases(dtype) if r[0] == name]
  x = np.concatenate([inputs(name, r, neg, dtype, n) for _, r, neg in rows])
  err = ulp_errors(tgfn_values(name, x, path), reference(name, x), dtype)
  return float(err.max()), float(x[np.argmax(err)])


@pytest.mark.parametrize("path", ["C", "decomposed"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_float32_within_documented_ulps(name, path):
  worst, at = _worst(name, np.float32, path, 2000)
  assert worst <= BOUNDS[name], f"{name} on {path}: {worst:.2f} ulp at x = {at!r}, documented {BOUNDS[name]}"


@pytest.mark.slow
@pytest.mark.parametrize("path", ["C", "decomposed"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_float64_within_documented_ulps(name, path):
  worst, at = _worst(name, np.float64, path, 2000)
  assert worst <= BOUNDS[name], f"{name} on {path}: {worst:.2f} ulp at x = {at!r}, documented {BOUNDS[name]}"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_python_interpreter_within_documented_ulps(name, dtype):
  worst, at = _worst(name, dtype, "PYTHON", 100)
  assert worst <= BOUNDS[name], f"{name} on PYTHON: {worst:.2f} ulp at x = {at!r}, documented {BOUNDS[name]}"


def test_cos_of_large_arguments_is_accurate():
  """Issue 9 item 5: cos was sin(pi/2 - |x|), whose subtraction rounds away |x|'s low bits."""
  got = np.asarray(tnp.cos(tnp.array(np.float32(1e10))))
  assert abs(float(got) - 0.873119622676856) < 1e-7
