"""More elementwise math, composed from tgfn.ops.elementwise: inverse trigonometric and hyperbolic
functions (all through `arctan`, `log1p` and `sqrt`), `arctan2`, `logaddexp`, `logaddexp2`, `hypot`,
`sinc`, `isclose` and `allclose`.

Each formula is the cancellation-free form: arcsin(x) = atan2(x, sqrt((1 - x)(1 + x))), arccosh and
arcsinh through log1p, arctanh = log1p(2x / (1 - x)) / 2, and for large |x| log(|x|) + ln 2 (x * x
would overflow). Where a branch is undefined (a division by zero the `where` does not select), the
operand is replaced first, so derivatives through the unselected branch stay finite (the double-where
idiom): `grad(sinc)(0.0)` is 0, not NaN. The other functions take the derivative of their math
(`derivatives`, tgfn/transforms/custom.py), not of the decomposition, whose `where`s and `maximum`s
would give wrong values at their switch points (logaddexp(x, 0) at 0: 1 instead of 1/2; arctan2(x, 1) at
1: 0) and NaN from untaken branches. At ties and kinks they follow JAX (docs/autodiff.md).
"""
from __future__ import annotations

import math
from typing import Any

from tgfn.array import Array, promote
from tgfn.dtype import dtypes, float_dtype
from tgfn.ops.elementwise import (LN_2, _halves_in_float32, abs, arctan, exp, exp2, isinf, isnan, log, log1p,
                                  maximum, minimum, round, sin, sqrt, where)
from tgfn.ops.reduction import all as _all
from tgfn.ops.special import expit
from tgfn.transforms.custom import derivatives

__all__ = ["arcsin", "arccos", "arctan2", "arcsinh", "arccosh", "arctanh", "logaddexp", "logaddexp2",
           "hypot", "sinc", "isclose", "allclose", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh"]


def _float_pair(a: Any, b: Any) -> tuple[Array, Array]:
  a, b = promote(a, b)
  dt = float_dtype(a.dtype)
  return a.astype(dt), b.astype(dt)


def _signbit(x: Array) -> Array:
  """True for negative numbers and -0.0 (1 / -0.0 is -inf)."""
  return (x < 0) | ((x == 0) & (1.0 / where(x == 0, x, 1.0) < 0))


def _atan2(y: Array, x: Array) -> Array:
  """atan of the smaller-over-larger ratio (in [0, 1], so no overflow), then the octant fixes."""
  ay, ax = abs(y), abs(x)
  big, small = maximum(ay, ax), minimum(ay, ax)
  both_inf = isinf(ay) & isinf(ax)
  ratio = where(both_inf, 1.0, small / where(big == 0, 1.0, big))  # 0/0 -> 0: atan2(+-0, +-0) is +-0 or +-pi
  r = arctan(ratio)
  r = where(ay > ax, math.pi / 2 - r, r)
  r = where(_signbit(x), math.pi - r, r)
  r = where(_signbit(y), -r, r)
  return where(isnan(x) | isnan(y), x + y, r)


def _arctan2_dy(out: Array, y: Any, x: Any) -> Array:
  h = hypot(y, x)
  return x / h / h  # x / (x^2 + y^2) without the squares over- or underflowing


def _arctan2_dx(out: Array, y: Any, x: Any) -> Array:
  h = hypot(y, x)
  return -y / h / h


@derivatives(_arctan2_dy, _arctan2_dx)
def arctan2(y: Any, x: Any) -> Array:
  """The angle of the point (x, y), in [-pi, pi], with IEEE's signed-zero and infinity conventions."""
  y, x = _float_pair(y, x)
  if y.dtype in (dtypes.float16, dtypes.bfloat16):
    return _atan2(y.astype(dtypes.float32), x.astype(dtypes.float32)).astype(y.dtype)
  return _atan2(y, x)


def _inverse_sqrt(x: Array) -> Array: return 1.0 / sqrt(x)


@_halves_in_float32
@derivatives(lambda out, x: _inverse_sqrt((1.0 - x) * (1.0 + x)))
def arcsin(x: Array) -> Array:
  return _atan2(x, sqrt((1.0 - x) * (1.0 + x)))


@_halves_in_float32
@derivatives(lambda out, x: -_inverse_sqrt((1.0 - x) * (1.0 + x)))
def arccos(x: Array) -> Array:
  return _atan2(sqrt((1.0 - x) * (1.0 + x)), x)


def _log_large(x: Array) -> Array: return log(x) + LN_2  # log(2x), for x where x * x would overflow


def _sqrt_eps_inverse(x: Array) -> float:
  """Beyond this |x|, sqrt(x * x +- 1) == |x| in x's dtype: arcsinh and arccosh are log(2|x|)."""
  return 2.0 ** 12 if x.dtype is dtypes.float32 else 2.0 ** 27


@_halves_in_float32
@derivatives(lambda out, x: _inverse_sqrt(x * x + 1.0))
def arcsinh(x: Array) -> Array:
  """sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))."""
  t = abs(x)
  big = t > _sqrt_eps_inverse(x)
  safe = where(big, 1.0, t)
  small = log1p(safe + safe * safe / (1.0 + sqrt(1.0 + safe * safe)))
  r = where(big, _log_large(where(big, t, 1.0)), small)
  return where(_signbit(x), -r, r)


@_halves_in_float32
@derivatives(lambda out, x: _inverse_sqrt((x - 1.0) * (x + 1.0) + 0.0))  # + 0.0: -0.0 at x = -1 becomes +0.0
def arccosh(x: Array) -> Array:
  """log1p((x - 1) + sqrt((x - 1)(x + 1))): exact near 1; NaN below 1."""
  big = x > _sqrt_eps_inverse(x)
  safe = where(big, 1.0, x)
  d = safe - 1.0
  out = where(big, _log_large(where(big, x, 2.0)), log1p(d + sqrt(d * (safe + 1.0))))
  return where(x < 1.0, math.nan, out)   # (x - 1)(x + 1) is positive again for x < -1: the formula gives 0


@_halves_in_float32
@derivatives(lambda out, x: 1.0 / ((1.0 - x) * (1.0 + x)))
def arctanh(x: Array) -> Array:
  """sign(x) * log1p(2|x| / (1 - |x|)) / 2 (odd, so the log1p argument is never near -1): +-inf at +-1,
  NaN beyond."""
  t = abs(x)
  one = t == 1.0
  r = where(one, float("inf"), log1p(2.0 * t / where(one, 0.5, 1.0 - t)) * 0.5)
  return where(_signbit(x), -r, r)


def _logaddexp(a: Array, b: Array, exp_fn: Any, scale: float) -> Array:
  """max + log1p(exp(-|a - b|)) (scaled for base 2); equal operands (infinities too) give a + log(2)."""
  big = maximum(a, b)
  same = a == b
  gap = where(same, 0.0, -abs(a - b))
  out = big + log1p(exp_fn(gap)) * scale
  return where(same, a + math.log(2.0) * scale, out)


def _logaddexp_weight(scale: float) -> Any:
  """d/da of log(exp(a) + exp(b)) = sigmoid(a - b) (base 2: sigmoid((a - b) ln 2)): exactly 1/2 at a tie,
  with its own derivative there (the second order); 1 where a = +inf alone; NaN at a tie of infinities,
  whose limit depends on the direction of approach (logaddexp(x, x) has slope 1 there, logaddexp(x, inf)
  slope 0 in x)."""
  def weight(out: Array, v: Any, other: Any) -> Array:
    v, other = _float_pair(v, other)
    return expit((v - other) * scale).astype(out.dtype)
  return weight


def _swap_operands(weight: Any) -> Any: return lambda out, a, b: weight(out, b, a)


@derivatives(_logaddexp_weight(1.0), _swap_operands(_logaddexp_weight(1.0)))
def logaddexp(a: Any, b: Any) -> Array:
  """log(exp(a) + exp(b)) without overflow."""
  a, b = _float_pair(a, b)
  if a.dtype in (dtypes.float16, dtypes.bfloat16):
    return logaddexp(a.astype(dtypes.float32), b.astype(dtypes.float32)).astype(a.dtype)
  return _logaddexp(a, b, exp, 1.0)


@derivatives(_logaddexp_weight(LN_2), _swap_operands(_logaddexp_weight(LN_2)))
def logaddexp2(a: Any, b: Any) -> Array:
  """log2(2**a + 2**b) without overflow."""
  a, b = _float_pair(a, b)
  if a.dtype in (dtypes.float16, dtypes.bfloat16):
    return logaddexp2(a.astype(dtypes.float32), b.astype(dtypes.float32)).astype(a.dtype)
  return _logaddexp(a, b, exp2, 1.0 / LN_2)


def _hypot_slope(out: Array, v: Any, other: Any) -> Array:
  """v / hypot; at the origin 1/2 for each argument, as JAX (its hypot takes max(|a|, |b|), a tie there)."""
  return where(out == 0, 0.5, v / where(out == 0, 1.0, out)).astype(out.dtype)


@derivatives(_hypot_slope, lambda out, a, b: _hypot_slope(out, b, a))
def hypot(a: Any, b: Any) -> Array:
  """sqrt(a^2 + b^2) as big * sqrt(1 + (small/big)^2), so no square overflows; inf if either is inf."""
  a, b = _float_pair(a, b)
  if a.dtype in (dtypes.float16, dtypes.bfloat16):
    return hypot(a.astype(dtypes.float32), b.astype(dtypes.float32)).astype(a.dtype)
  aa, ab = abs(a), abs(b)
  big, small = maximum(aa, ab), minimum(aa, ab)
  zero = big == 0
  ratio = small / where(zero, 1.0, big)
  out = where(zero, 0.0, big * sqrt(1.0 + ratio * ratio))
  return where(isinf(aa) | isinf(ab), float("inf"), out)


@_halves_in_float32
def sinc(x: Array) -> Array:
  """sin(pi x) / (pi x), 1 at 0. The argument is first reduced by whole periods (x - 2 round(x / 2) is
  exact), so pi * x does not lose the phase for large x."""
  zero = x == 0
  safe = where(zero, 1.0, x)
  reduced = safe - 2.0 * round(safe * 0.5)
  return where(zero, 1.0, sin(reduced * math.pi) / (safe * math.pi))


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
  """|a - b| <= atol + rtol * |b|, elementwise; infinities are close only to themselves."""
  a, b = promote(a, b)
  if not a.dtype.is_inexact: return isclose(*_float_pair(a, b), rtol, atol, equal_nan)
  finite = ~(isinf(a) | isinf(b))
  close = abs(a - b) <= atol + rtol * abs(b)
  out = where(finite, close, a == b)
  return out | (isnan(a) & isnan(b)) if equal_nan else out


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Array:
  return _all(isclose(a, b, rtol, atol, equal_nan))


# the short names of jax.numpy (and the array API)
asin, acos, atan, atan2, asinh, acosh, atanh = arcsin, arccos, arctan, arctan2, arcsinh, arccosh, arctanh
