"""Transcendental functions built from basic arithmetic, for renderers without exp2/log2/sin.

`decompose_transcendentals` rewrites every float32/float64 EXP2, LOG2 and SIN (half types were
widened to float32 by `promote_halves` before this runs) into ADD, SUB, MUL, FDIV, CMPLT, CMPNE,
WHERE, AND, OR, SHL, SHR, NEG, CAST and same-size BITCAST. Each function reduces its argument to a
small interval, evaluates a polynomial there and undoes the reduction exactly:

  exp2(x) = 2^n * 2^f       n = round(x), f in [-0.5, 0.5]; 2^n is built in the exponent bits
  log2(x) = e + log2(m)     x = m * 2^e with m in [sqrt(1/2), sqrt(2)), read from the bits;
                            log2(m) = 2/ln2 * atanh(t), t = (m - 1) / (m + 1), an odd series in t
  sin(x)  = +-sin(r) or +-cos(r)   x = n * pi/2 + r, |r| <= pi/4, the quadrant n mod 4 picks which

Accuracy, measured on 2M random inputs per case against NumPy in a wider type (float64 for
float32, long double for float64): exp2 1.1 ulp (a denormal result may be one step off), log2 2.9 ulp
(both dtypes), sin 2.4 ulp (float32, |x| < 51000) and 1.5 ulp (float64, |x| < 1e6). The
reduction of sin is exact for |n| < 2^15 (float32) and 2^33 (float64), so the absolute error stays
about an ulp of 1 up to |x| ~ 51000 and ~1.3e10; beyond, results are inaccurate but stay in [-1, 1].
Special values follow C99/NumPy: exp2 overflows to inf and underflows (gradually) to 0,
log2(0) = -inf, log2(x < 0) = NaN, log2(inf) = inf, sin(+-inf) = NaN, and NaN in gives NaN out.

The code relies only on the semantics every renderer must provide (tgfn/uop/alu.py): IEEE binary
arithmetic rounding to nearest, without reassociation or flushing denormals to zero. A contracted
multiply-add (FMA) anywhere is harmless: every step stays correct, or gets more accurate, fused.

Polynomial coefficients are minimax fits (Remez exchange, minimizing the maximum *relative* error,
in 40-digit mpmath arithmetic), rounded to the dtype. `_remez` in tests/codegen/test_decompositions.py
re-derives every table below and checks it; each comment names the fitted function and the interval.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from tgfn.dtype import DType, dtypes
from tgfn.uop.ops import Ops, PatternMatcher, UOp, UPat


def force_decomposition() -> bool:
  """`TRANSCENDENTAL=2` decomposes on every renderer, so CPU and PYTHON can test the decompositions.
  Read at each call (not cached), so tests can switch it; compiled-kernel caches must key on it."""
  return int(os.environ.get("TRANSCENDENTAL", "1") or 1) >= 2


# pi/2 in fixed point with 128 fraction bits: int(mpmath.floor(mpmath.pi / 2 * 2**128)) at 60 digits
_PI_2_Q128 = 0x1921FB54442D18469898CC51701B839A2


def _split_pi_2(parts: int, part_bits: int, mantissa_bits: int) -> tuple[float, ...]:
  """pi/2 = C1 + ... + Ck (k = `parts`) up to a tail below 2^-((k - 1) * part_bits + mantissa_bits):
  a Cody-Waite split. All but the last part hold the next `part_bits` significant bits of pi/2
  (truncated), so n * Ci is exact for |n| < 2^(mantissa_bits - part_bits); the last part is the rest,
  rounded to `mantissa_bits` significant bits."""
  rest, out = _PI_2_Q128, []
  for _ in range(parts - 1):
    drop = rest.bit_length() - part_bits
    out.append(rest >> drop << drop)
    rest -= out[-1]
  drop = rest.bit_length() - mantissa_bits
  out.append((rest + (1 << (drop - 1))) >> drop << drop)
  # every part has at most 53 significant bits, so int -> float is exact
  return tuple(math.ldexp(float(p), -128) for p in out)


@dataclass(frozen=True)
class _Format:
  """The IEEE-754 layout of a float dtype and the constants its decompositions use."""
  bits: DType                    # the same-size integer type the bits are handled in
  mantissa: int                  # explicit fraction bits
  bias: int                      # exponent bias
  exp2_poly: tuple[float, ...]   # P, ascending: 2^f = 1 + f * P(f)
  log2_poly: tuple[float, ...]   # Q, ascending: log2(m) = t * Q(t^2)
  sin_poly: tuple[float, ...]    # S, ascending: sin(r) = r + r^3 * S(r^2)
  cos_poly: tuple[float, ...]    # C, ascending: cos(r) = 1 + r^2 * C(r^2)
  sin_bound: float               # |r| after reduction never exceeds this; S and C are fitted up to it
  pi_2: tuple[float, ...]        # the Cody-Waite split of pi/2

  @property
  def min_normal(self) -> float: return math.ldexp(1.0, 1 - self.bias)

  @property
  def round_magic(self) -> float:
    """(y + M) - M rounds y to the nearest integer (ties to even) for |y| < 2^(mantissa - 1): the sum
    lands in [2^mantissa, 2^(mantissa+1)) where the float spacing is exactly 1."""
    return 1.5 * 2.0 ** self.mantissa


_FORMATS = {
  dtypes.float32: _Format(
    dtypes.int32, 23, 127,
    # P: (2^f - 1) / f on f in [-1/2, 1/2], degree 5: relative error 1.1e-8 (2^f's: < 4.4e-9)
    exp2_poly=(0.6931472, 0.24022649, 0.055503573, 0.009618238, 0.0013390735, 0.00015403512),
    # Q: 2 atanh(t) / (t ln 2) on z = t^2 in [0, 0.0295] (|t| <= 3 - 2 sqrt 2), degree 3: 7.0e-10
    log2_poly=(2.88539, 0.96179885, 0.5767128, 0.431779),
    # S: (sin(r) / r - 1) / r^2 on z = r^2 in [0, 0.79^2], degree 2: 1.3e-7 (sin's: < 1.5e-8)
    sin_poly=(-0.16666664, 0.008332731, -0.0001958439),
    # C: (cos(r) - 1) / r^2 on z = r^2 in [0, 0.79^2], degree 3: 6.6e-10 (cos's: < 3e-10)
    cos_poly=(-0.5, 0.04166665, -0.0013887549, 2.4458834e-05),
    # pi/4 plus the worst rounding of n = round(x * 2/pi) for |n| < 2^15 (pi/2 * 2^15 * 2^-24 < 0.004)
    sin_bound=0.79,
    # |n| < 2^15 (|x| < 51000) keeps n*C1, n*C2, n*C3 exact in 24 bits; n * (tail < 2^-51) < 2^-36
    pi_2=_split_pi_2(4, 9, 24)),
  dtypes.float64: _Format(
    dtypes.int64, 52, 1023,
    # P: degree 10 on [-1/2, 1/2]: relative error 1.8e-17 (2^f's: < 7.3e-18)
    exp2_poly=(0.6931471805599453, 0.24022650695910097, 0.05550410866482123, 0.009618129107607063,
               0.0013333558146531642, 0.00015403530441481295, 1.5252733701202008e-05,
               1.3215442723870115e-06, 1.0178121305080866e-07, 7.072561769865359e-09,
               4.4455362630234526e-10),
    # Q: degree 7 on [0, 0.0295]: 1.2e-18
    log2_poly=(2.8853900817779268, 0.9617966939259901, 0.5770780163453378, 0.4121985858810384,
               0.320598530730757, 0.2623345752115496, 0.22090722999164888, 0.21371918631219852),
    # S: degree 5 on [0, 0.786^2]: 1.3e-16 (sin's: < 1.5e-17)
    sin_poly=(-0.16666666666666666, 0.008333333333330906, -0.00019841269836699888, 2.7557316074170783e-06,
              -2.505112626335869e-08, 1.591774638181939e-10),
    # C: degree 6 on [0, 0.786^2]: 4.1e-19
    cos_poly=(-0.5, 0.04166666666666664, -0.0013888888888880604, 2.4801587293569616e-05,
              -2.755731552602489e-07, 2.0875880697393547e-09, -1.1367659730356011e-11),
    # pi/4 plus the worst rounding of n = round(x * 2/pi) for |n| < 2^33 (pi/2 * 2^33 * 2^-53 < 2e-6)
    sin_bound=0.786,
    # |n| < 2^33 (|x| < 1.3e10) keeps n*C1 and n*C2 exact in 53 bits; n * (tail < 2^-93) < 2^-60
    pi_2=_split_pi_2(3, 20, 53)),
}


# ---- building blocks
def _const(like: UOp, value: float | int) -> UOp: return UOp.const(like.dtype, value)


def _poly(x: UOp, coeffs: tuple[float, ...]) -> UOp:
  """coeffs[0] + coeffs[1] * x + ... by Horner's rule."""
  acc = _const(x, coeffs[-1])
  for c in reversed(coeffs[:-1]): acc = acc * x + c
  return acc


def _clamp(x: UOp, lo: float, hi: float) -> UOp:
  """x limited to [lo, hi], with comparisons rather than MAX so a NaN passes through on any renderer."""
  x = x.lt(lo).where(_const(x, lo), x)
  return _const(x, hi).lt(x).where(_const(x, hi), x)


def _round(x: UOp, fmt: _Format) -> UOp:
  """x rounded to the nearest integer (ties to even), exact for |x| < 2^(mantissa - 1)."""
  return (x + fmt.round_magic) - fmt.round_magic


def _pow2(n: UOp, fmt: _Format, dtype: DType) -> UOp:
  """2^n for an integer n (of `fmt.bits`) in the normal exponent range: the biased exponent, shifted."""
  return UOp(Ops.BITCAST, dtype, ((n + fmt.bias).alu(Ops.SHL, _const(n, fmt.mantissa)),))


# ---- the three functions
def _exp2(x: UOp) -> UOp:
  fmt = _FORMATS[x.dtype]
  # beyond [-(bias + mantissa + 2), bias + 2] the result is 0 or inf anyway; clamping keeps n's
  # halves below in the normal range and _round exact. NaN passes the clamp and propagates.
  x = _clamp(x, -(fmt.bias + fmt.mantissa + 2), fmt.bias + 2)
  n = _round(x, fmt)
  f = x - n  # exact, in [-0.5, 0.5]
  p = _poly(f, fmt.exp2_poly) * f + 1.0
  # 2^n as two factors 2^(floor(n/2)) * 2^(n - floor(n/2)), each a normal float: p times the first
  # stays normal, so the second product rounds once, overflowing to inf or underflowing gradually
  ni = n.cast(fmt.bits)
  half = ni.alu(Ops.SHR, _const(ni, 1))
  return (p * _pow2(half, fmt, x.dtype)) * _pow2(ni - half, fmt, x.dtype)


def _log2(x: UOp) -> UOp:
  fmt, dtype = _FORMATS[x.dtype], x.dtype
  # denormals (and the zeros and negatives fixed up below) are scaled into the normal range first
  scale = fmt.mantissa + 2
  tiny = x.lt(fmt.min_normal)
  bits = UOp(Ops.BITCAST, fmt.bits, (tiny.where(x * 2.0 ** scale, x),))
  unbias = tiny.where(_const(bits, -fmt.bias - scale), _const(bits, -fmt.bias))
  exponent = bits.alu(Ops.SHR, _const(bits, fmt.mantissa)) + unbias
  # the mantissa with a zero exponent: m in [1, 2); halve it at sqrt(2) so |log2(m)| <= 1/2
  fraction = bits.alu(Ops.AND, _const(bits, (1 << fmt.mantissa) - 1))
  m12 = UOp(Ops.BITCAST, dtype, (fraction.alu(Ops.OR, _const(bits, fmt.bias << fmt.mantissa)),))
  low = m12.lt(math.sqrt(2.0))
  m = low.where(m12, m12 * 0.5)
  e = exponent.cast(dtype) + low.where(_const(x, 0.0), _const(x, 1.0))
  # m - 1 is exact (Sterbenz), so t is within about an ulp; log2(m) = t * Q(t^2) keeps that relative accuracy
  t = (m - 1.0).alu(Ops.FDIV, m + 1.0)
  out = e + t * _poly(t * t, fmt.log2_poly)
  inf = _const(x, math.inf)
  # x > 0 finite: out; +inf: inf; 0: -inf; negative or NaN: NaN
  special = x.ne(0.0).where(_const(x, math.nan), -inf)
  return _const(x, 0.0).lt(x).where(x.ne(math.inf).where(out, inf), special)


def _sin_cos(x: UOp, quarter_turns: int) -> UOp:
  """sin(x + quarter_turns * pi/2): sin for 0, cos for 1. The shift is added to the quadrant, exactly."""
  fmt = _FORMATS[x.dtype]
  n = _round(x * (2.0 / math.pi), fmt)
  # Cody-Waite: all products but the last are exact, and so are the differences but the last two, so r
  # is x - n*pi/2 to about an ulp of r. inf and NaN give NaN here (inf - inf) and NaN propagates.
  r = x
  for part in fmt.pi_2: r = r - n * part
  # in range this never binds; for |x| past the exact-reduction limit it keeps the result in [-1, 1]
  r = _clamp(r, -fmt.sin_bound, fmt.sin_bound)
  z = r * r
  sin_r = r + (r * z) * _poly(z, fmt.sin_poly)
  cos_r = _poly(z, fmt.cos_poly) * z + 1.0
  # sin(r + q pi/2) for q mod 4 = 0, 1, 2, 3: sin r, cos r, -sin r, -cos r (two's complement & 3 = mod 4)
  quadrant = n.cast(fmt.bits) + quarter_turns
  odd = quadrant.alu(Ops.AND, _const(quadrant, 1)).ne(0)
  out = odd.where(cos_r, sin_r)
  return quadrant.alu(Ops.AND, _const(quadrant, 2)).ne(0).where(-out, out)


def _sin(x: UOp) -> UOp: return _sin_cos(x, 0)
def _cos(x: UOp) -> UOp: return _sin_cos(x, 1)


decompose_transcendentals = PatternMatcher([
  (UPat(Ops.EXP2, tuple(_FORMATS), (UPat.var("x"),)), _exp2),
  (UPat(Ops.LOG2, tuple(_FORMATS), (UPat.var("x"),)), _log2),
  (UPat(Ops.SIN, tuple(_FORMATS), (UPat.var("x"),)), _sin),
  (UPat(Ops.COS, tuple(_FORMATS), (UPat.var("x"),)), _cos),
])
