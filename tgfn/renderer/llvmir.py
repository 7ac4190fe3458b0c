"""Render a linearized kernel as LLVM IR (textual, opaque pointers), the source of the LLVM driver.

Every op is written so that it means exactly what tgfn/uop/alu.py says, with no undefined or poison
result left to the optimizer: a divisor that could be 0 or -1 is replaced before the division (LLVM's
sdiv by 0 is undefined behaviour even when the result is not selected), a shift amount outside the
width is masked and the result selected, float -> int casts use the saturating `llvm.fpto[su]i.sat`
intrinsics (NaN -> 0), MAX selects on `a != a || a > b`. No fast-math flags are set and products
are never contracted, except the FMA the float policy allows in reductions (`llvm.fma`).

The same instructions work on scalars and on LLVM's native vectors (`<8 x float>`), so vector UOps
(VECTORIZE, GEP, vector LOAD/STORE/ALU) render natively and the renderer takes the optimizer's opts.
Types: bool is `i1` in registers and a 0/1 byte in memory; float16 and bfloat16 are held as their
bits (`i16`) and converted with integer code here (no library calls, which an in-process JIT may not
find); codegen computes their arithmetic in float32. Values are SSA names; loop counters and
accumulators live in stack slots that the optimizer promotes to registers. A THREAD axis becomes a
body function over [lo, hi) that the entry point hands to the CPU worker pool (`tg_parallel_for`).
"""
from __future__ import annotations

import math
import struct
from typing import Callable, Optional, Sequence

from tgfn.codegen.policy import strict_float
from tgfn.dtype import DType, dtypes
from tgfn.renderer import Renderer
from tgfn.uop.ops import AxisType, Ops, UOp

_HALF = (dtypes.float16, dtypes.bfloat16)
_INTRINSIC = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.COS: "cos",
              Ops.TRUNC: "trunc"}


def scalar_type(dtype: DType) -> str:
  """The LLVM type of one lane in registers."""
  if dtype.is_bool: return "i1"
  if dtype is dtypes.float32: return "float"
  if dtype is dtypes.float64: return "double"
  return f"i{dtype.bits}"  # ints, and float16/bfloat16 as their bits


def ll_type(dtype: DType) -> str:
  scalar = scalar_type(dtype.scalar())
  return scalar if dtype.count == 1 else f"<{dtype.count} x {scalar}>"


def mem_type(dtype: DType) -> str:
  """The LLVM type as stored in a buffer (bool: a byte)."""
  scalar = "i8" if dtype.scalar().is_bool else scalar_type(dtype.scalar())
  return scalar if dtype.count == 1 else f"<{dtype.count} x {scalar}>"


def _float_literal(value: float, dtype: DType) -> str:
  """An exact LLVM float literal: the IEEE double bits in hex (a float32 value must be one exactly)."""
  if dtype is dtypes.float32:
    value = struct.unpack("f", struct.pack("f", value))[0] if math.isfinite(value) else value
  if math.isnan(value): return "0x7FF8000000000000"
  return "0x%016X" % struct.unpack(">Q", struct.pack(">d", value))[0]


def half_bits(value: float, dtype: DType) -> int:
  """The bits of `value` rounded once to float16 or bfloat16 (as a constant of that dtype is)."""
  import numpy as np
  from tgfn.uop.alu import float_to_bf16_bits
  if dtype is dtypes.bfloat16: return float_to_bf16_bits(value)
  with np.errstate(over="ignore"): return int(np.array([value], np.float16).view(np.uint16)[0])


def const_literal(value: object, dtype: DType) -> str:
  """One lane's constant, without its type."""
  if dtype.is_bool: return "true" if value else "false"
  if dtype in _HALF: return str(half_bits(float(value), dtype))  # type: ignore[arg-type]
  if dtype.is_float: return _float_literal(float(value), dtype)  # type: ignore[arg-type]
  v = int(value) & ((1 << dtype.bits) - 1)  # type: ignore[call-overload]
  return str(v - (1 << dtype.bits) if v >> (dtype.bits - 1) else v)  # LLVM spells ints signed


def param_type(dtype: DType) -> str:
  """How a scalar parameter is passed: bool as a byte, float16/bfloat16 as their bits."""
  return "i8" if dtype.is_bool else scalar_type(dtype)


class _Function:
  """The instructions of one function being built: fresh names, blocks, and the typed helpers."""
  def __init__(self) -> None:
    self.lines: list[str] = []
    self.allocas: list[str] = []
    self.counter = 0
    self.block = "entry"
    self.declares: set[str] = set()

  def fresh(self, prefix: str = "v") -> str:
    self.counter += 1
    return f"%{prefix}{self.counter}"

  def emit(self, text: str, prefix: str = "v") -> str:
    name = self.fresh(prefix)
    self.lines.append(f"  {name} = {text}")
    return name

  def raw(self, text: str) -> None: self.lines.append(f"  {text}")

  def label(self, name: str) -> None:
    self.lines.append(f"{name}:")
    self.block = name

  def call(self, intrinsic: str, ret: str, args: list[tuple[str, str]]) -> str:
    self.declares.add(f"declare {ret} @{intrinsic}({', '.join(t for t, _ in args)})")
    return self.emit(f"call {ret} @{intrinsic}({', '.join(f'{t} {v}' for t, v in args)})")


def _suffix(dtype: DType) -> str:
  """An intrinsic's type suffix: f32, v8f32, i32, v4i64."""
  s = dtype.scalar()
  base = {dtypes.float32: "f32", dtypes.float64: "f64"}.get(s, f"i{s.bits}")
  return base if dtype.count == 1 else f"v{dtype.count}{base}"


def _like(dtype: DType, scalar: DType) -> DType: return scalar.vec(dtype.count) if dtype.count > 1 else scalar


class _Values:
  """Typed IR for one value of `dtype` (scalar or vector): constants splatted to the right shape."""
  def __init__(self, fn: _Function) -> None: self.fn = fn

  def const(self, value: object, dtype: DType) -> str:
    lane = const_literal(value, dtype.scalar())
    if dtype.count == 1: return lane
    return "<" + ", ".join(f"{scalar_type(dtype.scalar())} {lane}" for _ in range(dtype.count)) + ">"

  def half_to_float(self, x: str, dtype: DType) -> str:
    """float16 or bfloat16 bits (lanes of `dtype`) as float32, exactly."""
    e, i32d, fd = self.fn.emit, _like(dtype, dtypes.int32), _like(dtype, dtypes.float32)
    i32, f, b = ll_type(i32d), ll_type(fd), ll_type(_like(dtype, dtypes.bool))
    c = lambda v: self.const(v, i32d)  # noqa: E731
    wide = e(f"zext {ll_type(dtype)} {x} to {i32}")
    if dtype.scalar() is dtypes.bfloat16: return e(f"bitcast {i32} {e(f'shl {i32} {wide}, {c(16)}')} to {f}")
    # exponent and mantissa moved under float32's, the exponent rebiased from 15 to 127
    mag = e(f"shl {i32} {e(f'and {i32} {wide}, {c(0x7FFF)}')}, {c(13)}")
    exp = e(f"and {i32} {mag}, {c(0x7C00 << 13)}")
    normal = e(f"add {i32} {mag}, {c(112 << 23)}")
    special = e(f"add {i32} {normal}, {c(112 << 23)}")  # inf and NaN: the exponent all ones
    # zero and subnormals: the mantissa under exponent 2^-14, as a float, minus 2^-14
    below = e(f"bitcast {i32} {e(f'add {i32} {normal}, {c(1 << 23)}')} to {f}")
    sub = e(f"bitcast {f} {e(f'fsub {f} {below}, {self.const(2.0 ** -14, fd)}')} to {i32}")
    is_special, is_sub = e(f"icmp eq {i32} {exp}, {c(0x7C00 << 13)}"), e(f"icmp eq {i32} {exp}, {c(0)}")
    bits = e(f"select {b} {is_special}, {i32} {special}, {i32} {e(f'select {b} {is_sub}, {i32} {sub}, {i32} {normal}')}")
    sign = e(f"shl {i32} {e(f'and {i32} {wide}, {c(0x8000)}')}, {c(16)}")
    return e(f"bitcast {i32} {e(f'or {i32} {bits}, {sign}')} to {f}")

  def float_to_half(self, x: str, dtype: DType, half: DType) -> str:
    """float32 lanes `x` rounded to `half` (float16 or bfloat16) bits, as tgfn.uop.alu rounds them."""
    i32d, i16d, b = _like(dtype, dtypes.int32), _like(dtype, dtypes.int16), ll_type(_like(dtype, dtypes.bool))
    i32, i16, f = ll_type(i32d), ll_type(i16d), ll_type(_like(dtype, dtypes.float32))
    c = lambda v: self.const(v, i32d)  # noqa: E731
    u = self.fn.emit(f"bitcast {f} {x} to {i32}")
    is_nan = self.fn.emit(f"fcmp uno {f} {x}, {x}")
    if half is dtypes.bfloat16:
      odd = self.fn.emit(f"and {i32} {self.fn.emit(f'lshr {i32} {u}, {c(16)}')}, {c(1)}")
      rounded = self.fn.emit(f"add {i32} {self.fn.emit(f'add {i32} {u}, {c(0x7FFF)}')}, {odd}")
      bits = self.fn.emit(f"trunc {i32} {self.fn.emit(f'lshr {i32} {rounded}, {c(16)}')} to {i16}")
      return self.fn.emit(f"select {b} {is_nan}, {i16} {self.const(0x7FC0, i16d)}, {i16} {bits}")
    sign = self.fn.emit(f"and {i32} {self.fn.emit(f'lshr {i32} {u}, {c(16)}')}, {c(0x8000)}")
    a = self.fn.emit(f"and {i32} {u}, {c(0x7FFFFFFF)}")
    # normal results: rebias and round the 13 dropped bits to nearest even (a carry may reach inf)
    odd = self.fn.emit(f"and {i32} {self.fn.emit(f'lshr {i32} {a}, {c(13)}')}, {c(1)}")
    normal = self.fn.emit(f"add {i32} {self.fn.emit(f'add {i32} {a}, {c(((15 - 127) << 23) + 0xFFF)}')}, {odd}")
    normal = self.fn.emit(f"lshr {i32} {normal}, {c(13)}")
    # below 2^-14: adding 0.5 lines the subnormal's bits up with the float's and the FPU rounds them
    af = self.fn.emit(f"bitcast {i32} {a} to {f}")
    shifted = self.fn.emit(f"fadd {f} {af}, {self.const(0.5, _like(dtype, dtypes.float32))}")
    sub = self.fn.emit(f"sub {i32} {self.fn.emit(f'bitcast {f} {shifted} to {i32}')}, {c(126 << 23)}")
    small = self.fn.emit(f"icmp ult {i32} {a}, {c(113 << 23)}")
    big = self.fn.emit(f"icmp uge {i32} {a}, {c(143 << 23)}")  # 2^16 and up: inf
    bits = self.fn.emit(f"select {b} {small}, {i32} {sub}, {i32} {normal}")
    bits = self.fn.emit(f"select {b} {big}, {i32} {c(0x7C00)}, {i32} {bits}")
    bits = self.fn.emit(f"select {b} {is_nan}, {i32} {c(0x7E00)}, {i32} {bits}")
    return self.fn.emit(f"trunc {i32} {self.fn.emit(f'or {i32} {bits}, {sign}')} to {i16}")

  def double_to_float_odd(self, x: str, dtype: DType) -> str:
    """float64 lanes to float32 rounded to odd: rounding that to float16 then equals rounding x once."""
    d, f, i32d = ll_type(dtype), ll_type(_like(dtype, dtypes.float32)), _like(dtype, dtypes.int32)
    i32, b = ll_type(i32d), ll_type(_like(dtype, dtypes.bool))
    near = self.fn.emit(f"fptrunc {d} {x} to {f}")
    back = self.fn.emit(f"fpext {f} {near} to {d}")
    inexact = self.fn.emit(f"fcmp one {d} {back}, {x}")  # false for NaN
    away = self.fn.emit(f"fcmp ogt {d} {self.fn.call(f'llvm.fabs.{_suffix(dtype)}', d, [(d, back)])}, "
                        f"{self.fn.call(f'llvm.fabs.{_suffix(dtype)}', d, [(d, x)])}")
    bits = self.fn.emit(f"bitcast {f} {near} to {i32}")
    toward_zero = self.fn.emit(f"sub {i32} {bits}, {self.const(1, i32d)}")  # one ulp less in magnitude
    bits = self.fn.emit(f"select {b} {away}, {i32} {toward_zero}, {i32} {bits}")
    odd = self.fn.emit(f"or {i32} {bits}, {self.const(1, i32d)}")
    bits = self.fn.emit(f"select {b} {inexact}, {i32} {odd}, {i32} {bits}")
    return self.fn.emit(f"bitcast {i32} {bits} to {f}")

  def cast(self, x: str, src: DType, dst: DType) -> str:
    """`x` of `src` (scalar or vector) as `dst` (same lane count), as tgfn.uop.alu.cast converts it."""
    s, t = src.scalar(), dst.scalar()
    if s is t: return x
    if s in _HALF:
      x, src, s = self.half_to_float(x, src), _like(src, dtypes.float32), dtypes.float32
      if t is dtypes.float32: return x
    fi, ti = ll_type(src), ll_type(dst)
    if t.is_bool:
      if s.is_float: return self.fn.emit(f"fcmp une {fi} {x}, {self.const(0.0, src)}")
      return self.fn.emit(f"icmp ne {fi} {x}, {self.const(0, src)}")
    if t in _HALF:
      if t is dtypes.float16 and s is dtypes.float64: x = self.double_to_float_odd(x, src)
      elif t is dtypes.float16 and s.is_int:  # an int rounds once: through a double (exact to 2^53;
        # larger ints overflow float16 either way)
        x = self.double_to_float_odd(self.cast(x, src, _like(src, dtypes.float64)), _like(src, dtypes.float64))
      else: x = self.cast(x, src, _like(src, dtypes.float32))
      return self.float_to_half(x, _like(src, dtypes.float32), t)
    if s.is_float and t.is_float: return self.fn.emit(f"{'fpext' if t.bits > s.bits else 'fptrunc'} {fi} {x} to {ti}")
    if s.is_float:  # truncate toward zero, saturate, NaN -> 0
      kind = "fptoui" if t.is_unsigned else "fptosi"
      return self.fn.call(f"llvm.{kind}.sat.{_suffix(dst)}.{_suffix(src)}", ti, [(fi, x)])
    if t.is_float: return self.fn.emit(f"{'uitofp' if s.is_unsigned or s.is_bool else 'sitofp'} {fi} {x} to {ti}")
    if t.bits == s.bits and not s.is_bool: return x
    if t.bits < s.bits: return self.fn.emit(f"trunc {fi} {x} to {ti}")
    return self.fn.emit(f"{'zext' if s.is_unsigned or s.is_bool else 'sext'} {fi} {x} to {ti}")

  def binary(self, op: Ops, a: str, b: str, dtype: DType, b_uop: Optional[UOp] = None) -> str:
    """`a op b` on operands of `dtype` (for comparisons the operands' dtype, the result is bool)."""
    s, t = dtype.scalar(), ll_type(dtype)
    cmp_t = ll_type(_like(dtype, dtypes.bool))
    emit = self.fn.emit
    const_b = _splatted(b_uop)
    if op is Ops.CMPLT:
      return emit(f"fcmp olt {t} {a}, {b}" if s.is_float else f"icmp {'slt' if s.kind == 'i' else 'ult'} {t} {a}, {b}")
    if op is Ops.CMPNE: return emit(f"fcmp une {t} {a}, {b}" if s.is_float else f"icmp ne {t} {a}, {b}")
    if s.is_bool:
      ops = {Ops.ADD: "or", Ops.MUL: "and", Ops.MAX: "or", Ops.AND: "and", Ops.OR: "or", Ops.XOR: "xor"}
      if op not in ops: raise NotImplementedError(f"LLVM rendering of {op} on bool")
      return emit(f"{ops[op]} {t} {a}, {b}")
    if s.is_float:
      if op is Ops.MAX:  # NaN-propagating: a when a is NaN or a > b, else b (NaN when b is)
        pick_a = emit(f"or {cmp_t} {emit(f'fcmp uno {t} {a}, {a}')}, {emit(f'fcmp ogt {t} {a}, {b}')}")
        return emit(f"select {cmp_t} {pick_a}, {t} {a}, {t} {b}")
      ops = {Ops.ADD: "fadd", Ops.SUB: "fsub", Ops.MUL: "fmul", Ops.FDIV: "fdiv"}
      if op not in ops: raise NotImplementedError(f"LLVM rendering of {op} on {s.name}")
      return emit(f"{ops[op]} {t} {a}, {b}")
    ops = {Ops.ADD: "add", Ops.SUB: "sub", Ops.MUL: "mul", Ops.AND: "and", Ops.OR: "or", Ops.XOR: "xor"}
    if op in ops: return emit(f"{ops[op]} {t} {a}, {b}")
    signed = not s.is_unsigned
    if op is Ops.MAX:
      greater = emit(f"icmp {'sgt' if signed else 'ugt'} {t} {a}, {b}")
      return emit(f"select {cmp_t} {greater}, {t} {a}, {t} {b}")
    if op in (Ops.IDIV, Ops.MOD):
      instr = ("sdiv" if signed else "udiv") if op is Ops.IDIV else ("srem" if signed else "urem")
      if const_b is not None and const_b not in (0, -1): return emit(f"{instr} {t} {a}, {b}")
      # x // 0 and x % 0 are 0, x // -1 is -x (wrapping): the divisor is made safe first (1, whose
      # remainder is the 0 that x % 0 and x % -1 give)
      zero = emit(f"icmp eq {t} {b}, {self.const(0, dtype)}")
      bad = emit(f"or {cmp_t} {zero}, {emit(f'icmp eq {t} {b}, {self.const(-1, dtype)}')}") if signed else zero
      result = emit(f"{instr} {t} {a}, {emit(f'select {cmp_t} {bad}, {t} {self.const(1, dtype)}, {t} {b}')}")
      if op is Ops.MOD: return result
      if signed: result = emit(f"select {cmp_t} {bad}, {t} {emit(f'sub {t} {self.const(0, dtype)}, {a}')}, {t} {result}")
      return emit(f"select {cmp_t} {zero}, {t} {self.const(0, dtype)}, {t} {result}")
    if op in (Ops.SHL, Ops.SHR):
      instr = "shl" if op is Ops.SHL else ("ashr" if signed else "lshr")
      if const_b is not None and 0 <= const_b < s.bits: return emit(f"{instr} {t} {a}, {b}")
      # an amount outside [0, bits) (negative ones are huge unsigned) gives 0, or -1 for a negative >>
      inside = emit(f"icmp ult {t} {b}, {self.const(s.bits, dtype)}")
      shifted = emit(f"{instr} {t} {a}, {emit(f'and {t} {b}, {self.const(s.bits - 1, dtype)}')}")
      too_far = emit(f"ashr {t} {a}, {self.const(s.bits - 1, dtype)}") if op is Ops.SHR and signed else self.const(0, dtype)
      return emit(f"select {cmp_t} {inside}, {t} {shifted}, {t} {too_far}")
    raise NotImplementedError(f"LLVM rendering of {op} on {s.name}")

  def unary(self, op: Ops, x: str, dtype: DType) -> str:
    s, t = dtype.scalar(), ll_type(dtype)
    if op is Ops.NEG:
      if s.is_bool: return self.fn.emit(f"xor {t} {x}, {self.const(True, dtype)}")
      return self.fn.emit(f"fneg {t} {x}" if s.is_float else f"sub {t} {self.const(0, dtype)}, {x}")
    if not s.is_float: raise NotImplementedError(f"LLVM rendering of {op} on {s.name}")
    if op is Ops.RECIP: return self.fn.emit(f"fdiv {t} {self.const(1.0, dtype)}, {x}")
    return self.fn.call(f"llvm.{_INTRINSIC[op]}.{_suffix(dtype)}", t, [(t, x)])


def _splatted(u: Optional[UOp]) -> Optional[object]:
  """The constant value of `u` (a CONST, or a VECTORIZE of one constant), else None."""
  if u is None: return None
  lanes = u.src if u.op is Ops.VECTORIZE else (u,)
  if not all(s.op is Ops.CONST for s in lanes) or len({s.arg for s in lanes}) != 1: return None
  return lanes[0].arg


class LLVMRenderer(Renderer):
  """LLVM IR with native vectors; a THREAD axis is split over the CPU worker pool."""
  supports_opts = True

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = ()) -> str:
    fn = _Function()
    vals = _Values(fn)
    names: dict[UOp, str] = {}
    slots: dict[UOp, str] = {}  # accumulators and loop counters: stack slots
    loops: list[tuple[UOp, str, str, str]] = []  # open loops: (range, slot, header label, exit label)
    thread_range: Optional[UOp] = None

    def ref(u: UOp, count: int = 1) -> str:
      """`u`'s value, splatted to `count` lanes when a vector op takes a scalar."""
      if u.op is Ops.CONST: v = vals.const(u.arg, u.dtype)
      elif u.op is Ops.DEFINE_ACC: v = fn.emit(f"load {ll_type(u.dtype)}, ptr {slots[u]}")
      else: v = names[u]
      if count > 1 and u.dtype.count == 1:
        vt = ll_type(u.dtype.vec(count))
        one = fn.emit(f"insertelement {vt} poison, {ll_type(u.dtype)} {v}, i32 0")
        v = fn.emit(f"shufflevector {vt} {one}, {vt} poison, <{count} x i32> zeroinitializer")
      return v

    def address(buf: UOp, idx: UOp, dtype: DType) -> str:
      return fn.emit(f"getelementptr inbounds {mem_type(dtype.scalar())}, ptr {ref(buf)}, i64 {ref(idx)}", "p")

    def load(u: UOp) -> str:
      mt = mem_type(u.dtype)
      ptr = address(u.src[0], u.src[1], u.dtype)
      return fn.emit(f"load {mt}, ptr {ptr}, align {u.dtype.itemsize}")

    def from_memory(raw: str, dtype: DType) -> str:
      if not dtype.scalar().is_bool: return raw
      return fn.emit(f"icmp ne {mem_type(dtype)} {raw}, {'zeroinitializer' if dtype.count > 1 else '0'}")

    for u in program:
      op = u.op
      if op is Ops.CONST: continue
      if op is Ops.DEFINE_GLOBAL: names[u] = f"%data{u.arg}"
      elif op is Ops.DEFINE_VAR:
        names[u] = fn.emit(f"icmp ne i8 %var{u.arg}, 0") if u.dtype.is_bool else f"%var{u.arg}"
      elif op is Ops.RANGE:
        slot = fn.fresh("ridx.slot")
        fn.allocas.append(f"  {slot} = alloca i64")
        head, body, done = (fn.fresh(p)[1:] for p in ("loop", "body", "done"))
        if u.kind is AxisType.THREAD:
          thread_range = u
          start, bound = "%lo", "%hi"
        else: start, bound = "0", ref(u.src[0])
        fn.raw(f"store i64 {start}, ptr {slot}")
        fn.raw(f"br label %{head}")
        fn.label(head)
        names[u] = fn.emit(f"load i64, ptr {slot}", "ridx")
        fn.raw(f"br i1 {fn.emit(f'icmp slt i64 {names[u]}, {bound}')}, label %{body}, label %{done}")
        fn.label(body)
        loops.append((u, slot, head, done))
      elif op is Ops.ENDRANGE:
        rng, slot, head, done = loops.pop()
        fn.raw(f"store i64 {fn.emit(f'add i64 {names[rng]}, 1')}, ptr {slot}")
        fn.raw(f"br label %{head}")
        fn.label(done)
      elif op is Ops.DEFINE_ACC:
        slot = fn.fresh("acc")
        fn.allocas.append(f"  {slot} = alloca {ll_type(u.dtype)}")
        slots[u] = slot
        fn.raw(f"store {ll_type(u.dtype)} {ref(u.src[0])}, ptr {slot}")
      elif op is Ops.ASSIGN:
        acc, value = u.src
        fn.raw(f"store {ll_type(acc.dtype)} {self.accumulate(u, fn, vals, ref)}, ptr {slots[acc]}")
      elif op is Ops.LOAD:
        if len(u.src) == 2:
          names[u] = from_memory(load(u), u.dtype)
          continue
        gate = u.src[2]
        if gate.dtype.count > 1: raise NotImplementedError("LLVM rendering of a load gated per lane")
        then, join, before = fn.fresh("gated")[1:], fn.fresh("join")[1:], fn.block
        fn.raw(f"br i1 {ref(gate)}, label %{then}, label %{join}")
        fn.label(then)
        raw = load(u)
        fn.raw(f"br label %{join}")
        fn.label(join)
        zero = "zeroinitializer" if u.dtype.count > 1 else ("0.0" if u.dtype in (dtypes.float32, dtypes.float64) else "0")
        merged = fn.emit(f"phi {mem_type(u.dtype)} [ {raw}, %{then} ], [ {zero}, %{before} ]")
        names[u] = from_memory(merged, u.dtype)
      elif op is Ops.STORE:
        buf, idx, value = u.src
        v = ref(value)
        if value.dtype.scalar().is_bool: v = fn.emit(f"zext {ll_type(value.dtype)} {v} to {mem_type(value.dtype)}")
        fn.raw(f"store {mem_type(value.dtype)} {v}, ptr {address(buf, idx, value.dtype)}, align {value.dtype.itemsize}")
      else: names[u] = self.alu(u, fn, vals, ref)

    return self.assemble(name, fn, buffer_dtypes, param_dtypes, thread_range)

  def alu(self, u: UOp, fn: _Function, vals: _Values, ref: Callable[..., str]) -> str:
    op, srcs, dtype = u.op, u.src, u.dtype
    if op is Ops.VECTORIZE:
      if all(s.op is Ops.CONST for s in srcs):
        st = scalar_type(dtype.scalar())
        return "<" + ", ".join(f"{st} {const_literal(s.arg, dtype.scalar())}" for s in srcs) + ">"
      v = "poison"
      for i, s in enumerate(srcs): v = fn.emit(f"insertelement {ll_type(dtype)} {v}, {ll_type(s.dtype)} {ref(s)}, i32 {i}")
      return v
    if op is Ops.GEP: return fn.emit(f"extractelement {ll_type(srcs[0].dtype)} {ref(srcs[0])}, i32 {u.arg}")
    count = max(s.dtype.count for s in srcs)
    args = [ref(s, count) for s in srcs]
    # the operands' dtype (for WHERE, the values'), with the op's lane count
    operand = (srcs[-1] if op is Ops.WHERE else srcs[0]).dtype.scalar()
    src = operand.vec(count) if count > 1 else operand
    if op is Ops.WHERE:
      return fn.emit(f"select {ll_type(_like(src, dtypes.bool))} {args[0]}, {ll_type(src)} {args[1]}, {ll_type(src)} {args[2]}")
    if op is Ops.CAST: return vals.cast(args[0], src, dtype)
    if op is Ops.BITCAST:
      if srcs[0].dtype.scalar().itemsize != dtype.scalar().itemsize or dtype.scalar().is_bool or src.scalar().is_bool:
        raise NotImplementedError(f"LLVM rendering of a bitcast from {srcs[0].dtype} to {dtype}")
      return fn.emit(f"bitcast {ll_type(src)} {args[0]} to {ll_type(dtype)}")
    if len(srcs) == 1: return vals.unary(op, args[0], dtype)
    return vals.binary(op, args[0], args[1], src, srcs[1])

  def accumulate(self, u: UOp, fn: _Function, vals: _Values, ref: Callable[..., str]) -> str:
    acc, value = u.src
    dtype = acc.dtype
    # the float policy lets a reduction fuse its multiply-add (one rounding instead of two)
    if u.arg is Ops.ADD and value.op is Ops.MUL and dtype.scalar().is_float and not strict_float():
      t = ll_type(dtype)
      a, b = (ref(s, dtype.count) for s in value.src)
      return fn.call(f"llvm.fma.{_suffix(dtype)}", t, [(t, a), (t, b), (t, ref(acc))])
    return vals.binary(u.arg, ref(acc), ref(value, dtype.count), dtype, value)

  def assemble(self, name: str, fn: _Function, buffer_dtypes: list[DType], param_dtypes: Sequence[DType],
               thread_range: Optional[UOp]) -> str:
    params = [f"ptr noalias %data{i}" for i in range(len(buffer_dtypes))]
    params += [f"{param_type(dt)} %var{i}" for i, dt in enumerate(param_dtypes)]
    body = "\n".join(["entry:", *fn.allocas, *fn.lines, "  ret void"])
    declares = "".join(f"{d}\n" for d in sorted(fn.declares))
    if thread_range is None: return f"{declares}define void @{name}({', '.join(params)}) {{\n{body}\n}}\n"
    # the THREAD loop runs in chunks [lo, hi) on the worker pool: the arguments travel in a struct,
    # the pool calls the body, and the body calls the kernel proper (inlined) on its chunk
    types = ["ptr"] * len(buffer_dtypes) + [param_type(dt) for dt in param_dtypes]
    struct_t = "{" + ", ".join(types) + "}"
    args = [p.split()[-1] for p in params]
    pack = "".join(f"  %f{i} = getelementptr inbounds {struct_t}, ptr %ctx, i32 0, i32 {i}\n  store {t} {a}, ptr %f{i}\n"
                   for i, (t, a) in enumerate(zip(types, args)))
    unpack = "".join(f"  %f{i} = getelementptr inbounds {struct_t}, ptr %ctx, i32 0, i32 {i}\n  %a{i} = load {t}, ptr %f{i}\n"
                     for i, t in enumerate(types))
    n = thread_range.size
    return (f"{declares}declare void @tg_parallel_for(ptr, ptr, i64, i64)\n"
            f"define internal void @{name}_chunk(i64 %lo, i64 %hi, {', '.join(params)}) alwaysinline {{\n{body}\n}}\n"
            f"define internal void @{name}_body(ptr %ctx, i64 %lo, i64 %hi) {{\nentry:\n{unpack}"
            f"  call void @{name}_chunk(i64 %lo, i64 %hi, {', '.join(f'{t} %a{i}' for i, t in enumerate(types))})\n  ret void\n}}\n"
            f"define void @{name}({', '.join(params)}) {{\nentry:\n  %ctx = alloca {struct_t}\n{pack}"
            f"  call void @tg_parallel_for(ptr @{name}_body, ptr %ctx, i64 {n}, i64 {max(1, n // 16)})\n  ret void\n}}\n")
