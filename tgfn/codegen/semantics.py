"""The exact meaning of each op (tgfn/uop/alu.py), established by rewrites before any renderer sees a kernel.

C, OpenCL C and CUDA C leave some ALU ops undefined or define them differently (integer division by zero,
float -> int casts out of range, shifts past the width, NaN in max). The passes here rewrite those ops
into compositions that are well defined in every dialect, so every backend agrees by construction and a
printer only spells plain operators:

  promote_halves       float16/bfloat16 math runs in float32, rounding back after every op
  lower_semantics      after it, every op left is defined in every dialect on the values that reach it:
    IDIV, MOD    the divisor is never 0, nor -1 (x // 0 and x % 0 are 0; x // -1 is -x, wrapping)
    SHL, SHR     the amount is in [0, bits) (a shift past the width gives 0, or -1 for a negative >>)
    CAST         float -> int gets an in-range, non-NaN value (truncate, saturate, NaN -> 0)
    MAX          floats: NaN propagates (written as a select, so no dialect's fmax is involved)

`lower_semantics` runs on the expanded kernel, just before linearizing, so ops the optimizer creates
(the lane combines of a vectorized max) are covered; `lower_alu` is the rule for one op, which a printer
also uses for an accumulator update (`acc = max(acc, v)`, an ASSIGN, not an ALU node).
"""
from __future__ import annotations

from typing import Any, Optional

from tgfn.dtype import DType, dtypes
from tgfn.uop.ops import GroupOp, Ops, PatternMatcher, UOp, UPat, toposort

_HALF = (dtypes.float16, dtypes.bfloat16)
_UNSIGNED = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def _compute_in_float32(x: UOp) -> UOp | None:
  """Half-precision math runs in float32 and rounds back after every op, so results match NumPy's
  per-op float16 rounding and no backend needs native half arithmetic."""
  if x.op in (Ops.CAST, Ops.BITCAST, Ops.WHERE) or not any(s.dtype in _HALF for s in x.src): return None
  wide = UOp(x.op, dtypes.float32 if x.dtype in _HALF else x.dtype, tuple(s.cast(dtypes.float32) for s in x.src))
  return wide.cast(x.dtype)


def _reduce_in_float32(red: UOp) -> UOp | None:
  if red.dtype not in _HALF: return None
  values = tuple(v.cast(dtypes.float32) for v in red.reduce_values)
  return UOp(Ops.REDUCE, dtypes.float32, values + red.reduce_ranges, red.arg).cast(red.dtype)


promote_halves = PatternMatcher([
  (UPat(GroupOp.ALU, name="x"), _compute_in_float32),
  (UPat(Ops.REDUCE, name="red"), _reduce_in_float32),
])


# ---- building blocks: scalar or vector, matching the lanes of the node being rewritten

def _full(value: Any, like: DType, scalar: DType) -> UOp:
  """A constant of `scalar` type with as many lanes as `like`."""
  c = UOp.const(scalar, value)
  return c if like.count == 1 else UOp(Ops.VECTORIZE, scalar.vec(like.count), (c,) * like.count)


def _bool(like: DType) -> DType: return dtypes.bool.vec(like.count) if like.count > 1 else dtypes.bool
def _cmp(op: Ops, a: UOp, b: UOp) -> UOp: return UOp(op, _bool(a.dtype), (a, b))
def _where(c: UOp, a: UOp, b: UOp) -> UOp: return UOp(Ops.WHERE, a.dtype, (c, a, b))
def _binary(op: Ops, a: UOp, b: UOp) -> UOp: return UOp(op, a.dtype, (a, b))
def _with_lanes(dtype: DType, like: DType) -> DType: return dtype.vec(like.count) if like.count > 1 else dtype


def _constant(u: UOp) -> Optional[Any]:
  """The value of a constant (a vector of one constant in every lane), else None."""
  lanes = u.src if u.op is Ops.VECTORIZE else (u,)
  if not all(s.op is Ops.CONST for s in lanes) or len({s.arg for s in lanes}) != 1: return None
  return lanes[0].arg


def _division(u: UOp, a: UOp, b: UOp) -> UOp:
  scalar, is_div = u.dtype.scalar(), u.op is Ops.IDIV
  d = _constant(b)
  if d is not None and d not in (0, -1): return u
  if d == 0: return _full(0, u.dtype, scalar)
  if d == -1: return UOp(Ops.NEG, u.dtype, (a,)) if is_div else _full(0, u.dtype, scalar)
  nonzero = _cmp(Ops.CMPNE, b, _full(0, b.dtype, scalar))
  if scalar.is_unsigned:
    safe = _where(nonzero, b, _full(1, b.dtype, scalar))
    return _where(nonzero, _binary(u.op, a, safe), _full(0, u.dtype, scalar))
  not_minus_one = _cmp(Ops.CMPNE, b, _full(-1, b.dtype, scalar))
  ordinary = _binary(Ops.AND, nonzero, not_minus_one)
  safe = _where(ordinary, b, _full(1, b.dtype, scalar))
  quotient = _binary(u.op, a, safe)
  # b == -1: x // -1 is -x (wrapping at the minimum), x % -1 is 0; b == 0: both are 0
  other = _where(nonzero, UOp(Ops.NEG, u.dtype, (a,)), _full(0, u.dtype, scalar)) if is_div else _full(0, u.dtype, scalar)
  return _where(ordinary, quotient, other)


def _shift(u: UOp, a: UOp, b: UOp) -> UOp:
  scalar = u.dtype.scalar()
  bits = scalar.bits
  k = _constant(b)
  if k is not None and 0 <= k < bits: return u
  too_far = _binary(Ops.SHR, a, _full(bits - 1, b.dtype, b.dtype.scalar())) \
      if u.op is Ops.SHR and not scalar.is_unsigned else _full(0, u.dtype, scalar)
  if k is not None: return too_far
  unsigned = _UNSIGNED[b.dtype.itemsize]
  as_unsigned = UOp(Ops.CAST, _with_lanes(unsigned, b.dtype), (b,))  # a negative amount becomes >= bits
  inside = _cmp(Ops.CMPLT, as_unsigned, _full(bits, b.dtype, unsigned))
  amount = _binary(Ops.AND, b, _full(bits - 1, b.dtype, b.dtype.scalar()))
  return _where(inside, _binary(u.op, a, amount), too_far)


def _float_to_int(u: UOp, x: UOp) -> UOp:
  dst = u.dtype.scalar()
  if x.dtype.scalar() in _HALF: x = UOp(Ops.CAST, _with_lanes(dtypes.float32, x.dtype), (x,))  # exact
  src = x.dtype.scalar()
  # both bounds are powers of two (or 0), so exact in every float type
  lo, hi = _full(float(dst.min), x.dtype, src), _full(float(dst.max) + 1.0, x.dtype, src)
  below, below_hi = _cmp(Ops.CMPLT, x, lo), _cmp(Ops.CMPLT, x, hi)  # both False for NaN
  zero = _full(0.0, x.dtype, src)
  inside = _where(below_hi, _where(below, zero, x), zero)
  converted = UOp(Ops.CAST, u.dtype, (inside,))
  is_nan = _cmp(Ops.CMPNE, x, x)
  top = _where(is_nan, _full(0, u.dtype, dst), _full(dst.max, u.dtype, dst))
  return _where(below, _full(dst.min, u.dtype, dst), _where(below_hi, converted, top))


def _float_max(a: UOp, b: UOp) -> UOp:
  """a if a is NaN or a > b, else b: alu._fmax."""
  return _where(_binary(Ops.OR, _cmp(Ops.CMPNE, a, a), _cmp(Ops.CMPLT, b, a)), a, b)


def lower_alu(u: UOp) -> UOp:
  """`u` (whose sources are already lowered) as ops that every dialect defines, or `u` itself."""
  op = u.op
  if op in (Ops.IDIV, Ops.MOD) and u.dtype.scalar().is_int: return _division(u, *u.src)
  if op in (Ops.SHL, Ops.SHR) and u.dtype.scalar().is_int: return _shift(u, *u.src)
  if op is Ops.CAST and u.src[0].dtype.scalar().is_float and u.dtype.scalar().is_int: return _float_to_int(u, u.src[0])
  if op is Ops.MAX and u.dtype.scalar().is_float: return _float_max(*u.src)
  return u


def lower_semantics(ast: UOp) -> UOp:
  """Every ALU op of a kernel rewritten by `lower_alu`, once (the nodes a rule builds are final: the
  quotient of a guarded division is not guarded again)."""
  done: dict[UOp, UOp] = {}
  for node in toposort([ast]):
    src = tuple(done[s] for s in node.src)
    rebuilt = node if all(a is b for a, b in zip(src, node.src)) else node.replace(src=src)
    done[node] = lower_alu(rebuilt) if node.op in GroupOp.ALU else rebuilt
  return done[ast]
