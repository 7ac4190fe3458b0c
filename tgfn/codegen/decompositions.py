"""Transcendental functions built from basic arithmetic: for renderers without exp2/log2/sin, and for
the CPU, whose exp2 and log2 are these by default (vector code instead of lane-by-lane libm calls;
`decomposed_ops` says which ops a renderer gets, `TRANSCENDENTAL` overrides it).

`decompose_transcendentals` rewrites every float32/float64 EXP2, LOG2, SIN and COS (half types were
widened to float32 by `promote_halves` before this runs) into ADD, SUB, MUL, FDIV, CMPLT, CMPNE,
WHERE, AND, OR, SHL, SHR, NEG, CAST and same-size BITCAST (plus 64-bit integer arithmetic for the
reduction of huge sin/cos arguments). Each function reduces its argument to a small interval,
evaluates a polynomial there and undoes the reduction exactly:

  exp2(x) = 2^n * 2^f       n = round(x), f in [-0.5, 0.5]; 2^n is built in the exponent bits
                            (an x that is an integer by construction, as exp2 of an int array, skips 2^f)
  log2(x) = e + log2(m)     x = m * 2^e with m in [sqrt(1/2), sqrt(2)), read from the bits;
                            log2(m) = 2/ln2 * atanh(t), t = (m - 1) / (m + 1), an odd series in t
  sin(x)  = +-sin(r) or +-cos(r)   x = n * pi/2 + r, |r| <= pi/4, the quadrant n mod 4 picks which;
  cos(x)  = sin(x + pi/2)          the same reduction, one quadrant further

The reduction x - n * pi/2 is exact for every finite x: Cody-Waite (pi/2 split in three or four
parts) for |x| < 2^15 (float32) or 2^33 (float64), Payne-Hanek (x times a window of 2/pi's bits, in
integer arithmetic) beyond. Accuracy against correctly rounded results (tgfn/tools/ulp_table.py prints
the table, docs/numpy.md holds it): exp2 about 1 ulp (a denormal result may be one step off), log2
under 3 ulp, sin and cos under 2 ulp over the whole float range, in float32 and float64.
Special values follow C99/NumPy: exp2 overflows to inf and underflows (gradually) to 0,
log2(0) = -inf, log2(x < 0) = NaN, log2(inf) = inf, sin(+-inf) = cos(+-inf) = NaN, sin(-0.0) = -0.0,
and NaN in gives NaN out.

The code relies only on the semantics every renderer must provide (tgfn/uop/alu.py): IEEE binary
arithmetic rounding to nearest, without reassociation or flushing denormals to zero. A contracted
multiply-add (FMA) anywhere is harmless: every step stays correct, or gets more accurate, fused.

Polynomial coefficients are minimax fits (Remez exchange, minimizing the maximum *relative* error,
in 40-digit mpmath arithmetic), rounded to the dtype. `_remez` in tests/codegen/test_decompositions.py
re-derives every table below and checks it; each comment names the fitted function and the interval.
"""
from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass

from tgfn.dtype import FLOAT_LAYOUT, DType, dtypes
from tgfn.helpers import settings
from tgfn.uop.ops import Ops, PatternMatcher, UOp, UPat


TRANSCENDENTAL_OPS = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS})


def transcendental_switch() -> str:
  """`TRANSCENDENTAL`: "1" keeps every transcendental a C library call, "2" decomposes all of them on
  every renderer (so CPU and PYTHON can test the decompositions), unset ("") lets the renderer choose
  (`decompose_by_default`). Read at each call (not cached), so tests can switch it; compiled-kernel
  caches must key on it."""
  value = settings.TRANSCENDENTAL.strip()
  if value not in ("", "1", "2"):
    raise ValueError(f"TRANSCENDENTAL must be 1 (C library functions), 2 (polynomial decompositions) or unset "
                     f"(the renderer's default), got {value!r}")
  return value


# A kernel of fewer loop iterations keeps the renderer's own functions by default: there a polynomial saves
# microseconds per call and costs its compile time (about 60 lines of C per exp, +20% C for an MLP step)
DECOMPOSE_MIN_ITERATIONS = 1 << 14


def loop_iterations(ast: UOp) -> int:
  """The product of the kernel's loop sizes (a size that is not a constant counts as large)."""
  sizes = [u.src[0].arg if u.src[0].op is Ops.CONST else DECOMPOSE_MIN_ITERATIONS
           for u in ast.toposort() if u.op is Ops.RANGE]
  return math.prod(sizes)


def decomposed_ops(renderer: object, ast: UOp) -> frozenset[Ops]:
  """Which of EXP2, LOG2, SIN, COS codegen builds from basic arithmetic for `renderer` in kernel `ast`: all
  of them on a renderer without transcendentals or with TRANSCENDENTAL=2, none with TRANSCENDENTAL=1,
  else the renderer's `decompose_by_default` in kernels of DECOMPOSE_MIN_ITERATIONS loop iterations or
  more (the CPU's C renderer: EXP2 and LOG2, whole-vector code several times faster than a lane-by-lane
  libm call; sin and cos stay libm, whose 64-bit range reduction is slower). Both are within the same
  ulp bounds (docs/numpy.md), but a small and a large kernel may round the same input differently."""
  switch = transcendental_switch()
  if not getattr(renderer, "has_transcendentals", True) or switch == "2": return TRANSCENDENTAL_OPS
  if switch == "1" or not (default := getattr(renderer, "decompose_by_default", frozenset())): return frozenset()
  return frozenset(default) if loop_iterations(ast) >= DECOMPOSE_MIN_ITERATIONS else frozenset()


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
  cody_waite_bits: int           # Cody-Waite reduces |x| < 2^cody_waite_bits, Payne-Hanek the rest
  payne_hanek_limbs: int         # 32-bit limbs of 2/pi in Payne-Hanek's window

  @property
  def pi_2_pair(self) -> tuple[float, float]:
    """pi/2 = hi + lo to about twice the dtype's precision: hi is pi/2 rounded to the dtype, lo the rest."""
    hi = self.rounded(math.pi / 2)
    return hi, self.rounded((_PI_2_Q128 - int(hi * 2.0 ** 128)) / 2 ** 128)

  def rounded(self, v: float) -> float:
    """v rounded to this format (float64 values pass unchanged)."""
    return struct.unpack("f", struct.pack("f", v))[0] if self.mantissa == 23 else v

  @property
  def min_normal(self) -> float: return math.ldexp(1.0, 1 - self.bias)

  @property
  def round_magic(self) -> float:
    """(y + M) - M rounds y to the nearest integer (ties to even) for |y| < 2^(mantissa - 1): the sum
    lands in [2^mantissa, 2^(mantissa+1)) where the float spacing is exactly 1."""
    return 1.5 * 2.0 ** self.mantissa


_FORMATS = {
  dtypes.float32: _Format(
    *FLOAT_LAYOUT[dtypes.float32],
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
    pi_2=_split_pi_2(4, 9, 24), cody_waite_bits=15,
    # F = 94 fraction bits: |x| * 2/pi mod 4 off by < 2^(24 - 94), far below the closest float32 to a
    # multiple of pi/2
    payne_hanek_limbs=3),
  dtypes.float64: _Format(
    *FLOAT_LAYOUT[dtypes.float64],
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
    pi_2=_split_pi_2(3, 20, 53), cody_waite_bits=33,
    # F = 190 fraction bits: off by < 2^(53 - 190); the closest float64 to a multiple of pi/2 is about
    # 2^-61 from it (6381956970095103 * 2^797, Muller's table), so r keeps all its bits
    payne_hanek_limbs=6),
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


def _integral(x: UOp) -> bool:
  """Whether x's value is an integer (or inf, or NaN) by construction: a TRUNC, an integer constant or
  cast, or sums, differences, products and negations of such (exp2 of an int array, say)."""
  stack, seen = [x], set()
  while stack:
    u = stack.pop()
    if u in seen: continue
    seen.add(u)
    if u.op is Ops.TRUNC or (u.op is Ops.CAST and u.src[0].dtype.is_int): continue
    if u.op is Ops.CONST:
      if not (isinstance(u.arg, (int, float)) and (math.isinf(u.arg) or float(u.arg).is_integer())): return False
      continue
    if u.op not in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG): return False
    stack.extend(u.src)
  return True


# ---- the three functions
def _exp2(x: UOp) -> UOp:
  fmt, integral = _FORMATS[x.dtype], _integral(x)
  # beyond [-(bias + mantissa + 2), bias + 2] the result is 0 or inf anyway; clamping keeps n's
  # halves below in the normal range and _round exact. NaN passes the clamp and propagates.
  x = _clamp(x, -(fmt.bias + fmt.mantissa + 2), fmt.bias + 2)
  # x + M rounds x to an integer n (as _round does) and holds n in its low mantissa bits
  shifted = x + fmt.round_magic
  if integral:  # 2^n exactly: no polynomial, only the scaling below (and NaN kept NaN)
    p = x.ne(x).where(x, _const(x, 1.0))
  else:
    f = x - (shifted - fmt.round_magic)  # exact, in [-0.5, 0.5]
    p = _poly(f, fmt.exp2_poly) * f + 1.0
  # 2^n as two factors 2^(floor(n/2)) * 2^(n - floor(n/2)), each a normal float: p times the first
  # stays normal, so the second product rounds once, overflowing to inf or underflowing gradually.
  # n as an integer is the bits of n + M less those of M: no float-to-int conversion (whose saturation
  # and NaN handling are a dozen vector ops); a NaN x gives some n, and p = NaN makes the result NaN
  magic_bits = struct.unpack("<i" if fmt.mantissa == 23 else "<q",
                             struct.pack("<f" if fmt.mantissa == 23 else "<d", fmt.round_magic))[0]
  ni = UOp(Ops.BITCAST, fmt.bits, (shifted,)) - magic_bits
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


# 2/pi in fixed point, 1280 fraction bits: int(mpmath.floor(2 / mpmath.pi * 2**1280)) at 1400 bits
_TWO_OVER_PI_Q1280 = int(
  "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561"
  "b7246e3a424dd2e006492eea09d1921cfe1deb1cb129a73ee88235f52ebb4484"
  "e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980f"
  "ef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b"
  "3d0739f78a5292ea6bfb5fb11f8d5d0856033046fc7b6babf0cfbc209af4361d", 16)
# its bits as 32-bit words, most significant first, after one zero word (the bits of weight 2^0 .. 2^-31
# ... 2^31 of 2/pi, all zero), so a window may start up to 32 bits before the binary point
_TWO_OVER_PI_WORDS = (0,) + tuple((_TWO_OVER_PI_Q1280 >> (1280 - 32 * (i + 1))) & 0xFFFFFFFF for i in range(40))


def _u64(x: UOp, value: int) -> UOp: return UOp.const(x.dtype, value)


def _payne_hanek(x: UOp, fmt: _Format, limbs: int) -> tuple[UOp, UOp]:
  """(n mod 4, r) with |x| = n * pi/2 + r, |r| <= pi/4, for any finite |x| >= 2^-1: Payne-Hanek.

  |x| = m * 2^s with an integer mantissa m. Only the bits of 2/pi whose product with m lands below 2^2
  matter modulo 4 (the rest give multiples of 4 quadrants), so a window of 32 * `limbs` bits of 2/pi,
  starting at the one of weight 2^-(s - 1), is multiplied by m in 32-bit limbs (uint64 arithmetic,
  modulo 2^(32 * limbs)). The product is |x| * 2/pi mod 4 with F = 32 * limbs - 2 fraction bits, off by
  less than m * 2^-F: the top 2 bits are the quadrant, the rest the fraction, rounded to nearest."""
  u64, i64, dtype = dtypes.uint64, dtypes.int64, x.dtype
  bits = UOp(Ops.BITCAST, fmt.bits, (x,)).cast(i64)
  exponent = bits.alu(Ops.SHR, _const(bits, fmt.mantissa)).alu(Ops.AND, _const(bits, 2 * fmt.bias + 1))
  m = bits.alu(Ops.AND, _const(bits, (1 << fmt.mantissa) - 1)).alu(Ops.OR, _const(bits, 1 << fmt.mantissa)).cast(u64)
  # the window's first bit, counted from the start of the padded table: weight 2^-(s-1), s = e - bias - mantissa
  start = exponent - (fmt.bias + fmt.mantissa + 2) + 32
  word, offset = start.alu(Ops.SHR, _const(start, 5)), start.alu(Ops.AND, _const(start, 31)).cast(u64)
  last = (2 * fmt.bias - fmt.bias - fmt.mantissa + 30) >> 5  # the word holding the largest finite x's start
  def table_word(k: int) -> UOp:  # _TWO_OVER_PI_WORDS[word + k], as a chain of selects over the word index
    out = _u64(m, 0)
    for i in range(last + 1): out = word.ne(i).where(out, _u64(m, _TWO_OVER_PI_WORDS[i + k]))
    return out
  words = [table_word(k) for k in range(limbs + 1)]
  mask = _u64(m, 0xFFFFFFFF)
  # the window, least significant limb first
  w = [words[k].alu(Ops.SHL, offset).alu(Ops.OR, words[k + 1].alu(Ops.SHR, _u64(m, 32) - offset)).alu(Ops.AND, mask)
       for k in reversed(range(limbs))]
  a = [m.alu(Ops.AND, mask), m.alu(Ops.SHR, _u64(m, 32))] if fmt.mantissa >= 32 else [m]
  # schoolbook product modulo 2^(32 * limbs): column sums of 32-bit halves stay far below 2^64
  columns = [_u64(m, 0) for _ in range(limbs)]
  for i, ai in enumerate(a):
    for j, wj in enumerate(w):
      if i + j >= limbs: continue
      p = ai * wj
      columns[i + j] = columns[i + j] + p.alu(Ops.AND, mask)
      if i + j + 1 < limbs: columns[i + j + 1] = columns[i + j + 1] + p.alu(Ops.SHR, _u64(m, 32))
  product, carry = [], _u64(m, 0)
  for c in columns:
    c = c + carry
    product.append(c.alu(Ops.AND, mask))
    carry = c.alu(Ops.SHR, _u64(m, 32))
  top = product[-1]
  # round to the nearest quadrant: the fraction's first bit carries into n, and the fraction, read as a
  # two's complement number, is then in [-1/2, 1/2)
  n = top.alu(Ops.SHR, _u64(m, 30)) + top.alu(Ops.SHR, _u64(m, 29)).alu(Ops.AND, _u64(m, 1))
  def fraction_bits(k: int) -> UOp:  # the 64 bits after the quadrant bits, starting k limbs further down
    hi, mid, lo = (product[limbs - 1 - k - i] if limbs - 1 - k - i >= 0 else _u64(m, 0) for i in range(3))
    return hi.alu(Ops.SHL, _u64(m, 34)).alu(Ops.OR, mid.alu(Ops.SHL, _u64(m, 2))).alu(Ops.OR, lo.alu(Ops.SHR, _u64(m, 30)))
  high = UOp(Ops.BITCAST, i64, (fraction_bits(0),))           # the fraction times 2^64, signed
  low = fraction_bits(2).alu(Ops.SHR, _u64(m, 1)).cast(i64)   # the next 63 bits, times 2^127
  # the fraction as hi + lo: hi is `high` rounded to the dtype, lo the (exact) integer residual and the rest
  hi = high.cast(dtype)
  lo = (high - hi.cast(i64)).cast(dtype) + low.cast(dtype) * 2.0 ** -63
  hi, lo = hi * 2.0 ** -64, lo * 2.0 ** -64
  # r = (hi + lo) * pi/2 with hi * pi/2 split exactly into p + e (Dekker's product, Veltkamp's split)
  pi_2_hi, pi_2_lo = fmt.pi_2_pair
  split = float((1 << ((fmt.mantissa + 2) // 2)) + 1)
  def halves(v: UOp) -> tuple[UOp, UOp]:
    c = v * split
    h = c - (c - v)
    return h, v - h
  (hh, hl), (ph, pl) = halves(hi), halves(_const(hi, pi_2_hi))
  p = hi * pi_2_hi
  e = (((hh * ph - p) + hh * pl) + hl * ph) + hl * pl
  r = p + (e + (hi * pi_2_lo + lo * pi_2_hi))
  return n.cast(fmt.bits), r


def _sin_cos(x: UOp, quarter_turns: int) -> UOp:
  """sin(x + quarter_turns * pi/2): sin for 0, cos for 1. The shift is added to the quadrant, exactly."""
  fmt = _FORMATS[x.dtype]
  n = _round(x * (2.0 / math.pi), fmt)
  # Cody-Waite for |x| < 2^cody_waite_bits: all products but the last are exact, and so are the
  # differences but the last two, so r is x - n*pi/2 to about an ulp of r
  r = x
  for part in fmt.pi_2: r = r - n * part
  # Payne-Hanek beyond, on |x|; sin(-x) = -sin(x) and cos(-x) = cos(x) follow from negating n and r
  ax = x.lt(0.0).where(-x, x)
  n_far, r_far = _payne_hanek(ax, fmt, fmt.payne_hanek_limbs)
  negative = x.lt(0.0)
  n_far, r_far = negative.where(-n_far, n_far), negative.where(-r_far, r_far)
  near = ax.lt(2.0 ** fmt.cody_waite_bits)
  # inf and NaN take the far path: x - x turns them into NaN there, and adds 0 to every finite r
  r = near.where(r, r_far + (x - x))
  z = r * r
  # (where r * r is 0 the sum would turn r = -0.0 into +0.0)
  sin_r = z.ne(0.0).where(r + (r * z) * _poly(z, fmt.sin_poly), r)
  cos_r = _poly(z, fmt.cos_poly) * z + 1.0
  # sin(r + q pi/2) for q mod 4 = 0, 1, 2, 3: sin r, cos r, -sin r, -cos r (two's complement & 3 = mod 4)
  quadrant = near.where(n.cast(fmt.bits), n_far) + quarter_turns
  odd = quadrant.alu(Ops.AND, _const(quadrant, 1)).ne(0)
  out = odd.where(cos_r, sin_r)
  return quadrant.alu(Ops.AND, _const(quadrant, 2)).ne(0).where(-out, out)


def _sin(x: UOp) -> UOp: return _sin_cos(x, 0)
def _cos(x: UOp) -> UOp: return _sin_cos(x, 1)


_RULES = {Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin, Ops.COS: _cos}


@functools.cache
def decomposition_rules(ops: frozenset[Ops]) -> PatternMatcher:
  """The rewrite that decomposes the float32/float64 transcendentals in `ops` (see decomposed_ops)."""
  return PatternMatcher([(UPat(op, tuple(_FORMATS), (UPat.var("x"),)), _RULES[op]) for op in sorted(ops, key=lambda o: o.value)])


decompose_transcendentals = decomposition_rules(TRANSCENDENTAL_OPS)

# exp2 of an integer by construction is a few bit operations (no polynomial): inline even where exp2 is a
# function call (tgfn/codegen/math_functions.py), as exp's two scaling factors 2^n are
integral_exp2 = PatternMatcher([(UPat(Ops.EXP2, tuple(_FORMATS), (UPat.var("x"),)), lambda x: _exp2(x) if _integral(x) else None)])
