"""Special functions (`tgfn.scipy.special`), composed from IR ops: no host kernels, so they fuse into
the kernels around them and work under grad, jvp, vmap and jit on every device.

Each is evaluated in float64 and rounded once to the input's float dtype (float32 results are then
within about half an ulp of the true value, plus the float64 error below); integer inputs give the
default float. A device without float64 (WEBGPU) runs the same algorithms in float32 (`_wide`), a few
ulps off (docs/scipy.md). Measured errors (`python -m tgfn.tools.special_accuracy`) are in docs/scipy.md.

- erf, erfc: a Taylor series for |x| < 1; beyond it erfc(x) = exp(-x^2) erfcx(x), with erfcx fitted by
  Chebyshev series on [1, 2], [2, 4], [4, 8] (tgfn/tools/special_coefficients.py) and its asymptotic
  series past 8. exp(-x^2) is taken as exp(-h^2) exp(-(x - h)(x + h)) with h = x rounded to 26 bits, so
  that x^2 is exact enough for a relative error near 1e-15 deep in the tail.
- erfinv, erfcinv, ndtri: Winitzki's closed form (2e-3) refined by two Halley steps on erf (or on erfc in the
  tails, so that inputs close to +-1 keep their precision).
- gammaln, digamma: Stirling's (de Moivre's) series at x >= 10, the recurrences below that, the
  reflection formulas for x < 0.5. Near the roots of gammaln (1, 2) and digamma (1.4616...) the error is
  absolute, about 1e-15, not relative.

Derivatives are the exact formulas (custom_jvp), e.g. erf' = 2/sqrt(pi) exp(-x^2), digamma' = trigamma
(by the same recurrence, series and reflection as digamma).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from tgfn.array import Array, as_array
from tgfn.device import has_64bit
from tgfn.dtype import dtypes
from tgfn.ops.axes import normalize_axes
from tgfn.ops.elementwise import abs as _abs, clip, exp, floor, isinf, isnan, log, log1p, sign, sin, sqrt, tan, where
from tgfn.ops.reduction import max as _max, sum as _sum
from tgfn.ops.shape import squeeze
from tgfn.transforms.custom import custom_jvp, derivatives
from tgfn.uop.ops import Ops

__all__ = ["erf", "erfc", "erfinv", "erfcinv", "erfcx", "ndtr", "ndtri", "log_ndtr", "expit", "logit", "gammaln",
           "digamma", "psi", "xlogy", "xlog1py", "logsumexp", "softmax", "log_softmax"]

_F64 = dtypes.float64
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI = math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)

# erfcx on [lo, hi]: Chebyshev coefficients in u = (2x - lo - hi) / (hi - lo)
_ERFCX_PIECES = (
  (1.0, 2.0, (
    0.33142728163945195, -0.08500213770674317, 0.009951127341466103, -0.0010810888102208154,
    0.00011023243631194065, -1.0636830518206985e-05, 9.775012680184152e-07, -8.597922868915778e-08,
    7.267708385798575e-09, -5.923543827018202e-10, 4.668395159715935e-11, -3.5661301570031897e-12,
    2.6458449866551634e-13, -1.9091342989808026e-14, 1.3456183024813287e-15, -9.077097026765575e-17,
    -5.366526958391808e-19
  )),
  (2.0, 4.0, (
    0.18742956902622407, -0.05794652883669098, 0.008595247387396525, -0.0012284613640242434,
    0.00016974366686178943, -2.273832933703351e-05, 2.9598443787893757e-06, -3.75135755810282e-07,
    4.6372828748569926e-08, -5.599455399878289e-09, 6.613160673765742e-10, -7.648272251500788e-11,
    8.67090667616438e-12, -9.645564347361957e-13, 1.0536375433652109e-13, -1.1349856863218626e-14,
    1.1919045843260784e-15, -1.1253836906945275e-16, 0.0, 1.8829397077645658e-17, -3.347448369359229e-17,
    1.8829397077645658e-17, -2.5105862770194217e-17
  )),
  (4.0, 8.0, (
    0.09799557556862196, -0.032617162422838804, 0.005354444513048933, -0.0008675085617618368,
    0.00013878345773328957, -2.1933248302179217e-05, 3.425716824397914e-06, -5.289955530513028e-07,
    8.079076526515201e-08, -1.2207511693495175e-08, 1.8255151395920068e-09, -2.702497001251944e-10,
    3.9617523684708393e-11, -5.752624055617037e-12, 8.275730663845245e-13, -1.1800170896296175e-13,
    1.6666821492314053e-14, -2.334506883097287e-15, 3.1486936224285244e-16, -3.452056130901704e-17,
    -1.4645086615946625e-17, 1.2552931385097104e-17, -1.6737241846796145e-17
  )),
)


def _float_in(x: Any) -> Array:
  x = as_array(x)
  return x if x.dtype.is_float else x.astype(dtypes.default_float)


def _wide(x: Array) -> Array:
  """x in the dtype the functions are evaluated in: float64, or float32 on a device without it (WEBGPU)."""
  return x.astype(_F64 if has_64bit(x.device) else dtypes.float32)


def _nan_in_nan_out(x: Array, out: Array) -> Array:
  """Branches are picked by comparisons, which NaN fails: give NaN inputs NaN explicitly."""
  return where(isnan(x), math.nan, out)


def _k(value: float, like: Array) -> Array: return Array.const(value, like.dtype, like.shape)


def _clenshaw(coefficients: tuple[float, ...], u: Array) -> Array:
  """sum_k c_k T_k(u), by Clenshaw's recurrence. Built with the primitive builders (no promotion): the
  loops here make most of these functions' nodes, and graph building is Python time per call."""
  two_u = u._alu(Ops.ADD, u)
  b1, b2 = _k(0.0, u), _k(0.0, u)
  for c in reversed(coefficients[1:]):
    b1, b2 = two_u._alu(Ops.MUL, b1)._alu(Ops.SUB, b2)._alu(Ops.ADD, _k(c, u)), b1
  return u._alu(Ops.MUL, b1)._alu(Ops.SUB, b2)._alu(Ops.ADD, _k(coefficients[0], u))


def _horner(coefficients: tuple[float, ...], z: Array) -> Array:
  """sum_k c_k z^k (float64, no promotion, as _clenshaw)."""
  acc = _k(coefficients[-1], z)
  for c in reversed(coefficients[:-1]): acc = acc._alu(Ops.MUL, z)._alu(Ops.ADD, _k(c, z))
  return acc


def _erfcx_tail(x: Array) -> Array:
  """exp(x^2) erfc(x) for x >= 1 (float64)."""
  out = _erfcx_asymptotic(where(x > 8.0, x, 8.0))
  for lo, hi, coefficients in reversed(_ERFCX_PIECES):
    inside = x < hi
    u = (2.0 * clip(x, lo, hi) - (lo + hi)) / (hi - lo)
    out = where(inside, _clenshaw(coefficients, u), out)
  return out


_ERFCX_ASYMPTOTIC = tuple((-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(17))


def _erfcx_asymptotic(x: Array) -> Array:
  """sum_n (-1)^n (2n-1)!! / (2x^2)^n / (x sqrt(pi)), 16 terms: below 2e-16 relative at x >= 8."""
  q = 1.0 / (2.0 * x * x)
  return _horner(_ERFCX_ASYMPTOTIC, q) / (x * _SQRT_PI)


def _high_half(x: Array) -> Array:
  """x rounded to half its mantissa (Veltkamp's split: 26 bits of float64, 12 of float32), so that its square is
  exact. (Not a round trip through float32: the CPU path currently folds that cast pair away.)"""
  c = x * (134217729.0 if x.dtype is _F64 else 4097.0)  # 2^27 + 1, 2^12 + 1
  return c - (c - x)


def _exp_minus_square(x: Array) -> Array:
  """exp(-x^2) without the rounding of x^2: split x = h + (x - h) with h's square exact."""
  h = _high_half(x)
  return exp(-(h * h)) * exp(-((x - h) * (x + h)))


# erf(x) = 2/sqrt(pi) x sum_n c_n x^(2n), c_n = (-1)^n / (n! (2n + 1)); 21 terms reach 1e-19 at |x| = 1
_ERF_SERIES = tuple((-1.0) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(21))


def _erf_series(x: Array) -> Array:
  """erf for |x| <= 1 (float64)."""
  return _TWO_OVER_SQRT_PI * x * _horner(_ERF_SERIES, x * x)


def _parts(v: Array) -> tuple[Array, Array]:
  """For v >= 0: erf(min(v, 1)) by the series and erfcx(max(v, 1)) by the fits. Every function of the erf
  family is built from this one pair, so each evaluates one series and one fit."""
  return _erf_series(where(v < 1.0, v, 1.0)), _erfcx_tail(where(v > 1.0, v, 1.0))


def _erfc_from(v: Array, series: Array, tail: Array, exp_minus_v2: Array) -> Array:
  """erfc(v) for v >= 0 from its _parts and exp(-v^2); 0 past the underflow (and at inf)."""
  return where(v <= 1.0, 1.0 - series, where(v > 27.3, 0.0, exp_minus_v2 * tail))


def _erf_erfc64(x: Array) -> tuple[Array, Array]:
  ax = _abs(x)
  series, tail = _parts(ax)
  erfc_ax = _erfc_from(ax, series, tail, _exp_minus_square(where(ax > 27.3, 0.0, ax)))
  erf = sign(x) * where(ax <= 1.0, series, 1.0 - erfc_ax)
  erfc = where(x >= 0, erfc_ax, 2.0 - erfc_ax)
  return _nan_in_nan_out(x, erf), _nan_in_nan_out(x, erfc)


def _erf64(x: Array) -> Array: return _erf_erfc64(x)[0]


def _erfc64(x: Array) -> Array: return _erf_erfc64(x)[1]


@custom_jvp
def _erf(x: Array) -> Array: return _erf64(_wide(x)).astype(x.dtype)


@_erf.defjvp
def _erf_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _erf(x), t * (_TWO_OVER_SQRT_PI * exp(-x * x))


@custom_jvp
def _erfc(x: Array) -> Array: return _erfc64(_wide(x)).astype(x.dtype)


@_erfc.defjvp
def _erfc_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _erfc(x), t * (-_TWO_OVER_SQRT_PI * exp(-x * x))


def erf(x: Any) -> Array:
  """The error function 2/sqrt(pi) * integral_0^x exp(-t^2) dt."""
  return _erf(_float_in(x))


def erfc(x: Any) -> Array:
  """1 - erf(x), accurate where erf(x) is close to 1."""
  return _erfc(_float_in(x))


def _erfcx64(x: Array) -> Array:
  ax = _abs(x)
  series, tail = _parts(ax)
  erfc_ax = _erfc_from(ax, series, tail, _exp_minus_square(where(ax > 27.3, 0.0, ax)))
  near = exp(x * x) * where(x >= 0, erfc_ax, 2.0 - erfc_ax)
  return _nan_in_nan_out(x, where(x > 1.0, tail, near))


@custom_jvp
def _erfcx(x: Array) -> Array: return _erfcx64(_wide(x)).astype(x.dtype)


@_erfcx.defjvp
def _erfcx_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  out = _erfcx(x)
  return out, t * (2.0 * x * out - _TWO_OVER_SQRT_PI)


def erfcx(x: Any) -> Array:
  """exp(x^2) erfc(x), without overflow for large x."""
  return _erfcx(_float_in(x))


# ---- inverses: Halley's method on erf (|y| <= 0.5) or on erfc (the tails, given z = 1 - |y| exactly)
def _erfinv_from(y: Array, z: Array) -> Array:
  """x >= 0 with erf(x) = y = 1 - z (float64, 0 <= y <= 1): y and z both given, so neither loses digits."""
  # Winitzki's closed form as the starting point (about 2e-3 relative); log(1 - y^2) = log(z (2 - z))
  a = 0.147
  safe_z = where(z > 0, z, 1.0)
  w = log(safe_z) + log(2.0 - z)
  p = 2.0 / (math.pi * a) + 0.5 * w
  x = sqrt(sqrt(p * p - w / a) - p)
  use_erf = y <= 0.5
  log_z = log(safe_z)
  for _ in range(2):  # Halley triples the digits: 2e-3 -> 1e-8 -> below float64's rounding
    series, tail = _parts(x)
    # near 0 (x < 0.48, so erf(x) is the series), on f = erf(x) - y: f'' / f' = -2x
    r = (series - y) / (_TWO_OVER_SQRT_PI * _exp_minus_square(where(use_erf, x, 0.0)))
    near_zero = x - r / (1.0 - x * r)
    # in the tail, on g = log erfc(x) - log z = log erfcx(x) - x^2 - log z, nearly a parabola, so tiny z
    # converge as fast: g' = -2 / (sqrt(pi) erfcx), g'' / g' = 2 / (sqrt(pi) erfcx) - 2x
    ex = where(x > 1.0, tail, exp(x * x) * (1.0 - series))
    r = (log(ex) - x * x - log_z) * (-0.5 * _SQRT_PI * ex)
    tail = x - r / (1.0 + r * (x - 1.0 / (_SQRT_PI * ex)))
    x = where(use_erf, near_zero, tail)
  return where(z > 0, x, math.inf)


def _erfinv64(y: Array) -> Array:
  ay = _abs(y)
  x = sign(y) * _erfinv_from(ay, 1.0 - ay)
  return _nan_in_nan_out(y, where(ay > 1.0, math.nan, x))


def _erfcinv64(z: Array) -> Array:
  """x with erfc(x) = z, 0 <= z <= 2."""
  lower = z <= 1.0
  zz = where(lower, z, 2.0 - z)  # erfc(-x) = 2 - erfc(x)
  x = _erfinv_from(1.0 - zz, zz)
  return where((z < 0) | (z > 2) | isnan(z), math.nan, where(lower, x, -x))


@custom_jvp
def _erfinv(y: Array) -> Array: return _erfinv64(_wide(y)).astype(y.dtype)


@_erfinv.defjvp
def _erfinv_jvp(primals, tangents):
  (y,), (t,) = primals, tangents
  x = _erfinv(y)
  return x, t * (0.5 * _SQRT_PI) * exp(x * x)


@custom_jvp
def _erfcinv(z: Array) -> Array: return _erfcinv64(_wide(z)).astype(z.dtype)


@_erfcinv.defjvp
def _erfcinv_jvp(primals, tangents):
  (z,), (t,) = primals, tangents
  x = _erfcinv(z)
  return x, t * (-0.5 * _SQRT_PI) * exp(x * x)


def erfinv(y: Any) -> Array:
  """The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside)."""
  return _erfinv(_float_in(y))


def erfcinv(z: Any) -> Array:
  """The inverse of erfc on [0, 2] (+inf at 0, -inf at 2, NaN outside)."""
  return _erfcinv(_float_in(z))


# ---- the standard normal distribution
def _half_square_exp(x: Array) -> Array:
  """exp(-x^2 / 2) with x^2 split exactly (see _exp_minus_square)."""
  h = _high_half(x)
  return exp(-0.5 * (h * h)) * exp(-0.5 * ((x - h) * (x + h)))


def _half_erfc_of_abs(x: Array) -> tuple[Array, Array, Array]:
  """erfc(|x| / sqrt(2)) / 2 (the normal tail beyond |x|), with its _parts. Rounding |x| / sqrt(2) costs
  the smooth erfcx one ulp; exp(-x^2 / 2) is taken from x itself, so the tail keeps full precision."""
  ax = _abs(x)
  v = ax / _SQRT2
  series, tail = _parts(v)
  return 0.5 * _erfc_from(v, series, tail, _half_square_exp(where(v > 27.3, 0.0, ax))), series, tail


def _ndtr64(x: Array) -> Array:
  half_erfc = _half_erfc_of_abs(x)[0]
  return _nan_in_nan_out(x, where(x < 0, half_erfc, 1.0 - half_erfc))


@custom_jvp
def _ndtr(x: Array) -> Array: return _ndtr64(_wide(x)).astype(x.dtype)


@_ndtr.defjvp
def _ndtr_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _ndtr(x), t * exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def ndtr(x: Any) -> Array:
  """The standard normal CDF, erfc(-x / sqrt(2)) / 2."""
  return _ndtr(_float_in(x))


def ndtri(p: Any) -> Array:
  """The inverse of ndtr: -sqrt(2) erfcinv(2p)."""
  p = _float_in(p)
  return (-_SQRT2 * _erfcinv(2.0 * _wide(p))).astype(p.dtype)


@custom_jvp
def _log_ndtr(x: Array) -> Array:
  xw = _wide(x)
  half_erfc, _, tail = _half_erfc_of_abs(xw)
  # x < -sqrt(2): log(erfc(v) / 2) = log(erfcx(v) / 2) - x^2 / 2, which never underflows; x > 0:
  # log1p(-(the upper tail)); in between, log of the CDF itself
  far = log(0.5 * tail) - 0.5 * xw * xw
  out = where(xw < -_SQRT2, far, where(xw > 0, log1p(-half_erfc), log(half_erfc)))
  return _nan_in_nan_out(xw, out).astype(x.dtype)


@_log_ndtr.defjvp
def _log_ndtr_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  out = _log_ndtr(x)
  # d/dx log Phi(x) = phi(x) / Phi(x) = exp(log phi(x) - log Phi(x))
  return out, t * exp(-0.5 * x * x - 0.5 * math.log(2 * math.pi) - out)


def log_ndtr(x: Any) -> Array:
  """log(ndtr(x)), accurate far into both tails."""
  return _log_ndtr(_float_in(x))


# ---- logistic
def expit(x: Any) -> Array:
  """1 / (1 + exp(-x)), without overflow for either sign."""
  x = _float_in(x)
  e = exp(-_abs(x))
  return where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype)


@derivatives(lambda out, p: 1.0 / (p * (1.0 - p)))
def logit(p: Any) -> Array:
  """log(p / (1 - p))."""
  p = _float_in(p)
  return (log(p) - log1p(-p)).astype(p.dtype)


# d/dx is log(y) also at x = 0 (the where below would make it 0), d/dy is x / y
@derivatives(lambda out, x, y: log(y), lambda out, x, y: x / as_array(y))
def xlogy(x: Any, y: Any) -> Array:
  """x * log(y), 0 where x == 0 (even if y is 0)."""
  x, y = _float_in(x), _float_in(y)
  safe_y = where(x == 0, 1.0, y).astype(y.dtype)
  return where(x == 0, 0.0, x * log(safe_y)).astype((x * y).dtype)


@derivatives(lambda out, x, y: log1p(y), lambda out, x, y: x / (1.0 + as_array(y)))
def xlog1py(x: Any, y: Any) -> Array:
  """x * log1p(y), 0 where x == 0 (even if y is -1)."""
  x, y = _float_in(x), _float_in(y)
  safe_y = where(x == 0, 0.0, y).astype(y.dtype)
  return where(x == 0, 0.0, x * log1p(safe_y)).astype((x * y).dtype)


# ---- gamma function
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)
_STIRLING_MIN = 10.0


def _shift_up(x: Array) -> tuple[Array, list[Array]]:
  """x + n >= 10 for 0.5 <= x < 10 (n whole), and the factors x, x + 1, ... it was shifted past (1 if none)."""
  below = [x + k < _STIRLING_MIN for k in range(10)]
  factors = [where(b, x + k, 1.0) for k, b in enumerate(below)]
  n = below[0].astype(x.dtype)
  for b in below[1:]: n = n + b.astype(x.dtype)
  return x + n, factors


def _zeta_minus_one(k: int) -> float:
  """zeta(k) - 1 = sum_{n >= 2} n^-k: 999 terms, then the Euler-Maclaurin tail (error far below 1e-17)."""
  n = 1000.0
  head = math.fsum(m ** -k for m in range(2, 1000))
  return head + n ** (1 - k) / (k - 1) + 0.5 * n ** -k + k * n ** (-k - 1) / 12


# log Gamma(2 + e) = (1 - euler_gamma) e + sum_{k >= 2} (-1)^k (zeta(k) - 1) / k e^k, for |e| <= 1/2: the
# terms shrink like 4^-k, so 28 of them reach 1e-17. Around the root at 2 it is relatively accurate.
_LGAMMA_AROUND_2 = (0.0, 1.0 - 0.5772156649015329) + tuple((-1) ** k * _zeta_minus_one(k) / k for k in range(2, 29))


def _lgamma_near_2(e: Array) -> Array: return e * _horner(_LGAMMA_AROUND_2[1:], e)


def _lgamma_positive(x: Array) -> Array:
  """log Gamma(x) for x >= 0.5 (float64): the series around 2 on [0.5, 10) (moved there by
  log Gamma(x) = log Gamma(x - 1) + log(x - 1), adding positive terms, or by - log(x) below 1.5),
  Stirling's series beyond."""
  # x in [1.5, 10): down to [1.5, 2.5) in m steps, and log of the product of the factors stepped over
  steps = [x - k >= 1.5 for k in range(1, 9)]
  product = where(steps[0], x - 1.0, 1.0)
  m = steps[0].astype(x.dtype)
  for k, step in enumerate(steps[1:], start=2):
    product, m = product * where(step, x - k, 1.0), m + step.astype(x.dtype)
  mid = _lgamma_near_2(clip(x - m - 2.0, -0.5, 0.5)) + log(product)
  low = _lgamma_near_2(clip(x - 1.0, -0.5, 0.5)) - log(where(x < 1.5, x, 1.0))  # log Gamma(x + 1) - log(x)
  xs = where(x >= _STIRLING_MIN, x, _STIRLING_MIN)
  inv, inv2 = 1.0 / xs, 1.0 / (xs * xs)
  series = inv2 * 0.0
  for k in range(len(_BERNOULLI), 0, -1): series = series * inv2 + _BERNOULLI[k - 1] / (2 * k * (2 * k - 1))
  stirling = (xs - 0.5) * log(xs) - xs + 0.5 * math.log(2 * math.pi) + series * inv
  return where(x < 1.5, low, where(x < _STIRLING_MIN, mid, stirling))


def _sin_pi(x: Array) -> Array:
  """sin(pi x) with the argument reduced exactly first (x - round(x) is exact)."""
  r = x - floor(x + 0.5)
  return sin(math.pi * r) * where(_is_odd(floor(x + 0.5)), -1.0, 1.0)


def _is_odd(n: Array) -> Array: return (n - 2.0 * floor(n * 0.5)) != 0


@custom_jvp
def _gammaln(x: Array) -> Array:
  xw = _wide(x)
  reflect = xw < 0.5
  positive = _lgamma_positive(where(reflect, 1.0 - xw, xw))
  s = _abs(_sin_pi(xw))
  reflected = math.log(math.pi) - log(where(s > 0, s, 1.0)) - positive
  out = where(reflect, where(s > 0, reflected, math.inf), positive)
  return _nan_in_nan_out(xw, where(isinf(xw), math.inf, out)).astype(x.dtype)


@_gammaln.defjvp
def _gammaln_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return _gammaln(x), t * digamma(x)


def gammaln(x: Any) -> Array:
  """log|Gamma(x)| (inf at 0 and the negative integers)."""
  return _gammaln(_float_in(x))


def _digamma_positive(x: Array) -> Array:
  xs, factors = _shift_up(x)
  inv2 = 1.0 / (xs * xs)
  series = inv2 * 0.0
  for k in range(len(_BERNOULLI), 0, -1): series = series * inv2 + _BERNOULLI[k - 1] / (2 * k)
  out = log(xs) - 0.5 / xs - series * inv2
  for k, f in enumerate(factors):  # psi(x) = psi(x + 1) - 1/x, for each step of the shift
    out = out - where(x + k < _STIRLING_MIN, 1.0 / f, 0.0)
  return out


def _trigamma_positive(x: Array) -> Array:
  """psi'(x) for x >= 0.5: psi'(x) = psi'(x + 1) + 1/x^2 up to x + n >= 10, then the asymptotic series
  1/x + 1/(2x^2) + sum_k B_2k / x^(2k+1)."""
  xs, factors = _shift_up(x)
  inv2 = 1.0 / (xs * xs)
  series = inv2 * 0.0
  for k in range(len(_BERNOULLI), 0, -1): series = series * inv2 + _BERNOULLI[k - 1]
  out = (1.0 + 0.5 / xs + series * inv2) / xs
  for k, f in enumerate(factors): out = out + where(x + k < _STIRLING_MIN, 1.0 / (f * f), 0.0)
  return out


def _trigamma(x: Any) -> Array:
  """psi'(x), the derivative of digamma: the reflection psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x) below
  1/2, so +inf at 0 and the negative integers (the slope of psi is +inf on both sides of a pole)."""
  x = _float_in(x)
  xw = _wide(x)
  reflect = xw < 0.5
  positive = _trigamma_positive(where(reflect, 1.0 - xw, xw))
  s = _sin_pi(xw)
  return where(reflect, math.pi ** 2 / (s * s) - positive, positive).astype(x.dtype)


@derivatives(lambda out, x: _trigamma(x))
def digamma(x: Any) -> Array:
  """psi(x) = d/dx log Gamma(x) (-inf at 0, NaN at the negative integers, as SciPy)."""
  x = _float_in(x)
  xw = _wide(x)
  reflect = xw < 0.5
  positive = _digamma_positive(where(reflect, 1.0 - xw, xw))
  r = xw - floor(xw + 0.5)
  pole = reflect & (r == 0)
  # psi(x) = psi(1 - x) - pi / tan(pi x), tan(pi x) = tan(pi r) with r the exact reduced argument
  reflected = positive - math.pi / tan(math.pi * where(reflect & ~pole, r, 0.5))  # no inf on unused lanes
  out = where(pole, math.nan, where(reflect, reflected, positive))
  # SciPy: -inf at 0, NaN at the negative integers
  return _nan_in_nan_out(xw, where(xw == 0, -math.inf, out)).astype(x.dtype)


psi = digamma


# ---- reductions
def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False) -> Any:
  """log(sum(b * exp(a))) over `axis` (None: all), stable for any magnitude. With return_sign, also the
  sign of the sum (and the log of its absolute value); without, a negative sum gives NaN, as SciPy."""
  a = _float_in(a)
  if b is not None:
    b = as_array(b)
    a, b = a * (b * 0 + 1).astype(a.dtype), (b + a * 0).astype(a.dtype)  # broadcast both
  axes = normalize_axes(axis, a.ndim)
  peak = _max(a, axis=axes, keepdims=True)
  peak = where(isinf(peak), 0.0, peak).astype(a.dtype)  # all -inf (or an inf) slices: shift by 0
  scaled = exp(a - peak) if b is None else b * exp(a - peak)
  total = _sum(scaled, axis=axes, keepdims=True)
  out = log(_abs(total)) + peak
  sgn = sign(total)
  if not return_sign: out = where(total < 0, math.nan, out).astype(a.dtype)
  if not keepdims: out, sgn = squeeze(out, axes), squeeze(sgn, axes)
  return (out, sgn) if return_sign else out


def softmax(x: Any, axis: Optional[Any] = None) -> Array:
  """exp(x) / sum(exp(x)) over `axis` (None: the whole array, as SciPy)."""
  x = _float_in(x)
  axes = normalize_axes(axis, x.ndim)
  peak = _max(x, axis=axes, keepdims=True)
  e = exp(x - where(isinf(peak), 0.0, peak).astype(x.dtype))
  return e / _sum(e, axis=axes, keepdims=True)


def log_softmax(x: Any, axis: Optional[Any] = None) -> Array:
  """x - logsumexp(x) over `axis` (None: the whole array, as SciPy)."""
  x = _float_in(x)
  return x - logsumexp(x, axis=axis, keepdims=True)
