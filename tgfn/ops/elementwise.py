"""Elementwise functions, each built from the primitive ALU ops (tgfn/uop/ops.py GroupOp.ALU).

Composites are written so their results match NumPy closely: log1p and expm1 use the classic
correction tricks, tanh goes through expm1, integer floor division and modulo follow Python's
sign rules on top of C's truncating primitives, float modulo is exact (a split product, as C's fmod),
and pow handles negative bases with integer exponents. Composites of float16/bfloat16 inputs run in
float32 and round once at the end, as XLA does: rounding each step to 8 or 11 bits would compound.
Where NumPy and JAX differ, these follow JAX (bool operands of arithmetic become int32, reciprocal
and rint of ints give floats, float x // 0 is NaN), except that integer x // 0 and x % 0 are 0.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional

import numpy as np

from tgfn.array import Array, as_array, broadcast_shapes, data_shape, device_put, promote
from tgfn.dtype import FLOAT_LAYOUT, dtypes, float_dtype, result_type
from tgfn.transforms.custom import derivatives
from tgfn.uop.ops import Ops, UOp
from tgfn.viz.locations import at_user_line

LOG2_E = 1.0 / math.log(2.0)
LN_2 = math.log(2.0)

__all__ = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "negative", "positive", "abs",
           "sign", "square", "reciprocal", "power", "maximum", "minimum", "clip", "where", "exp2", "log2",
           "sqrt", "rsqrt", "cbrt", "exp", "log", "log10", "log1p", "expm1", "sin", "cos", "tan", "tanh",
           "sinh", "cosh", "arctan", "trunc", "floor", "ceil", "round", "isnan", "isinf", "isfinite",
           "logical_and", "logical_or", "logical_xor", "logical_not", "less", "less_equal", "greater",
           "greater_equal", "equal", "not_equal", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
           "left_shift", "right_shift", "astype", "true_divide", "remainder", "absolute", "around", "rint",
           "bitwise_not"]



def _float(x: Any) -> Array:
  x = as_array(x)
  return x.astype(float_dtype(x.dtype))


_HALVES = (dtypes.float16, dtypes.bfloat16)


def _halves_in_float32(fn: Callable[[Array], Array]) -> Callable[[Any], Array]:
  """Wrap a float composite: ints become float32, and float16/bfloat16 inputs are computed in float32
  with one rounding of the result back to the input dtype. Complex input goes to the function's complex
  form (tgfn/ops/complex_math.py), if it has one."""
  @functools.wraps(fn)
  def wrapper(x: Any) -> Array:
    x = _float(x)
    if x.dtype.is_complex: return _complex_form(fn.__name__, x)
    return fn(x.astype(dtypes.float32)).astype(x.dtype) if x.dtype in _HALVES else fn(x)
  return wrapper


def _cm() -> Any:
  from tgfn.ops import complex_math
  return complex_math


def _complex_form(name: str, z: Array) -> Array:
  cm = _cm()
  forms = {"exp": cm.complex_exp, "log": cm.complex_log, "sqrt": cm.complex_sqrt, "sin": cm.complex_sin,
           "cos": cm.complex_cos, "log10": lambda z: cm.complex_log(z) * (1.0 / math.log(10.0)),
           "log2": lambda z: cm.complex_log(z) * LOG2_E, "exp2": lambda z: cm.complex_exp(z * LN_2)}
  if name not in forms:
    raise NotImplementedError(f"{name} of complex arrays is not supported (complex: {', '.join(sorted(forms))}, "
                              "abs, sign, arithmetic, power)")
  return forms[name](z)


def _numeric(*xs: Any) -> list[Array]:
  """Promote and broadcast, then turn bool into int32 (JAX's promote_args_numeric)."""
  out = promote(*xs)
  return [x.astype(dtypes.int32) for x in out] if out[0].dtype.is_bool else out


def _const_like(x: Array, value: Any) -> Array: return Array.const(value, x.dtype, x.shape)


def _no_bool(name: str, *xs: Array) -> None:
  if any(x.dtype.is_bool for x in xs):
    raise TypeError(f"{name} does not accept bool arrays; "
                    f"use logical_xor/logical_not or cast with .astype(int){at_user_line()}")


# ---- arithmetic
def add(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  return a._alu(Ops.ADD, b)


def subtract(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _no_bool("subtract", a)
  return a._alu(Ops.SUB, b)


def multiply(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  return a._alu(Ops.MUL, b)


def divide(a: Any, b: Any) -> Array:
  """True division; integer inputs give the default float dtype, as in JAX."""
  a, b = promote(a, b)
  dt = float_dtype(a.dtype)
  return a.astype(dt)._alu(Ops.FDIV, b.astype(dt))


true_divide = divide


def floor_divide(a: Any, b: Any) -> Array:
  """Python's //: the quotient rounded toward -inf. Integer x // 0 is 0 (as NumPy); float x // +-0 is
  x / +-0 (+-inf, NaN for 0 // 0), as NumPy, JAX and the array API. Floats use the exact remainder, so
  1.0 // 0.1 is 9.0 as in NumPy."""
  a, b = _numeric(a, b)
  _cm().no_complex("floor_divide", a)
  if a.dtype.is_float:
    # a zero or infinite dividend takes the array API's floor(a / b): -0 // 2 is -0 and inf // 2 is inf
    # (NumPy and JAX: NaN). finite // inf stays NumPy's and JAX's (-1 // inf is -1, as -1 % inf is inf;
    # the standard says -0 there, at odds with its own remainder)
    quotient = a._alu(Ops.FDIV, b)
    special = (b == 0) | (a == 0) | isinf(a)
    return special._alu(Ops.WHERE, (b == 0)._alu(Ops.WHERE, quotient, floor(quotient)), _float_divmod(a, b)[0])
  q = a._alu(Ops.IDIV, b)
  if a.dtype.is_unsigned: return q
  zero = _const_like(a, 0)
  inexact = a._alu(Ops.MOD, b)._alu(Ops.CMPNE, zero)
  signs_differ = a._alu(Ops.CMPLT, zero)._alu(Ops.CMPNE, b._alu(Ops.CMPLT, zero))
  return inexact._alu(Ops.AND, signs_differ)._alu(Ops.WHERE, q._alu(Ops.SUB, _const_like(a, 1)), q)


def mod(a: Any, b: Any) -> Array:
  """Remainder with the sign of the divisor (Python's %). x % 0 is 0 for ints and NaN for floats."""
  a_array, b_array = _numeric(a, b)
  _cm().no_complex("mod", a_array)
  if a_array.dtype.is_float:  # a scalar number stays a constant of the derivative rule (see power)
    return _float_mod(*(x if _is_scalar_number(x) else x_array for x, x_array in ((a, a_array), (b, b_array))))
  a, b = a_array, b_array
  r = a._alu(Ops.MOD, b)
  if a.dtype.is_unsigned: return r
  zero = _const_like(a, 0)
  signs_differ = r._alu(Ops.CMPLT, zero)._alu(Ops.CMPNE, b._alu(Ops.CMPLT, zero))
  fix = r._alu(Ops.CMPNE, zero)._alu(Ops.AND, signs_differ)
  return fix._alu(Ops.WHERE, r._alu(Ops.ADD, b), r)


remainder = mod


@derivatives(lambda out, a, b: 1.0, lambda out, a, b: -floor_divide(a, b))
def _float_mod(a: Any, b: Any) -> Array: return _float_divmod(*_numeric(a, b))[1]


def _float_divmod(a: Array, b: Array) -> tuple[Array, Array]:
  """(a // b, a % b) for floats, from the exact truncated remainder, as JAX's (and NumPy's) divmod.
  Half types are computed in float32 and rounded once."""
  if a.dtype in _HALVES:
    q, r = _float_divmod(a.astype(dtypes.float32), b.astype(dtypes.float32))
    return q.astype(a.dtype), r.astype(a.dtype)
  r = _fmod(a, b)
  zero = _const_like(a, 0.0)
  signs_differ = b._alu(Ops.CMPLT, zero)._alu(Ops.CMPNE, r._alu(Ops.CMPLT, zero))
  fix = r._alu(Ops.CMPNE, zero)._alu(Ops.AND, signs_differ)
  q = round(fix._alu(Ops.WHERE, (a - r) / b - 1.0, (a - r) / b))
  # a zero quotient is +0 (as NumPy's): (a - r) / b is -0 for -1 // -inf; a -0 dividend is handled by the caller
  zero_quotient = q._alu(Ops.CMPNE, zero)._alu(Ops.WHERE, q, zero)
  # a zero remainder takes the divisor's sign (NumPy and the array API): -0 % 2 is +0, 0 % -2 is -0
  remainder = fix._alu(Ops.WHERE, r + b, r)
  signed_zero = b._alu(Ops.CMPLT, zero)._alu(Ops.WHERE, _const_like(a, -0.0), zero)
  return zero_quotient, remainder._alu(Ops.CMPNE, zero)._alu(Ops.WHERE, remainder, signed_zero)


def _fmod(a: Array, b: Array) -> Array:
  """C's fmod: a - q*b with q = trunc(a / b), computed exactly in float64 (the product q*b is carried as
  an unevaluated sum p + e, Dekker's two-product). Exact while |a / b| < 2**53; beyond that q itself
  has rounded and the result is not meaningful. fmod(x, 0) and fmod(+-inf, y) are NaN, fmod(x, +-inf) = x."""
  a64, b64 = a.astype(dtypes.float64), b.astype(dtypes.float64)
  # a huge divisor would overflow the product split: scale both by 2^-200 (exact, as |a| >= |b| here)
  scale = (abs(b64) > 2.0 ** 900)._alu(Ops.WHERE, _const_like(b64, 2.0 ** -200), _const_like(b64, 1.0))
  sa, sb = a64 * scale, b64 * scale
  q = trunc(sa / sb)
  r = _exact_remainder(sa, sb, q)
  # a / b may round up to the next integer; then r has the wrong sign and q is one too far from zero
  overshoot = r._alu(Ops.CMPNE, _const_like(r, 0.0))._alu(Ops.AND, (r < 0)._alu(Ops.CMPNE, sa < 0))
  r = overshoot._alu(Ops.WHERE, _exact_remainder(sa, sb, q - sign(q)), r) / scale
  return (abs(a64) < abs(b64))._alu(Ops.WHERE, a64, r).astype(a.dtype)


def _exact_remainder(a: Array, b: Array, q: Array) -> Array:
  """a - q*b for float64 a, b and integral q with the result exactly representable, evaluated without
  rounding: q*b = p + e exactly (Veltkamp splits into 26-bit halves), and a - p is exact (Sterbenz)."""
  def split(x: Array) -> tuple[Array, Array]:
    c = x * 134217729.0  # 2^27 + 1
    hi = c - (c - x)
    return hi, x - hi
  (qh, ql), (bh, bl) = split(q), split(b)
  p = q * b
  e = (((qh * bh - p) + qh * bl) + ql * bh) + ql * bl
  return (a - p) - e


def negative(x: Any) -> Array:
  x = as_array(x)
  _no_bool("negative", x)
  return x._alu(Ops.NEG)


def positive(x: Any) -> Array: return as_array(x)


def abs(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_bool or x.dtype.is_unsigned: return x
  if x.dtype.is_complex: return _cm().complex_abs(x)
  out = (x < 0)._alu(Ops.WHERE, x._alu(Ops.NEG), x)
  return out + 0.0 if x.dtype.is_float else out  # + 0.0 turns -0.0 into 0.0


absolute = abs


def sign(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_bool: return x
  if x.dtype.is_complex: return _cm().complex_sign(x)
  one, zero = _const_like(x, 1), _const_like(x, 0)
  out = (x > 0)._alu(Ops.WHERE, one, zero)
  if not x.dtype.is_unsigned: out = (x < 0)._alu(Ops.WHERE, _const_like(x, -1), out)
  return isnan(x)._alu(Ops.WHERE, x, out) if x.dtype.is_float else out


def square(x: Any) -> Array:
  """x * x; bool becomes int32, as JAX (NumPy keeps bool)."""
  (x,) = _numeric(x)
  return x._alu(Ops.MUL, x)


def reciprocal(x: Any) -> Array:
  """1 / x; ints and bools give the default float dtype, as JAX (NumPy's integer 1 // x differs)."""
  return _float(x)._alu(Ops.RECIP)


def power(a: Any, b: Any) -> Array:
  """a ** b, as JAX. A static Python exponent 0, 1, 2, 0.5 or -1 (floats) uses exact arithmetic or sqrt.
  Float powers go through exp2/log2 (float32 for half types) with C99's special cases: x ** 0 = 1 and
  1 ** y = 1 even for NaN, (-1) ** +-inf = 1, a negative finite base needs an integer exponent (else
  NaN), 0 ** negative is inf. Integer powers multiply (wrapping); a negative exponent gives 0 except for
  bases 1 and -1 (JAX leaves it implementation-defined; NumPy raises). Bools compute as int32, as JAX."""
  if isinstance(a, Array) and a.dtype.is_complex or isinstance(b, complex) or \
     isinstance(b, Array) and b.dtype.is_complex:
    a, _ = promote(a, b)
    return _cm().complex_power(a, b)
  if isinstance(b, (int, float)) and not isinstance(b, bool) and isinstance(a, Array):
    dt = result_type(a.dtype, b)
    if b == 0: return Array.const(1, dt, a.shape)
    if b == 1: return a.astype(dt)
    if b == 2: return square(a.astype(dt))
    if b == 0.5 and dt.is_float:  # sqrt, but (-inf) ** 0.5 is inf
      a = a.astype(dt)
      return sqrt((a == float("-inf"))._alu(Ops.WHERE, _const_like(a, float("inf")), a))
    if b == -1 and dt.is_float: return reciprocal(a.astype(dt))
  a_array, b_array = _numeric(a, b)
  if not a_array.dtype.is_float: return _integer_power(a_array, b_array)
  # a scalar number stays a constant of the derivative rule: no partial with respect to it is formed
  base, exponent = (x if _is_scalar_number(x) else x_array for x, x_array in ((a, a_array), (b, b_array)))
  if a_array.dtype in _HALVES:
    in_float32 = (x if _is_scalar_number(x) else x.astype(dtypes.float32) for x in (base, exponent))
    return _float_power(*in_float32).astype(a_array.dtype)
  return _float_power(base, exponent)


def _is_scalar_number(x: Any) -> bool:
  """A Python or NumPy int or float (what `derivatives` takes as a constant)."""
  return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _power_slope(out: Array, a: Array, b: Any) -> Array:
  """d/da a^b = b a^(b - 1); 0 at a = b = 0 (a^0 is the constant 1: JAX's 0 * 0^-1 gives NaN there). Only
  there: elsewhere b = 0 keeps the formula, whose derivative in b (a^-1) the second order needs."""
  return where((b == 0) & (a == 0), _const_like(out, 0.0), b * _float_power(a, b - 1))


def _power_exponent_slope(out: Array, a: Any, b: Array) -> Array:
  """d/db a^b = log(a) a^b; 0 at a = 0 for b > 0, where a^b is the constant 0 (log(0) * 0 would be NaN)."""
  return where((as_array(a) == 0) & (b > 0), _const_like(out, 0.0), log(a) * out)


@derivatives(_power_slope, _power_exponent_slope)
def _float_power(a: Any, b: Any) -> Array:
  a, b = _numeric(a, b)
  magnitude = exp2(b * log2(abs(a)))
  b_is_int = trunc(b) == b
  b_is_odd = b_is_int & (trunc(b * 0.5) * 2.0 != b)
  negative = (a < 0) | ((a == 0) & (a._alu(Ops.RECIP) < 0))  # -0.0 counts: (-0.0) ** -1 is -inf
  out = (negative & b_is_odd)._alu(Ops.WHERE, -magnitude, magnitude)
  out = ((a < 0) & isfinite(a) & ~b_is_int)._alu(Ops.WHERE, _const_like(a, float("nan")), out)
  # select the constant 1 only where the formula above does not already give it (0 * log2(0 or inf), or an
  # inf/NaN exponent times log2(1) = 0), so the derivative keeps its path elsewhere: d/da at a == 1 is b,
  # and d/db at b == 0 is log(a), where selecting a constant would make both 0
  one = (((b == 0) & ~(isfinite(a) & (a != 0))) | ((a == 1) & ~isfinite(b)) | ((a == -1) & isinf(b)))
  return one._alu(Ops.WHERE, _const_like(a, 1.0), out)


def _integer_power(a: Array, b: Array) -> Array:
  """Square-and-multiply over the exponent's bits; negative exponents give 0 (1 and -1 excepted), as JAX."""
  result, base = _const_like(a, 1), a
  for bit in range(a.dtype.bits - (0 if a.dtype.is_unsigned else 1)):
    take = ((b >> bit) & 1) == 1
    result = take._alu(Ops.WHERE, result * base, result)
    base = base * base
  if a.dtype.is_unsigned: return result
  negative_exp = b < 0
  special = (a == 1)._alu(Ops.WHERE, _const_like(a, 1), ((a == -1)._alu(Ops.WHERE, ((b & 1) == 1)._alu(
    Ops.WHERE, _const_like(a, -1), _const_like(a, 1)), _const_like(a, 0))))
  return negative_exp._alu(Ops.WHERE, special, result)


def maximum(a: Any, b: Any) -> Array:
  """Elementwise max; NaN wins, as in NumPy and JAX."""
  a, b = promote(a, b)
  _cm().no_complex("maximum", a)
  return a._alu(Ops.MAX, b)


def minimum(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _cm().no_complex("minimum", a)
  if a.dtype.is_float: return a._alu(Ops.NEG)._alu(Ops.MAX, b._alu(Ops.NEG))._alu(Ops.NEG)
  return (a < b)._alu(Ops.WHERE, a, b)


def clip(x: Any, min: Any = None, max: Any = None) -> Array:
  out = as_array(x)
  if min is not None: out = maximum(out, min)
  if max is not None: out = minimum(out, max)
  return out


def where(condition: Any, x: Any = None, y: Any = None) -> Array:
  if x is None and y is None:  # NumPy's one-argument form: nonzero(condition)
    from tgfn.ops.arrays_extra import nonzero
    return nonzero(condition)  # type: ignore[return-value]
  if x is None or y is None: raise ValueError("where: give both x and y, or neither")
  cond = as_array(condition).astype(dtypes.bool)
  shape = broadcast_shapes(cond.shape, data_shape(x), data_shape(y))  # before promote, to name the input shapes
  x, y = promote(x, y)
  return cond._broadcast_to(shape)._alu(Ops.WHERE, x._broadcast_to(shape), y._broadcast_to(shape))


# ---- exponentials and logarithms
def _unary_primitive(name: str, x: Any, op: Ops) -> Array:
  x = _float(x)
  return _complex_form(name, x) if x.dtype.is_complex else x._alu(op)


def exp2(x: Any) -> Array: return _unary_primitive("exp2", x, Ops.EXP2)
def log2(x: Any) -> Array: return _unary_primitive("log2", x, Ops.LOG2)
def sqrt(x: Any) -> Array: return _unary_primitive("sqrt", x, Ops.SQRT)


@_halves_in_float32
def rsqrt(x: Array) -> Array: return sqrt(x)._alu(Ops.RECIP)


@_halves_in_float32
@derivatives(lambda out, x: 1.0 / (3.0 * out * out))  # inf at 0, 0 at +-inf, as JAX
def cbrt(x: Array) -> Array:
  """The real cube root: negative for negative x (a plain x ** (1/3) would be NaN there)."""
  return sign(x) * exp2(log2(abs(x)) * (1.0 / 3.0))


# ln 2 = hi + lo with hi's low bits zero, so n * hi is exact for |n| < 2^9 (float32) or 2^21 (float64)
_LN2_SPLIT = {dtypes.float32: (0.693145751953125, 1.4286068203094173e-06),
              dtypes.float64: (0.6931471803691238, 1.9082149292705877e-10)}
# beyond these |x| exp is 0 or inf; clamping keeps n (and f) finite
_EXP_CLAMP = {dtypes.float32: 200.0, dtypes.float64: 1500.0}


def _power_of_two(k: Array, dtype: Any) -> Array:
  """2^k for integers k (of the same-size integer type) in [1 - bias, bias]: k + bias in the exponent field."""
  bits, mantissa, bias = FLOAT_LAYOUT[dtype]
  biased = k._alu(Ops.ADD, Array.const(bias, bits, k.shape))
  return Array(UOp(Ops.BITCAST, dtype, (biased._alu(Ops.SHL, Array.const(mantissa, bits, k.shape)).uop,)))


def _scale_by_power_of_two(p: Array, n: Array) -> Array:
  """p * 2^n for p in (1/2, 2) and an integer-valued float n, rounded once, overflowing to inf and
  underflowing gradually, as (p * 2^a) * 2^b with a + b = n: both factors and p * 2^a are normal numbers,
  so only the last product rounds. Each factor is built from bits (no exp2 call, whose lane-by-lane libm
  call dominated small softmax kernels). Beyond |n| = 2 (bias - 2) the result is inf or 0 anyway, so n
  is clamped there (a NaN n goes to the low end; p is NaN then and makes the result NaN)."""
  bits, mantissa, bias = FLOAT_LAYOUT[p.dtype]
  limit = 2 * (bias - 2)
  n = (n > -limit)._alu(Ops.WHERE, (n < limit)._alu(Ops.WHERE, n, _const_like(n, limit)), _const_like(n, -limit))
  # n + M (M = 1.5 * 2^mantissa) holds n in its low mantissa bits: the bits less M's are n as an integer
  magic = 1.5 * 2.0 ** mantissa
  magic_bits = int(np.array(magic, p.dtype.name).view(bits.name))
  k = Array(UOp(Ops.BITCAST, bits, ((n + magic).uop,)))._alu(Ops.SUB, Array.const(magic_bits, bits, n.shape))
  a = k._alu(Ops.SHR, Array.const(1, bits, n.shape))  # floor(k / 2): a and k - a lie in [-(bias - 2), bias - 2]
  return (p * _power_of_two(a, p.dtype)) * _power_of_two(k._alu(Ops.SUB, a), p.dtype)


@_halves_in_float32
@derivatives(lambda out, x: out)  # the scaling by 2^n below would give a zero cotangent 0, not 0 * inf = NaN
def exp(x: Array) -> Array:
  """exp(x) = 2^n * 2^f with n = trunc(x / ln 2) and f = (x - n ln 2) / ln 2, the product n ln 2 carried in
  two parts (Cody-Waite): a plain exp2(x / ln 2) would scale the quotient's rounding by |x| (60 ulp at
  x = 88). 2^n is built exactly from exponent bits, so the result rounds once and overflows or underflows
  (gradually) only there."""
  hi, lo = _LN2_SPLIT[x.dtype]
  bound = _EXP_CLAMP[x.dtype]
  x = (x < -bound)._alu(Ops.WHERE, _const_like(x, -bound), (x > bound)._alu(Ops.WHERE, _const_like(x, bound), x))
  n = trunc(x * LOG2_E)
  f = ((x - n * hi) - n * lo) * LOG2_E  # x - n * hi is exact (Sterbenz)
  return _scale_by_power_of_two(f._alu(Ops.EXP2), n)


@_halves_in_float32
def log(x: Array) -> Array: return x._alu(Ops.LOG2) * LN_2


@_halves_in_float32
def log10(x: Array) -> Array: return x._alu(Ops.LOG2) * math.log10(2.0)


@_halves_in_float32
@derivatives(lambda out, x: 1.0 / (1.0 + x))
def log1p(x: Array) -> Array:
  """log(1 + x) accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x (Goldberg's trick)."""
  u = x + 1.0
  d = u - 1.0
  safe_d = (d == 0)._alu(Ops.WHERE, _const_like(x, 1.0), d)
  return (d == 0)._alu(Ops.WHERE, x, (u == float("inf"))._alu(Ops.WHERE, u, log(u) * (x / safe_d)))


@_halves_in_float32
@derivatives(lambda out, x: out + 1.0)
def expm1(x: Array) -> Array:
  """exp(x) - 1 accurate for tiny x: (u - 1) * x / log(u) with u = exp(x) (Kahan's trick)."""
  u = exp(x)
  lu = log(u)
  safe_lu = (lu == 0)._alu(Ops.WHERE, _const_like(x, 1.0), lu)
  out = (u - 1.0) * (x / safe_lu)
  out = (u == 1.0)._alu(Ops.WHERE, x, out)
  out = (u - 1.0 == -1.0)._alu(Ops.WHERE, _const_like(x, -1.0), out)
  return isinf(u)._alu(Ops.WHERE, u, out)


# ---- trigonometric and hyperbolic
def sin(x: Any) -> Array: return _unary_primitive("sin", x, Ops.SIN)
def cos(x: Any) -> Array: return _unary_primitive("cos", x, Ops.COS)


@_halves_in_float32
def tan(x: Array) -> Array:
  """sin / cos: each is within an ulp (the C library's, or the decomposition's exact range reduction),
  so the quotient is within about two, also near the poles where cos alone sets the relative error."""
  return x._alu(Ops.SIN) / x._alu(Ops.COS)


@_halves_in_float32
def tanh(x: Array) -> Array:
  """tanh(x) = expm1(2x) / (expm1(2x) + 2), exact near 0; saturates to +-1 for |x| > 20."""
  saturated = abs(x) > 20.0
  e = expm1(saturated._alu(Ops.WHERE, _const_like(x, 0.0), abs(x)) * 2.0)  # no inf/inf, nor its NaN derivative
  t = e / (e + 2.0)
  t = saturated._alu(Ops.WHERE, _const_like(x, 1.0), t)
  t = (x < 0)._alu(Ops.WHERE, -t, t)
  return (x == 0)._alu(Ops.WHERE, x, t)  # tanh(-0.0) is -0.0


@_halves_in_float32
def sinh(x: Array) -> Array:
  return (expm1(x) - expm1(-x)) * 0.5


@_halves_in_float32
def cosh(x: Array) -> Array:
  return (exp(x) + exp(-x)) * 0.5


@_halves_in_float32
@derivatives(lambda out, x: 1.0 / (1.0 + x * x))
def arctan(x: Array) -> Array:
  """Range-reduce to [0, tan(pi/8)] (|x| > 1: pi/2 - atan(1/|x|); > tan(pi/8): pi/4 + atan((t-1)/(t+1)))
  and evaluate an odd polynomial there."""
  t = abs(x)
  big = t > 1.0
  t = big._alu(Ops.WHERE, 1.0 / t, t)
  mid = t > 0.4142135623730950
  t = mid._alu(Ops.WHERE, (t - 1.0) / (t + 1.0), t)
  z = t * t
  # Taylor series of atan on |t| <= 0.4142: the first omitted term, 0.4142^(2K+1) / (2K+1), stays below
  # the dtype's rounding with K = 14 terms (float32) or 23 (float64)
  poly = _const_like(x, 0.0)
  for k in range(22 if x.dtype is dtypes.float64 else 13, -1, -1): poly = poly * z + ((-1) ** k) / (2 * k + 1)
  r = t * poly
  r = mid._alu(Ops.WHERE, r + math.pi / 4, r)
  r = big._alu(Ops.WHERE, math.pi / 2 - r, r)
  r = isnan(x)._alu(Ops.WHERE, x, r)
  return (x < 0)._alu(Ops.WHERE, -r, (x == 0)._alu(Ops.WHERE, x, r))   # atan(-0) is -0


# ---- rounding
def trunc(x: Any) -> Array:
  x = as_array(x)
  _cm().no_complex("trunc", x)
  return x._alu(Ops.TRUNC) if x.dtype.is_float else x


def floor(x: Any) -> Array:
  x = as_array(x)
  _cm().no_complex("floor", x)
  if not x.dtype.is_float: return x
  t = trunc(x)
  return (x < t)._alu(Ops.WHERE, t - 1.0, t)


def ceil(x: Any) -> Array:
  x = as_array(x)
  _cm().no_complex("ceil", x)
  if not x.dtype.is_float: return x
  t = trunc(x)
  return (x > t)._alu(Ops.WHERE, t + 1.0, t)


def round(x: Any, decimals: int = 0) -> Array:
  """Round half to even, as NumPy and JAX; ints are returned as they are. With `decimals`, as JAX:
  round(x * 10**decimals) / 10**decimals, float16/bfloat16 computed in float32 (for decimals < 0 NumPy
  divides by 10**-decimals instead, which can differ in the last bit)."""
  x = as_array(x)
  if x.dtype.is_complex:  # as JAX: each part
    return _cm().make_complex(round(_cm().real(x), decimals), round(_cm().imag(x), decimals))
  if not x.dtype.is_float: return x
  if decimals and x.dtype in _HALVES: return round(x.astype(dtypes.float32), decimals).astype(x.dtype)
  if decimals:
    scale = 10.0 ** decimals
    return round(x * scale) / scale
  f = floor(x)
  diff = x - f
  f_is_even = (f - floor(f * 0.5) * 2.0) == 0.0
  up = (diff > 0.5) | ((diff == 0.5) & ~f_is_even)
  return up._alu(Ops.WHERE, f + 1.0, f)


around = round


def rint(x: Any) -> Array:
  """Round half to even; ints and bools give the default float dtype, as JAX."""
  x = as_array(x)
  return round(x) if x.dtype.is_inexact else x.astype(dtypes.default_float)


# ---- predicates and logic
def isnan(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_complex: return isnan(_cm().real(x)) | isnan(_cm().imag(x))
  return x._alu(Ops.CMPNE, x) if x.dtype.is_float else Array.const(False, dtypes.bool, x.shape)


def isinf(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_complex: return isinf(_cm().real(x)) | isinf(_cm().imag(x))
  if not x.dtype.is_float: return Array.const(False, dtypes.bool, x.shape)
  return (x == float("inf")) | (x == float("-inf"))


def isfinite(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_complex: return isfinite(_cm().real(x)) & isfinite(_cm().imag(x))
  if not x.dtype.is_float: return Array.const(True, dtypes.bool, x.shape)
  return (x - x) == 0.0


def _bools(*xs: Any) -> list[Array]:
  """Promote first, then test against zero (as JAX: a weak 1e-10 next to a float16 array rounds to 0)."""
  return [x.astype(dtypes.bool) for x in promote(*xs)]


def logical_and(a: Any, b: Any) -> Array:
  a, b = _bools(a, b)
  return a._alu(Ops.AND, b)


def logical_or(a: Any, b: Any) -> Array:
  a, b = _bools(a, b)
  return a._alu(Ops.OR, b)


def logical_xor(a: Any, b: Any) -> Array:
  a, b = _bools(a, b)
  return a._alu(Ops.XOR, b)


def logical_not(x: Any) -> Array:
  (x,) = _bools(x)
  return x._alu(Ops.CMPNE, _const_like(x, True))


def _compare(op_name: str, a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  if op_name != "eq":
    _cm().no_complex({"lt": "less", "gt": "greater", "le": "less_equal", "ge": "greater_equal"}[op_name], a)
  if op_name == "lt": return a._alu(Ops.CMPLT, b)
  if op_name == "gt": return b._alu(Ops.CMPLT, a)
  eq = a._alu(Ops.CMPNE, b)._alu(Ops.CMPNE, Array.const(True, dtypes.bool, a.shape))
  if op_name == "eq": return eq
  if op_name == "le": return a._alu(Ops.CMPLT, b)._alu(Ops.OR, eq)
  return b._alu(Ops.CMPLT, a)._alu(Ops.OR, eq)


def less(a: Any, b: Any) -> Array: return _compare("lt", a, b)
def less_equal(a: Any, b: Any) -> Array: return _compare("le", a, b)
def greater(a: Any, b: Any) -> Array: return _compare("gt", a, b)
def greater_equal(a: Any, b: Any) -> Array: return _compare("ge", a, b)
def equal(a: Any, b: Any) -> Array: return _compare("eq", a, b)


def not_equal(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  return a._alu(Ops.CMPNE, b)


# ---- bitwise
def _int_or_bool(name: str, *xs: Array) -> None:
  for x in xs:
    if x.dtype.is_float: raise TypeError(f"{name} needs integer or bool arrays, got {x.dtype.name}{at_user_line()}")


def _bitwise(name: str, op: Ops) -> Callable[[Any, Any], Array]:
  def fn(a: Any, b: Any) -> Array:
    a, b = promote(a, b)
    _int_or_bool(name, a)
    return a._alu(op, b)
  fn.__name__ = fn.__qualname__ = name
  fn.__doc__ = f"Elementwise {name.split('_')[1]} of integer or bool arrays (bools stay bool)."
  return fn


bitwise_and = _bitwise("bitwise_and", Ops.AND)
bitwise_or = _bitwise("bitwise_or", Ops.OR)
bitwise_xor = _bitwise("bitwise_xor", Ops.XOR)


def invert(x: Any) -> Array:
  x = as_array(x)
  _int_or_bool("invert", x)
  if x.dtype.is_bool: return logical_not(x)
  return x._alu(Ops.XOR, _const_like(x, x.dtype.max if x.dtype.is_unsigned else -1))


bitwise_not = invert


def left_shift(a: Any, b: Any) -> Array:
  """a << b. Shifting by a negative amount or by >= the bit width gives 0; bools become int32 (JAX)."""
  a, b = promote(a, b)
  _int_or_bool("left_shift", a)
  a, b = _numeric(a, b)
  return a._alu(Ops.SHL, b)


def right_shift(a: Any, b: Any) -> Array:
  """a >> b, arithmetic for signed ints. Out-of-range amounts give 0, or -1 for negative a."""
  a, b = promote(a, b)
  _int_or_bool("right_shift", a)
  a, b = _numeric(a, b)
  return a._alu(Ops.SHR, b)


def astype(x: Any, dtype: Any, *, copy: bool = True, device: Optional[str] = None) -> Array:
  """`x` cast to `dtype`. `copy` is the array API's: arrays are immutable, so it changes nothing."""
  out = as_array(x).astype(dtype)
  return out if device is None else device_put(out, device)

