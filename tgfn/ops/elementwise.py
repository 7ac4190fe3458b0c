"""Elementwise functions, each built from the primitive ALU ops (tgfn/uop/ops.py GroupOp.ALU).

Composites are written so their results match NumPy closely: log1p and expm1 use the classic
correction tricks, tanh goes through expm1, integer floor division and modulo follow Python's
sign rules on top of C's truncating primitives, and pow handles negative bases with integer exponents.
"""
from __future__ import annotations

import math
from typing import Any

from tgfn.array import Array, as_array, promote
from tgfn.dtype import dtypes, float_dtype, result_type
from tgfn.uop.ops import Ops

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


def _const_like(x: Array, value: Any) -> Array: return Array.const(value, x.dtype, x.shape)


def _no_bool(name: str, *xs: Array) -> None:
  if any(x.dtype.is_bool for x in xs):
    raise TypeError(f"{name} does not accept bool arrays; use logical_xor/logical_not or cast with .astype(int)")


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
  a, b = promote(a, b)
  _no_bool("floor_divide", a)
  if a.dtype.is_float: return floor(a._alu(Ops.FDIV, b))
  q = a._alu(Ops.IDIV, b)
  if a.dtype.is_unsigned: return q
  zero = _const_like(a, 0)
  inexact = a._alu(Ops.MOD, b)._alu(Ops.CMPNE, zero)
  signs_differ = a._alu(Ops.CMPLT, zero)._alu(Ops.CMPNE, b._alu(Ops.CMPLT, zero))
  return inexact._alu(Ops.AND, signs_differ)._alu(Ops.WHERE, q._alu(Ops.SUB, _const_like(a, 1)), q)


def mod(a: Any, b: Any) -> Array:
  """Remainder with the sign of the divisor (Python's %). x % 0 is 0 for ints and NaN for floats."""
  a, b = promote(a, b)
  _no_bool("mod", a)
  if a.dtype.is_float: r = a._alu(Ops.SUB, trunc(a._alu(Ops.FDIV, b))._alu(Ops.MUL, b))
  else: r = a._alu(Ops.MOD, b)
  if a.dtype.is_unsigned: return r
  zero = _const_like(a, 0)
  fix = r._alu(Ops.CMPNE, zero)._alu(Ops.AND, r._alu(Ops.CMPLT, zero)._alu(Ops.CMPNE, b._alu(Ops.CMPLT, zero)))
  return fix._alu(Ops.WHERE, r._alu(Ops.ADD, b), r)


remainder = mod


def negative(x: Any) -> Array:
  x = as_array(x)
  _no_bool("negative", x)
  return x._alu(Ops.NEG)


def positive(x: Any) -> Array: return as_array(x)


def abs(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_bool or x.dtype.is_unsigned: return x
  out = (x < 0)._alu(Ops.WHERE, x._alu(Ops.NEG), x)
  return out + 0.0 if x.dtype.is_float else out  # + 0.0 turns -0.0 into 0.0


absolute = abs


def sign(x: Any) -> Array:
  x = as_array(x)
  if x.dtype.is_bool: return x
  one, zero = _const_like(x, 1), _const_like(x, 0)
  out = (x > 0)._alu(Ops.WHERE, one, zero)
  if not x.dtype.is_unsigned: out = (x < 0)._alu(Ops.WHERE, _const_like(x, -1), out)
  return isnan(x)._alu(Ops.WHERE, x, out) if x.dtype.is_float else out


def square(x: Any) -> Array:
  x = as_array(x)
  return x._alu(Ops.MUL, x)


def reciprocal(x: Any) -> Array:
  x = as_array(x)
  if not x.dtype.is_float: return floor_divide(_const_like(x, 1), x)
  return x._alu(Ops.RECIP)


def power(a: Any, b: Any) -> Array:
  """a ** b. A static Python exponent uses multiplication (exact); float powers go through exp2/log2
  with NumPy's special cases: negative bases need integer exponents, 0 ** negative is inf."""
  if isinstance(b, (int, float)) and not isinstance(b, bool) and isinstance(a, Array):
    if b == 0: return Array.const(1, result_type(a.dtype, b), a.shape)
    if b == 1: return a.astype(result_type(a.dtype, b))
    if b == 2: return square(a.astype(result_type(a.dtype, b)))
    if b == 0.5 and a.dtype.is_float: return sqrt(a)
    if b == -1 and a.dtype.is_float: return reciprocal(a)
  a, b = promote(a, b)
  if a.dtype.is_bool: raise TypeError("power does not accept bool arrays")
  if not a.dtype.is_float: return _integer_power(a, b)
  magnitude = exp2(b * log2(abs(a)))
  b_is_int = trunc(b) == b
  b_is_odd = b_is_int & (mod(b, 2.0) == 1.0)
  out = ((a < 0) & b_is_odd)._alu(Ops.WHERE, -magnitude, magnitude)
  out = ((a < 0) & ~b_is_int)._alu(Ops.WHERE, _const_like(a, float("nan")), out)
  return (b == 0)._alu(Ops.WHERE, _const_like(a, 1.0), out)


def _integer_power(a: Array, b: Array) -> Array:
  """Square-and-multiply over the exponent's bits; negative exponents give 0 (1 and -1 excepted), as JAX."""
  result, base = _const_like(a, 1), a
  for bit in range(a.dtype.bits - (0 if a.dtype.is_unsigned else 1)):
    take = ((b >> bit) & 1) == 1
    result = take._alu(Ops.WHERE, result * base, result)
    base = base * base
  if a.dtype.is_unsigned: return result
  negative_exp = b < 0
  special = (a == 1)._alu(Ops.WHERE, _const_like(a, 1), ((a == -1)._alu(Ops.WHERE, (b & 1 == 1)._alu(
    Ops.WHERE, _const_like(a, -1), _const_like(a, 1)), _const_like(a, 0))))
  return negative_exp._alu(Ops.WHERE, special, result)


def maximum(a: Any, b: Any) -> Array:
  """Elementwise max; NaN wins, as in NumPy and JAX."""
  a, b = promote(a, b)
  return a._alu(Ops.MAX, b)


def minimum(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  if a.dtype.is_float: return a._alu(Ops.NEG)._alu(Ops.MAX, b._alu(Ops.NEG))._alu(Ops.NEG)
  return (a < b)._alu(Ops.WHERE, a, b)


def clip(x: Any, min: Any = None, max: Any = None) -> Array:
  out = as_array(x)
  if min is not None: out = maximum(out, min)
  if max is not None: out = minimum(out, max)
  return out


def where(condition: Any, x: Any = None, y: Any = None) -> Array:
  if x is None or y is None:
    raise NotImplementedError("where(condition) with one argument has a data-dependent shape; "
                              "use where(condition, x, y), or np.nonzero on a NumPy copy")
  cond = as_array(condition)
  cond = cond.astype(dtypes.bool) if not cond.dtype.is_bool else cond
  x, y = promote(x, y)
  cond, x, y = _broadcast3(cond, x, y)
  return cond._alu(Ops.WHERE, x, y)


def _broadcast3(c: Array, x: Array, y: Array) -> tuple[Array, Array, Array]:
  from tgfn.array import broadcast_shapes
  shape = broadcast_shapes(c.shape, x.shape, y.shape)
  return c._broadcast_to(shape), x._broadcast_to(shape), y._broadcast_to(shape)


# ---- exponentials and logarithms
def exp2(x: Any) -> Array: return _float(x)._alu(Ops.EXP2)
def log2(x: Any) -> Array: return _float(x)._alu(Ops.LOG2)
def sqrt(x: Any) -> Array: return _float(x)._alu(Ops.SQRT)
def rsqrt(x: Any) -> Array: return sqrt(x)._alu(Ops.RECIP)
def cbrt(x: Any) -> Array: return power(_float(x), 1.0 / 3.0)


def exp(x: Any) -> Array:
  x = _float(x)
  return (x * LOG2_E)._alu(Ops.EXP2)


def log(x: Any) -> Array:
  return _float(x)._alu(Ops.LOG2) * LN_2


def log10(x: Any) -> Array: return log2(x) * math.log10(2.0)


def log1p(x: Any) -> Array:
  """log(1 + x) accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x (Goldberg's trick)."""
  x = _float(x)
  u = x + 1.0
  d = u - 1.0
  safe_d = (d == 0)._alu(Ops.WHERE, _const_like(x, 1.0), d)
  return (d == 0)._alu(Ops.WHERE, x, isinf(u)._alu(Ops.WHERE, u, log(u) * (x / safe_d)))


def expm1(x: Any) -> Array:
  """exp(x) - 1 accurate for tiny x: (u - 1) * x / log(u) with u = exp(x) (Kahan's trick)."""
  x = _float(x)
  u = exp(x)
  lu = log(u)
  safe_lu = (lu == 0)._alu(Ops.WHERE, _const_like(x, 1.0), lu)
  out = (u - 1.0) * (x / safe_lu)
  out = (u == 1.0)._alu(Ops.WHERE, x, out)
  out = (u - 1.0 == -1.0)._alu(Ops.WHERE, _const_like(x, -1.0), out)
  return isinf(u)._alu(Ops.WHERE, u, out)


# ---- trigonometric and hyperbolic
def sin(x: Any) -> Array: return _float(x)._alu(Ops.SIN)
def cos(x: Any) -> Array: return _cos(_float(x))


def _cos(x: Array) -> Array:
  # cos(x) = sin(pi/2 - |x|): |x| keeps the subtraction exact near zero for both signs
  return (math.pi / 2 - abs(x))._alu(Ops.SIN)


def tan(x: Any) -> Array:
  x = _float(x)
  return sin(x) / _cos(x)


def tanh(x: Any) -> Array:
  """tanh(x) = expm1(2x) / (expm1(2x) + 2), exact near 0; saturates to +-1 for |x| > 20."""
  x = _float(x)
  e = expm1(abs(x) * 2.0)
  t = e / (e + 2.0)
  t = (abs(x) > 20.0)._alu(Ops.WHERE, _const_like(x, 1.0), t)
  return (x < 0)._alu(Ops.WHERE, -t, t)


def sinh(x: Any) -> Array:
  x = _float(x)
  return (expm1(x) - expm1(-x)) * 0.5


def cosh(x: Any) -> Array:
  x = _float(x)
  return (exp(x) + exp(-x)) * 0.5


def arctan(x: Any) -> Array:
  """Range-reduce to [0, tan(pi/8)] (|x| > 1: pi/2 - atan(1/|x|); > tan(pi/8): pi/4 + atan((t-1)/(t+1)))
  and evaluate an odd polynomial there."""
  x = _float(x)
  t = abs(x)
  big = t > 1.0
  t = big._alu(Ops.WHERE, 1.0 / t, t)
  mid = t > 0.4142135623730950
  t = mid._alu(Ops.WHERE, (t - 1.0) / (t + 1.0), t)
  z = t * t
  # Taylor series of atan on |t| <= 0.4142 (terms to t^27 bound the error below float64 rounding)
  poly = _const_like(x, 0.0)
  for k in range(13, -1, -1): poly = poly * z + ((-1) ** k) / (2 * k + 1)
  r = t * poly
  r = mid._alu(Ops.WHERE, r + math.pi / 4, r)
  r = big._alu(Ops.WHERE, math.pi / 2 - r, r)
  r = isnan(x)._alu(Ops.WHERE, x, r)
  return (x < 0)._alu(Ops.WHERE, -r, r)


# ---- rounding
def trunc(x: Any) -> Array:
  x = as_array(x)
  return x._alu(Ops.TRUNC) if x.dtype.is_float else x


def floor(x: Any) -> Array:
  x = as_array(x)
  if not x.dtype.is_float: return x
  t = trunc(x)
  return (x < t)._alu(Ops.WHERE, t - 1.0, t)


def ceil(x: Any) -> Array:
  x = as_array(x)
  if not x.dtype.is_float: return x
  t = trunc(x)
  return (x > t)._alu(Ops.WHERE, t + 1.0, t)


def round(x: Any, decimals: int = 0) -> Array:
  """Round half to even, as NumPy and JAX."""
  x = as_array(x)
  if not x.dtype.is_float: return x
  if decimals:
    scale = 10.0 ** decimals
    return round(x * scale) / scale
  f = floor(x)
  diff = x - f
  f_is_even = (f - floor(f * 0.5) * 2.0) == 0.0
  up = (diff > 0.5) | ((diff == 0.5) & ~f_is_even)
  return up._alu(Ops.WHERE, f + 1.0, f)


around = round
rint = round


# ---- predicates and logic
def isnan(x: Any) -> Array:
  x = as_array(x)
  return x._alu(Ops.CMPNE, x) if x.dtype.is_float else Array.const(False, dtypes.bool, x.shape)


def isinf(x: Any) -> Array:
  x = as_array(x)
  if not x.dtype.is_float: return Array.const(False, dtypes.bool, x.shape)
  return (x == float("inf")) | (x == float("-inf"))


def isfinite(x: Any) -> Array:
  x = as_array(x)
  if not x.dtype.is_float: return Array.const(True, dtypes.bool, x.shape)
  return (x - x) == 0.0


def _bools(*xs: Any) -> list[Array]:
  return promote(*[as_array(x).astype(dtypes.bool) for x in xs])


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
    if x.dtype.is_float: raise TypeError(f"{name} needs integer or bool arrays, got {x.dtype.name}")


def bitwise_and(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _int_or_bool("bitwise_and", a)
  return a._alu(Ops.AND, b)


def bitwise_or(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _int_or_bool("bitwise_or", a)
  return a._alu(Ops.OR, b)


def bitwise_xor(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _int_or_bool("bitwise_xor", a)
  return a._alu(Ops.XOR, b)


def invert(x: Any) -> Array:
  x = as_array(x)
  _int_or_bool("invert", x)
  if x.dtype.is_bool: return logical_not(x)
  return x._alu(Ops.XOR, _const_like(x, x.dtype.max if x.dtype.is_unsigned else -1))


bitwise_not = invert


def left_shift(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _int_or_bool("left_shift", a)
  return a._alu(Ops.SHL, b)


def right_shift(a: Any, b: Any) -> Array:
  a, b = promote(a, b)
  _int_or_bool("right_shift", a)
  return a._alu(Ops.SHR, b)


def astype(x: Any, dtype: Any) -> Array: return as_array(x).astype(dtype)

