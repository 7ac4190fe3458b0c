"""The ulp bounds of docs/numpy.md (tgfn.tools.ulp_table.BOUNDS) hold for every transcendental on every
path, on fixed seeded samples of each documented input range: float32 on the C library and on the
decompositions by default, float64 and the PYTHON interpreter in the slow run. The reference is NumPy in
long double, so no result depends on which SIMD path NumPy picks on this CPU."""
from __future__ import annotations

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.tools.ulp_table import BOUNDS, FUNCTIONS, cases, inputs, reference, tgfn_values, ulp_errors
from tgfn.codegen.decompositions import _FORMATS, DECOMPOSE_MIN_ITERATIONS
from tgfn.dtype import dtypes
from tgfn.engine.realize import compile_kernel
from tgfn.helpers import Context
from tgfn.uop.ops import Ops
from tgfn.schedule.schedule import create_schedule


def _values(name: str, x: np.ndarray, path: str) -> np.ndarray:
  """tgfn's `name` of x on `path`; on "default", in a kernel large enough for the CPU to decompose exp2 and
  log2 (x repeated; smaller kernels keep the C library's functions: the "C" path)."""
  if path != "default": return tgfn_values(name, x, path)
  reps = -(-DECOMPOSE_MIN_ITERATIONS // len(x))
  return tgfn_values(name, np.tile(x, reps), path)[:len(x)]


def _worst(name: str, dtype: type, path: str, n: int) -> tuple[float, float]:
  """The largest ulp error over all ranges of `name` (one kernel: the ranges' samples side by side)."""
  rows = [r for r in cases(dtype) if r[0] == name]
  x = np.concatenate([inputs(name, r, neg, dtype, n) for _, r, neg in rows])
  err = ulp_errors(_values(name, x, path), reference(name, x), dtype)
  return float(err.max()), float(x[np.argmax(err)])


@pytest.mark.parametrize("path", ["C", "decomposed", "default"])
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


def _special_inputs(dtype: type) -> np.ndarray:
  """Zeros, infinities, NaN, subnormals, the normal range's ends and each function's overflow and underflow
  edges (exp: ln(max) and ln(min subnormal); exp2: 128 and -149; float64: theirs), with neighbours."""
  info = np.finfo(dtype)
  tiny_sub = np.nextafter(dtype(0), dtype(1))
  edges = [88.72283, 88.72284, -87.33654, -103.27893, -103.97208, -104.0, 127.99999, 128.0, -126.0, -149.0,
           -149.5, -150.0, 709.78, 709.79, -745.13, -1074.0, -1075.0, 1023.999, 1024.0]
  base = [0.0, 1.0, 0.5, 2.0, 1e-30, 1e-7, 80.0, -80.0, float(info.max), float(info.tiny), float(tiny_sub),
          float(info.tiny - tiny_sub), float(info.smallest_subnormal * 3), *edges]
  with np.errstate(over="ignore"):
    x = np.array(base, dtype)
    near = np.concatenate([x, np.nextafter(x, dtype(np.inf)), np.nextafter(x, dtype(-np.inf))])
  return np.concatenate([near, -near, np.array([np.inf, -np.inf, np.nan], dtype)])


@pytest.mark.parametrize("path", ["default", "decomposed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log1p", "tanh"])
def test_special_values_within_documented_ulps(name, dtype, path):
  """The polynomial exp2/log2 (the CPU's default since they are whole-vector code) and what is built on
  them, against NumPy in float64 (long double for float64 inputs): zeros, +-inf, NaN, subnormal inputs and
  results, and the overflow and underflow edges, each with its neighbours."""
  x = _special_inputs(dtype)
  err = ulp_errors(_values(name, x, path), reference(name, x), dtype)
  worst = int(np.argmax(err))
  assert err[worst] <= BOUNDS[name], f"{name} on {path}: {err[worst]:.2f} ulp at x = {x[worst]!r}, documented {BOUNDS[name]}"


def test_cpu_calls_exp2_and_log2_as_vector_functions_by_default(monkeypatch):
  """By default every CPU kernel of exp and log, small or large, calls one whole-vector polynomial function per
  vector type (tgfn/codegen/math_functions.py), defined once in its source, not a lane-by-lane libm call nor a
  copy of the polynomial at each use; sin stays libm's. exp's two scaling factors 2^n are exp2 of integers:
  built inline from the exponent bits, with no call and no float-to-int cast."""
  monkeypatch.delenv("TRANSCENDENTAL", raising=False)
  for n in (64, DECOMPOSE_MIN_ITERATIONS):
    x = tnp.array(np.linspace(-3, 3, n, dtype=np.float32))
    sources = {}
    for name in ("exp", "log", "sin"):
      [item] = create_schedule([getattr(tnp, name)(x).uop])
      sources[name] = compile_kernel(item.kernel, "CPU").source
    assert "exp2f(" not in sources["exp"] and "log2f(" not in sources["log"] and "sinf(" in sources["sin"]
    assert sources["exp"].count("void tg_exp2_float32x16(") == 1 and sources["log"].count("void tg_log2_float32x16(") == 1
  [item] = create_schedule([(tnp.exp(x) + tnp.exp(x * 2)).uop])
  kernel = compile_kernel(item.kernel, "CPU")
  assert kernel.source.count("void tg_exp2_float32x16(") == 1 and kernel.source.count("tg_exp2_float32x16((") == 2
  assert [u.op for u in kernel.linear].count(Ops.EXP2) == 2
  # 2^n's exponent is read from the bits of n + 1.5 * 2^23, not converted float -> int (a saturating cast)
  assert not any(u.op is Ops.CAST and u.dtype.scalar().is_int and u.src[0].dtype.scalar().is_float for u in kernel.linear)


def test_the_exp2_function_is_the_decomposition_one_polynomial_deep():
  """The function is the decomposition through the kernel passes: one polynomial (Horner starts with the top
  coefficient times f: one such MUL), and the same values as the decomposition inlined (TRANSCENDENTAL=2)."""
  from tgfn.codegen.math_functions import function_program
  top = np.float32(_FORMATS[dtypes.float32].exp2_poly[-1])
  is_top = lambda s: (s.op is Ops.CONST and s.arg == top) or (s.op is Ops.VECTORIZE and is_top(s.src[0]))  # noqa: E731
  linear = function_program(Ops.EXP2, dtypes.float32.vec(16))
  assert sum(u.op is Ops.MUL and any(is_top(s) for s in u.src) for u in linear) == 1
  x = np.concatenate([np.linspace(-160, 130, 4093, dtype=np.float32), np.float32([np.nan, np.inf, -np.inf])])
  called = np.asarray(tnp.exp2(tnp.array(x)))
  with Context(TRANSCENDENTAL="2"): inline = np.asarray(tnp.exp2(tnp.array(x)))
  np.testing.assert_array_equal(called, inline)


def test_transcendental_switch_rejects_unknown_values(monkeypatch):
  monkeypatch.setenv("TRANSCENDENTAL", "3")
  with pytest.raises(ValueError, match="TRANSCENDENTAL must be 1"):
    np.asarray(tnp.exp(tnp.array(np.ones(4, np.float32))))
