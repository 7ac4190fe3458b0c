"""erf, erfc and erf_inv, composed from the primitives and evaluated in float64 (float32 and the half
types round once at the end; float64 results are within a few ulps).

erf(x) for |x| < 1.5 is its Taylor series 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)) (48 terms; the
largest term is under 2, so cancellation costs about a bit of float64); beyond, erfc(x) is
Laplace's continued fraction exp(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))),
evaluated backwards (120 terms: converged to float64 from 1.5 up). erf_inv starts from Winitzki's
closed-form approximation (about 2e-3 relative) and takes four Newton steps on erf (on erfc near +-1,
where 1 - |y| is exact), each squaring the error. Derivatives come from the composition (the Newton steps' derivative converges to
JAX's rule, sqrt(pi)/2 * exp(erf_inv(y)^2)).
"""
from __future__ import annotations

import math
from typing import Any

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.dtype import dtypes, float_dtype

__all__ = ["erf", "erfc", "erf_inv"]

_SERIES = [(-1.0) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(48)]
_SWITCH = 1.5
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _as_float64(x: Any) -> tuple[Array, Any]:
  x = as_array(x)
  dt = float_dtype(x.dtype)
  return x.astype(dtypes.float64), dt


def _erf_series(x: Array) -> Array:
  z = x * x
  acc = Array.const(_SERIES[-1], dtypes.float64, x.shape)
  for c in reversed(_SERIES[:-1]): acc = acc * z + c
  return x * acc * _TWO_OVER_SQRT_PI


def _erfc_fraction(t: Array) -> Array:
  """erfc(t) for t >= _SWITCH (callers pass a safe t there)."""
  f = t
  for k in range(120, 0, -1): f = t + (k * 0.5) / f
  return tnp.exp(-(t * t)) / (f * math.sqrt(math.pi))


def _erf64(x: Array) -> Array:
  t = tnp.abs(x)
  far = t >= _SWITCH
  near_value = _erf_series(tnp.where(far, 0.0, x))
  tail = 1.0 - _erfc_fraction(tnp.where(far, t, _SWITCH))
  return tnp.where(far, tnp.where(x < 0, -tail, tail), near_value)


def _erfc64(x: Array) -> Array:
  """erfc without cancellation for large positive x; 2 - erfc(-x) for negative."""
  t = tnp.abs(x)
  far = t >= _SWITCH
  tail = _erfc_fraction(tnp.where(far, t, _SWITCH))
  near = 1.0 - _erf_series(tnp.where(far, 0.0, x))
  return tnp.where(far, tnp.where(x < 0, 2.0 - tail, tail), near)


def erf(x: Any) -> Array:
  x64, dt = _as_float64(x)
  return tnp.where(tnp.isnan(x64), x64, _erf64(x64)).astype(dt)


def erfc(x: Any) -> Array:
  x64, dt = _as_float64(x)
  return tnp.where(tnp.isnan(x64), x64, _erfc64(x64)).astype(dt)


def erf_inv(y: Any) -> Array:
  """The inverse of erf on (-1, 1); +-inf at +-1, NaN outside."""
  y64, dt = _as_float64(y)
  t = tnp.abs(y64)
  inside = t < 1.0
  s = tnp.where(inside, t, 0.5)
  # Winitzki: erf_inv(s) ~ sqrt(sqrt(b^2 - l / a) - b), b = 2 / (pi a) + l / 2, l = log(1 - s^2)
  a = 0.147
  l = tnp.log((1.0 - s) * (1.0 + s))
  b = 2.0 / (math.pi * a) + l * 0.5
  x = tnp.sqrt(tnp.sqrt(b * b - l / a) - b)
  tail = s > 0.5
  rest = 1.0 - s  # exact for s in [0.5, 1]
  for _ in range(4):
    slope = _TWO_OVER_SQRT_PI * tnp.exp(-(x * x))
    miss = tnp.where(tail, rest - _erfc64(x), _erf64(x) - s)  # erfc falls as erf rises
    x = x - miss / slope
  out = tnp.where(inside, x, tnp.where(t == 1.0, float("inf"), float("nan")))
  out = tnp.where(y64 < 0, -out, out)
  return tnp.where(tnp.isnan(y64), y64, out).astype(dt)
