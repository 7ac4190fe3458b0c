"""Whole-vector C (GCC vector extensions) for the vector ops that have an exact native form, each matching
the scalar meaning in tgfn/uop/alu.py lane for lane. `render_vector_alu` returns None for anything else,
and the C renderer then computes the op lane by lane.

Conventions of GCC's vector extensions used here: `a < b` on two vectors gives a vector of same-size
signed ints, -1 where true and 0 where false (a *mask*); a cast between vector types of the same size
reinterprets the bits; `__builtin_convertvector` converts lane by lane like a scalar C cast. A bool vector
is held as 0/1 bytes (its memory form); a select works on masks. Division by zero, shifts past the width,
out-of-range float -> int casts and NaN in max never reach here: tgfn/codegen/semantics.py rewrote them."""
from __future__ import annotations

from typing import Callable, Optional

from tgfn.dtype import DType, dtypes
from tgfn.uop.ops import Ops, UOp

_MASK = {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}
_HALF = (dtypes.float16, dtypes.bfloat16)
_BITWISE = {Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}
_ARITH = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*"}
_BOOL_ARITH = {Ops.ADD: "|", Ops.MUL: "&", Ops.MAX: "|"}  # as alu.py defines them on bool

Ref = Callable[[UOp], str]


def mask_dtype(dtype: DType) -> DType:
  """The signed-int vector whose lanes have the size of `dtype`'s lanes: what a comparison gives."""
  return _MASK[dtype.itemsize].vec(dtype.count)


def _splatted_const(u: UOp) -> Optional[int]:
  """The value of a vector whose lanes are all one constant, else None."""
  lanes = u.src if u.op is Ops.VECTORIZE else (u,)
  if not all(s.op is Ops.CONST for s in lanes) or len({s.arg for s in lanes}) != 1: return None
  return lanes[0].arg


def _shift(op: Ops, a: str, b: str, amount: UOp) -> str:
  """The amount is in [0, bits) by now (tgfn/codegen/semantics.py); a splatted constant is written as a number."""
  k = _splatted_const(amount)
  return f"({a} {'<<' if op is Ops.SHL else '>>'} {b if k is None else k})"


def _splat(value: str, dtype: DType) -> str: return f"(({dtype.cname}){{{', '.join([value] * dtype.count)}}})"


def _compare(op: Ops, a: str, b: str, mask: DType) -> str:
  return f"(({mask.cname})({a} {'<' if op is Ops.CMPLT else '!='} {b}))"


def _blend(mask: str, a: str, b: str, dtype: DType) -> str:
  """Lanes of `a` where the mask (same lane size as dtype) is -1, of `b` where it is 0."""
  m = mask_dtype(dtype).cname
  return f"(({dtype.cname})(({mask} & ({m}){a}) | (~{mask} & ({m}){b})))"


def _to_bool(mask: str, dtype: DType) -> str: return f"__builtin_convertvector(-{mask}, {dtype.cname})"


class VectorALU:
  """Native renderings of one kernel's vector ops; `ref` names a value."""
  def __init__(self, ref: Ref):
    self.ref = ref

  def mask_of(self, cond: UOp, mask: DType) -> str:
    """A bool vector as a mask with `mask`'s lanes: a comparison of same-size lanes is redone as a mask
    (gcc computes it once), any other bool vector is widened from its 0/1 bytes."""
    if cond.op in (Ops.CMPLT, Ops.CMPNE) and self._fits(cond.src) and cond.src[0].dtype.itemsize == mask.itemsize:
      return _compare(cond.op, self.ref(cond.src[0]), self.ref(cond.src[1]), mask)
    if cond.op in (Ops.AND, Ops.OR) and self._fits(cond.src):  # e.g. a NaN-propagating max: combined masks
      return f"({self.mask_of(cond.src[0], mask)} {_BITWISE[cond.op]} {self.mask_of(cond.src[1], mask)})"
    if cond.op in (Ops.CMPNE, Ops.XOR) and cond.src[0].dtype.scalar().is_bool and self._fits(cond.src):
      # `a != b` on bools (`x == y` is `(x != y) != True`): combined masks, never through 0/1 bytes,
      # whose int -> byte conversion gcc does one lane at a time
      return f"({self.mask_of(cond.src[0], mask)} ^ {self.mask_of(cond.src[1], mask)})"
    if (k := _splatted_const(cond)) is not None: return _splat("-1" if k else "0", mask)
    return f"(-__builtin_convertvector({self.ref(cond)}, {mask.cname}))"

  def _fits(self, srcs: tuple[UOp, ...]) -> bool:
    count = srcs[0].dtype.count
    return all(s.dtype.count == count > 1 and s.dtype.scalar() not in _HALF for s in srcs)

  def render(self, u: UOp) -> Optional[str]: return self.alu(u.op, u.dtype, u.src)

  def alu(self, op: Ops, dtype: DType, srcs: tuple[UOp, ...]) -> Optional[str]:
    """`op` on `srcs` giving a `dtype` vector, or None where there is no exact whole-vector form."""
    if dtype.scalar() in _HALF or not srcs or not self._fits(srcs): return None
    r = [self.ref(s) for s in srcs]
    scalar, src = dtype.scalar(), srcs[0].dtype.scalar()
    if op in (Ops.CMPLT, Ops.CMPNE): return _to_bool(_compare(op, r[0], r[1], mask_dtype(srcs[0].dtype)), dtype)
    if op is Ops.WHERE: return _blend(self.mask_of(srcs[0], mask_dtype(dtype)), r[1], r[2], dtype)
    if op in _BITWISE: return f"({r[0]} {_BITWISE[op]} {r[1]})"
    if scalar.is_bool:
      if op in _BOOL_ARITH: return f"({r[0]} {_BOOL_ARITH[op]} {r[1]})"
      if op is Ops.NEG: return f"({r[0]} ^ {_splat('1', dtype)})"
      if op is Ops.CAST: return self.cast(srcs[0], r[0], dtype)
      return None
    if op in _ARITH: return f"({r[0]} {_ARITH[op]} {r[1]})"
    if op is Ops.NEG: return f"(-{r[0]})"
    if op is Ops.MAX and scalar.is_int:  # a float MAX is a select by now (tgfn/codegen/semantics.py)
      return _blend(f"(({mask_dtype(dtype).cname})({r[0]} > {r[1]}))", r[0], r[1], dtype)
    if op in (Ops.SHL, Ops.SHR) and scalar.is_int: return _shift(op, r[0], r[1], srcs[1])
    if op in (Ops.IDIV, Ops.MOD) and scalar.is_int and (d := _splatted_const(srcs[1])) is not None and d not in (0, -1):
      return f"({r[0]} {'/' if op is Ops.IDIV else '%'} {r[1]})"  # C truncates toward zero, as alu.py's IDIV and MOD
    if op is Ops.BITCAST and dtype.itemsize == srcs[0].dtype.itemsize and not src.is_bool: return f"(({dtype.cname}){r[0]})"
    if op is Ops.CAST: return self.cast(srcs[0], r[0], dtype)
    if op is Ops.TRUNC and scalar.is_float: return _trunc(r[0], dtype)
    return None

  def cast(self, x_uop: UOp, x: str, dtype: DType) -> str:
    src = x_uop.dtype
    if dtype.is_bool: return _to_bool(f"(({mask_dtype(src).cname})({x} != {_splat('0', src)}))", dtype)
    return f"__builtin_convertvector({x}, {dtype.cname})"


def _float_lit(value: float, dtype: DType) -> str: return value.hex() + ("f" if dtype.scalar() is dtypes.float32 else "")


def _trunc(x: str, dtype: DType) -> str:
  """Round toward zero through an int conversion of the lanes below 2**mantissa bits (larger ones, inf and
  NaN are already integers or kept as they are); OR-ing x's sign bit back keeps -0.5 -> -0.0."""
  m = mask_dtype(dtype).cname
  bits = dtype.itemsize * 8
  limit = _float_lit(2.0 ** (23 if bits == 32 else 52), dtype)
  sign = "(-2147483647-1)" if bits == 32 else "(-9223372036854775807LL-1)"
  return (f"({{ {m} _x = ({m}){x}; {m} _in = ({m})((({dtype.cname})(_x & ~{sign})) < {limit}); "
          f"{dtype.cname} _t = __builtin_convertvector(__builtin_convertvector(({dtype.cname})(_in & _x), {m}), {dtype.cname}); "
          f"({dtype.cname})((_in & (({m})_t | (_x & {sign}))) | (~_in & _x)); }})")
