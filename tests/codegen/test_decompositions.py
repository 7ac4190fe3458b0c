"""exp2, log2, sin and cos built from basic arithmetic (tgfn/codegen/decompositions.py), forced on every
renderer with TRANSCENDENTAL=2 and compared with NumPy (computed wider, rounded once) on both devices,
with the composites built on them (exp, log, tan, tanh). Also: the rewritten kernels hold only basic ALU ops, the switch is part of
the compiled-kernel cache key, and the polynomial tables are the minimax fits their comments claim."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.codegen.decompositions import _FORMATS
from tgfn.codegen.pipeline import codegen
from tgfn.dtype import dtypes
from tgfn.engine.realize import compile_kernel
from tgfn.renderer import Renderer
from tgfn.renderer.cstyle import CStyleRenderer
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import GroupOp, Ops

FLOATS = [np.float32, np.float64]
# the accuracy targets: float32 about 16 ulp, float64 about 450 ulp (the measured error is under 3 ulp)
RTOL = {np.float32: 2e-6, np.float64: 1e-13}
# ops a renderer without transcendentals may be handed
BASIC_ALU = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.TRUNC, Ops.CMPLT, Ops.CMPNE, Ops.WHERE, Ops.AND,
             Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.CAST, Ops.BITCAST, Ops.MAX, Ops.NEG, Ops.RECIP}


@pytest.fixture(autouse=True)
def _decompose_everywhere(monkeypatch):
  monkeypatch.setenv("TRANSCENDENTAL", "2")


def _n(device: str) -> int:
  """Inputs per check: PYTHON interprets one scalar op at a time, so it gets a sample."""
  return 400 if device == "PYTHON" else 20000


def _specials(dtype) -> np.ndarray:
  fi = np.finfo(dtype)
  return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, fi.tiny, -fi.tiny,
                   fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max], dtype)


def _lowest_exponent(dtype) -> int:
  """log2 of the smallest denormal."""
  return int(np.finfo(dtype).minexp - np.finfo(dtype).nmant)


def reference(fn: str, x: np.ndarray) -> np.ndarray:
  """NumPy's `fn` computed in a wider type (float64, or long double for float64) and rounded once to
  x's dtype: NumPy's own float32 (and SIMD float64) results vary by an ulp with the CPU's SIMD path."""
  wide = np.longdouble if x.dtype == np.float64 else np.float64
  with np.errstate(all="ignore"): return getattr(np, fn)(x.astype(wide)).astype(x.dtype)


def _check(fn: str, x: np.ndarray, rtol: float, atol: float = 0.0) -> None:
  want = reference(fn, x)
  assert_close(getattr(tnp, fn)(tnp.array(x)), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_exp2(device, dtype):
  fi, rng = np.finfo(dtype), np.random.default_rng(0)
  lo, hi = _lowest_exponent(dtype), fi.maxexp  # -149, 128 (float32); -1074, 1024 (float64)
  n = _n(device)
  x = np.concatenate([np.linspace(lo - 3, hi + 3, n), rng.uniform(-2, 2, n // 4), _specials(dtype),
                      [hi - 0.5, hi - 2 ** -10, lo - 0.5, lo - 1, lo + 0.5]]).astype(dtype)
  # a result in the denormal range has fewer bits: at a rounding tie it may land one step away
  _check("exp2", x, RTOL[dtype], atol=fi.smallest_subnormal)
  # integers give exact powers of two, denormal ones included (np.exp2 itself may be an ulp off here)
  k = np.arange(lo, hi, 1 if device == "CPU" else 37)
  np.testing.assert_array_equal(np.asarray(tnp.exp2(tnp.array(k.astype(dtype)))), np.ldexp(dtype(1), k))


@pytest.mark.parametrize("dtype", FLOATS)
def test_log2(device, dtype):
  fi, rng, n = np.finfo(dtype), np.random.default_rng(1), _n(device)
  bits_dtype = np.int32 if dtype is np.float32 else np.int64
  inf_bits = int(np.array(np.inf, dtype).view(bits_dtype))
  # every positive finite float is equally likely: denormals and all binades
  anywhere = rng.integers(1, inf_bits, n, dtype=bits_dtype).view(dtype)
  # around 1 (tiny results) and around sqrt(2) (where the mantissa reduction switches)
  steps = np.arange(-50, 51)
  near = np.concatenate([np.nextafter(dtype(1), dtype(2)) ** steps, dtype(np.sqrt(2)) * (1 + fi.eps * steps),
                         rng.uniform(0.5, 2, n // 4).astype(dtype)])
  x = np.concatenate([anywhere, near, _specials(dtype), -anywhere[:10]]).astype(dtype)
  _check("log2", x, RTOL[dtype])
  powers = np.arange(_lowest_exponent(dtype), fi.maxexp, 1 if device == "CPU" else 37).astype(dtype)
  np.testing.assert_array_equal(np.asarray(tnp.log2(tnp.exp2(tnp.array(powers)))), powers)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_sin_cos(device, dtype, fn):
  """The reduction is exact everywhere: Cody-Waite up to 2^15 (float32) / 2^33 (float64), both sides of
  that switch, and Payne-Hanek up to the largest float (issue 9: sin past 1e4 was never tested)."""
  rng, n = np.random.default_rng(2), _n(device)
  switch = 2.0 ** _FORMATS[dtypes.float32 if dtype is np.float32 else dtypes.float64].cody_waite_bits
  multiples = np.arange(-40, 41) * (np.pi / 2)
  magnitudes = 10 ** rng.uniform(-1, np.log10(np.finfo(dtype).max), n // 2) * rng.choice([-1, 1], n // 2)
  x = np.concatenate([rng.uniform(-switch, switch, n // 2), magnitudes, switch * (1 + np.arange(-8, 9) * 1e-7),
                      np.geomspace(1e-30, 1, 50), multiples, np.nextafter(multiples.astype(dtype), np.inf),
                      [np.finfo(dtype).max, -np.finfo(dtype).max], _specials(dtype)[:5]]).astype(dtype)
  _check(fn, x, RTOL[dtype], atol=RTOL[dtype])


def _composite_case(fn: str, dtype, n: int) -> tuple[np.ndarray, float]:
  """Inputs and atol for a composite (exp over its whole range; tan = sin / cos up to 1e30)."""
  rng, specials = np.random.default_rng(3), _specials(dtype)
  if fn == "exp":
    overflow_underflow = [100, 710, 800, -104, -746, -800]
    lo, hi = (-104, 89) if dtype is np.float32 else (-745, 709)
    # a denormal result has fewer bits: one step there is a large relative error
    x = np.concatenate([rng.uniform(-10, 10, n), rng.uniform(lo, hi, n), overflow_underflow, specials])
    return x, np.finfo(dtype).smallest_subnormal
  if fn == "log":
    exponents = np.concatenate([rng.uniform(_lowest_exponent(dtype), np.finfo(dtype).maxexp - 0.01, n),
                                rng.uniform(-1, 1, n)])
    return np.concatenate([np.exp2(exponents.astype(np.longdouble)), specials]), 0.0  # libm, not SIMD
  if fn == "tan":
    return np.concatenate([rng.uniform(-10, 10, n), 10 ** rng.uniform(1, 30, n), specials]), 0.0
  assert fn == "tanh"
  return np.concatenate([rng.uniform(-25, 25, n), np.geomspace(1e-20, 1, 20), specials]), 0.0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", ["exp", "log", "tan", "tanh"])
def test_composites(device, dtype, fn):
  x, atol = _composite_case(fn, dtype, _n(device))
  _check(fn, x.astype(dtype), RTOL[dtype], atol=atol)


@pytest.mark.parametrize("fn", ["exp2", "log2", "sin", "cos"])
def test_float16_goes_through_the_float32_decomposition(device, fn):
  x = np.concatenate([np.linspace(-20, 20, 200), _specials(np.float16)]).astype(np.float16)
  _check(fn, x, rtol=1e-3, atol=1e-7)  # one float16 ulp: the float32 result is rounded once more


class _BasicRenderer(Renderer):
  """A renderer (never asked to render here) whose target has no exp2/log2/sin/cos."""
  has_transcendentals = False


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_renderer_without_transcendentals_gets_only_basic_ops(monkeypatch, dtype):
  monkeypatch.delenv("TRANSCENDENTAL")
  x = tnp.array(np.linspace(0.5, 2, 8, dtype=dtype))
  [item] = create_schedule([(tnp.sin(tnp.exp2(x)) * tnp.log2(x) + tnp.cos(x)).uop])
  native = {u.op for u in codegen(item.kernel.ast, CStyleRenderer())}
  assert GroupOp.Transcendental <= native
  basic = {u.op for u in codegen(item.kernel.ast, _BasicRenderer())}
  assert not basic & GroupOp.Transcendental
  assert basic & GroupOp.ALU <= BASIC_ALU


def test_the_switch_is_part_of_the_compiled_kernel_cache_key(monkeypatch):
  [item] = create_schedule([tnp.sin(tnp.array(np.linspace(-3, 3, 7, dtype=np.float32))).uop])
  monkeypatch.setenv("TRANSCENDENTAL", "1")
  native = compile_kernel(item.kernel, "CPU")
  monkeypatch.setenv("TRANSCENDENTAL", "2")
  decomposed = compile_kernel(item.kernel, "CPU")
  assert "sinf(" in native.source and "sinf(" not in decomposed.source
  assert not any(u.op in GroupOp.Transcendental for u in decomposed.linear)


# ---- where the polynomial tables come from
def _remez(target: Callable, lo: float, hi: float, degree: int, grid: int = 201) -> list[float]:
  """Coefficients (ascending) of the degree-`degree` polynomial P minimizing max |P(u) / target(u) - 1|
  on [lo, hi], by the Remez exchange in 40-digit arithmetic. `target` must not vanish on [lo, hi]."""
  import mpmath
  with mpmath.workdps(40):
    lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
    n = degree + 2  # unknowns: the coefficients and the levelled error

    def rel_err(c: list, u) -> mpmath.mpf: return mpmath.polyval(c[::-1], u) / target(u) - 1

    # start from the Chebyshev extrema, then move to the error's extrema until it equioscillates
    xs = [(lo + hi) / 2 - (hi - lo) / 2 * mpmath.cos(mpmath.pi * i / (n - 1)) for i in range(n)]
    us = [lo + (hi - lo) * i / (grid - 1) for i in range(grid)]
    for _ in range(20):
      system = mpmath.matrix([[x ** k / target(x) for k in range(n - 1)] + [(-1) ** i]
                              for i, x in enumerate(xs)])
      solution = mpmath.lu_solve(system, mpmath.matrix([1] * n))
      coeffs, level = [solution[k] for k in range(n - 1)], abs(solution[n - 1])
      # the largest error of each run of one sign on the grid, then a golden-section search around it
      err = [rel_err(coeffs, u) for u in us]
      peaks: list[int] = []
      for i, e in enumerate(err):
        if peaks and (e >= 0) == (err[peaks[-1]] >= 0):
          if abs(e) > abs(err[peaks[-1]]): peaks[-1] = i
        else: peaks.append(i)
      while len(peaks) > n: peaks.pop(0 if abs(err[peaks[0]]) < abs(err[peaks[-1]]) else -1)
      xs = []
      for i in peaks:
        a, b = us[max(i - 1, 0)], us[min(i + 1, grid - 1)]
        for _ in range(60):
          m1, m2 = a + (b - a) * 0.381966, b - (b - a) * 0.381966
          if abs(rel_err(coeffs, m1)) > abs(rel_err(coeffs, m2)): b = m2
          else: a = m1
        xs.append((a + b) / 2)
      if max(abs(rel_err(coeffs, x)) for x in xs) <= level * (1 + mpmath.mpf(1e-15)): break
    return [float(c) for c in coeffs]


def _fits(table: str, sin_bound: float) -> tuple[Callable, float, float]:
  """The function each table approximates (relative error), and on which interval."""
  import mpmath
  ln2 = mpmath.log(2)
  def exp2(f): return ln2 if f == 0 else mpmath.expm1(f * ln2) / f                  # (2^f - 1) / f
  def log2(z): return 2 / ln2 if z == 0 else 2 * mpmath.atanh(mpmath.sqrt(z)) / (mpmath.sqrt(z) * ln2)
  def sin(z): return -mpmath.mpf(1) / 6 if z == 0 else (mpmath.sin(mpmath.sqrt(z)) / mpmath.sqrt(z) - 1) / z
  def cos(z): return -mpmath.mpf(1) / 2 if z == 0 else (mpmath.cos(mpmath.sqrt(z)) - 1) / z
  return {"exp2_poly": (exp2, -0.5, 0.5), "log2_poly": (log2, 0.0, 0.0295),
          "sin_poly": (sin, 0.0, sin_bound ** 2), "cos_poly": (cos, 0.0, sin_bound ** 2)}[table]


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64])
@pytest.mark.parametrize("table", ["exp2_poly", "log2_poly", "sin_poly", "cos_poly"])
def test_polynomial_tables_are_the_documented_minimax_fits(dtype, table):
  fmt = _FORMATS[dtype]
  coeffs = getattr(fmt, table)
  target, lo, hi = _fits(table, fmt.sin_bound)
  fit = np.array(_remez(target, lo, hi, len(coeffs) - 1)).astype(dtype.np)
  # float32: the same float32 values (within an ulp at a rounding tie); float64: the last digits of the
  # highest coefficients depend on where the exchange stops
  rtol = 2 ** -23 if dtype is dtypes.float32 else 1e-12
  np.testing.assert_allclose(np.array(coeffs, dtype.np), fit, rtol=rtol)
