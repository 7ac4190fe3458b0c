"""Render a linearized kernel as C. Every value gets a typed `const` local, so integer results wrap at
their dtype's width exactly where the reference semantics (tgfn/uop/alu.py) say they do.
Constants, buffers and loop counters are spelled inline."""
from __future__ import annotations

import math
from typing import Callable

from tgfn.dtype import DType, dtypes
from tgfn.renderer import Renderer
from tgfn.uop.ops import Ops, UOp

PRELUDE = """#include <math.h>
#include <string.h>
static inline float tg_bf2f(unsigned short b) { unsigned int u = (unsigned int)b << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short tg_f2bf(float f) {
  unsigned int u; memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
"""

_FLOAT_FN = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.COS: "cos",
             Ops.TRUNC: "trunc"}


def c_const(value: object, dtype: DType) -> str:
  if dtype.is_bool: return "1" if value else "0"
  if dtype.is_float:
    f = float(value)  # type: ignore[arg-type]
    single = dtype is not dtypes.float64
    if math.isnan(f): text = "__builtin_nanf(\"\")" if single else "__builtin_nan(\"\")"
    elif math.isinf(f): text = ("-" if f < 0 else "") + ("__builtin_inff()" if single else "__builtin_inf()")
    else: text = f.hex() + ("f" if single else "")
    if dtype is dtypes.bfloat16:
      from tgfn.uop.alu import float_to_bf16_bits
      return f"((unsigned short){float_to_bf16_bits(f)})"
    # float16: convert from the double literal in one step; through a float literal it would round twice
    if dtype is dtypes.float16: return f"((_Float16){f.hex() if math.isfinite(f) else text})"
    return f"({text})"
  v = int(value)  # type: ignore[call-overload]
  if dtype.is_unsigned: return f"{v}ull" if dtype.itemsize == 8 else f"{v}u"
  if v == dtype.min: return f"({v + 1}{'LL' if dtype.itemsize == 8 else ''}-1)"
  return f"{v}LL" if dtype.itemsize == 8 else str(v)


def c_float_to_int(x: str, dtype: DType) -> str:
  """Truncate toward zero, saturate out-of-range values, NaN -> 0 (tgfn's defined cast)."""
  hi, lo = float(dtype.max) + 1.0, float(dtype.min)
  return (f"({{ double _v = (double)({x}); _v != _v ? 0 : _v >= {hi!r} ? {c_const(dtype.max, dtype)} : "
          f"_v < {lo!r} ? {c_const(dtype.min, dtype)} : ({dtype.cname})_v; }})")


def c_cast(x: str, src: DType, dst: DType) -> str:
  # bfloat16 is held as its bits: widen first (bits 0x8000, -0.0, must still cast to False)
  if src is dtypes.bfloat16: x, src = f"tg_bf2f({x})", dtypes.float32
  if dst.is_bool: return f"({x} != 0)"
  if dst is dtypes.bfloat16: return f"tg_f2bf((float)({x}))"
  if src.is_float and dst.is_int: return c_float_to_int(x, dst)
  return f"(({dst.cname})({x}))"


def c_binary(op: Ops, a: str, b: str, dtype: DType, b_uop: UOp) -> str:
  if op is Ops.ADD: return f"({a} + {b})" if not dtype.is_bool else f"({a} | {b})"
  if op is Ops.SUB: return f"({a} - {b})"
  if op is Ops.MUL: return f"({a} * {b})" if not dtype.is_bool else f"({a} & {b})"
  if op is Ops.FDIV: return f"({a} / {b})"
  if op is Ops.MAX:
    if dtype.is_float: return f"(({a} != {a} || {a} > {b}) ? {a} : {b})"
    return f"({a} | {b})" if dtype.is_bool else f"({a} > {b} ? {a} : {b})"
  if op is Ops.CMPLT: return f"({a} < {b})"
  if op is Ops.CMPNE: return f"({a} != {b})"
  if op is Ops.AND: return f"({a} & {b})"
  if op is Ops.OR: return f"({a} | {b})"
  if op is Ops.XOR: return f"({a} ^ {b})"
  safe_divisor = b_uop.op is Ops.CONST and b_uop.arg not in (0, -1)
  if op is Ops.IDIV:
    if safe_divisor: return f"({a} / {b})"
    if dtype.is_unsigned: return f"({b} == 0 ? 0 : {a} / {b})"
    return f"({b} == 0 ? 0 : ({b} == -1 ? -{a} : {a} / {b}))"
  if op is Ops.MOD:
    if safe_divisor: return f"({a} % {b})"
    if dtype.is_unsigned: return f"({b} == 0 ? 0 : {a} % {b})"
    return f"({b} == 0 || {b} == -1 ? 0 : {a} % {b})"
  if op in (Ops.SHL, Ops.SHR):
    sym = "<<" if op is Ops.SHL else ">>"
    if b_uop.op is Ops.CONST and 0 <= b_uop.arg < dtype.bits: return f"({a} {sym} {b})"
    too_far = "0" if op is Ops.SHL or dtype.is_unsigned else f"({a} < 0 ? -1 : 0)"
    return f"((unsigned long long)({b}) >= {dtype.bits} ? {too_far} : {a} {sym} {b})"
  raise NotImplementedError(f"C rendering of {op}")


def c_unary(op: Ops, x: str, dtype: DType) -> str:
  if op is Ops.NEG: return f"(-{x})" if not dtype.is_bool else f"(!{x})"
  if op is Ops.RECIP: return f"({c_const(1.0, dtype)} / {x})"
  suffix = "f" if dtype is not dtypes.float64 else ""
  return f"{_FLOAT_FN[op]}{suffix}({x})"


class CStyleRenderer(Renderer):
  """C with loops; subclasses for other C dialects change the kernel prefix and buffer qualifiers."""
  kernel_prefix = "void"
  buffer_qualifier = " restrict"

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType]) -> str:
    names: dict[UOp, str] = {}
    accs: dict[object, str] = {}
    lines: list[str] = []
    indent = 1
    counter = 0

    def ref(u: UOp) -> str:
      if u.op is Ops.CONST: return c_const(u.arg, u.dtype)
      return names[u]

    def declare(u: UOp, expr: str, prefix: str = "v") -> None:
      nonlocal counter
      names[u] = f"{prefix}{counter}"
      counter += 1
      lines.append("  " * indent + f"const {u.dtype.cname} {names[u]} = {expr};")

    for u in program:
      op = u.op
      if op is Ops.CONST: continue
      if op is Ops.DEFINE_GLOBAL: names[u] = f"data{u.arg}"
      elif op is Ops.RANGE:
        names[u] = f"ridx{counter}"
        counter += 1
        lines.append("  " * indent + f"for (int {names[u]} = 0; {names[u]} < {ref(u.src[0])}; {names[u]}++) {{")
        indent += 1
      elif op is Ops.ENDRANGE:
        indent -= 1
        lines.append("  " * indent + "}")
      elif op is Ops.DEFINE_ACC:
        names[u] = accs[u.arg] = f"acc{counter}"
        counter += 1
        lines.append("  " * indent + f"{u.dtype.cname} {names[u]} = {ref(u.src[0])};")
      elif op is Ops.ASSIGN:
        acc, value = u.src
        lines.append("  " * indent + f"{names[acc]} = {c_binary(u.arg, names[acc], ref(value), acc.dtype, value)};")
      elif op is Ops.REDUCE: names[u] = accs[u.src[1].arg]
      elif op is Ops.LOAD:
        load = f"{ref(u.src[0])}[{ref(u.src[1])}]"
        declare(u, load if len(u.src) == 2 else f"({ref(u.src[2])} ? {load} : {c_const(0, u.dtype)})", "val")
      elif op is Ops.STORE:
        lines.append("  " * indent + f"{ref(u.src[0])}[{ref(u.src[1])}] = {ref(u.src[2])};")
      else: declare(u, self.render_alu(u, ref), "alu")
    params = ", ".join(f"{'' if i == 0 else 'const '}{dt.cname}*{self.buffer_qualifier} data{i}"
                       for i, dt in enumerate(buffer_dtypes))
    body = "\n".join(lines)
    return f"{PRELUDE}{self.kernel_prefix} {name}({params}) {{\n{body}\n}}\n"

  def render_alu(self, u: UOp, ref: Callable[[UOp], str]) -> str:
    op, srcs = u.op, u.src
    if op is Ops.CAST: return c_cast(ref(srcs[0]), srcs[0].dtype, u.dtype)
    if op is Ops.BITCAST:
      return f"({{ {u.dtype.cname} _b; {srcs[0].dtype.cname} _a = {ref(srcs[0])}; memcpy(&_b, &_a, sizeof _b); _b; }})"
    if op is Ops.WHERE: return f"({ref(srcs[0])} ? {ref(srcs[1])} : {ref(srcs[2])})"
    if len(srcs) == 1: return c_unary(op, ref(srcs[0]), u.dtype)
    return c_binary(op, ref(srcs[0]), ref(srcs[1]), srcs[0].dtype, srcs[1])

