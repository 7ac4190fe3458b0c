"""Render a linearized kernel as C. Every value gets a typed `const` local, so integer results wrap at
their dtype's width exactly where the reference semantics (tgfn/uop/alu.py) say they do.
Constants, buffers and loop counters are spelled inline."""
from __future__ import annotations

import math
import re
from typing import Callable, Optional, Sequence

from tgfn.dtype import DType, dtype_from_name, dtypes
from tgfn.renderer import Renderer
from tgfn.renderer.cvector import VectorALU
from tgfn.codegen.policy import strict_float
from tgfn.uop.ops import AxisType, Ops, UOp

# guarded, so the sources of several kernels concatenate into one translation unit (batched compiles);
# the vector typedefs each kernel repeats are identical, which C11 allows
PRELUDE = """#ifndef TG_PRELUDE
#define TG_PRELUDE
#include <math.h>
#include <string.h>
static inline float tg_bf2f(unsigned short b) { unsigned int u = (unsigned int)b << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short tg_f2bf(float f) {
  unsigned int u; memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
#endif
"""

# the CPU driver's worker pool (tgfn_drivers/_cpu_threads.py), loaded before any kernel
THREAD_PRELUDE = """extern void tg_parallel_for(void (*body)(void *, long long, long long), void *ctx, long long n, long long grain);
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


def param_ctype(dtype: DType) -> str:
  """How a scalar parameter of `dtype` is passed to a kernel: its own C type, except float16, which C
  callers (ctypes) cannot pass: it comes as a double and is rounded once inside, as a constant would be."""
  return "double" if dtype is dtypes.float16 else dtype.cname


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
  if src is dtypes.float64 and dst is dtypes.float32:
    # gcc 12's SLP vectorizer turns (double)(float)x of a short unrolled loop into a plain copy of x (no
    # rounding at all); an empty asm that may change the float in memory keeps the narrowing
    return f"({{ float _n = (float)({x}); __asm__(\"\" : \"+m\"(_n)); _n; }})"
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


def _lanewise(u: UOp, scalar: Callable[[Callable[[UOp], str]], str], ref: Callable[[UOp], str]) -> str:
  """A vector op the C vector extensions cannot express exactly, computed lane by lane (gcc turns the
  short loop back into vector instructions where the target has them)."""
  lane_ref = lambda s: f"{ref(s)}[_l]" if s.dtype is not None and s.dtype.count > 1 else ref(s)  # noqa: E731
  return (f"({{ {u.dtype.cname} _r; for (int _l = 0; _l < {u.dtype.count}; _l++) _r[_l] = {scalar(lane_ref)}; _r; }})")


_VECTOR_NAME = re.compile(r"\btg_([a-z]+[0-9]*x[0-9]+)(?![0-9])")
_NATIVE_VECTOR = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*"}


class CStyleRenderer(Renderer):
  """C with loops and GCC vector extensions; a THREAD axis is split over the CPU driver's worker pool."""
  kernel_prefix = "void"
  buffer_qualifier = " restrict"
  supports_opts = True
  # vector dtype name -> a fused multiply-add of whole vectors, "{0}*{1}+{2}" (else a lane loop of fma)
  vector_fma: dict[str, str] = {}

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = ()) -> str:
    names: dict[UOp, str] = {}
    lines: list[str] = []
    indent = 1
    counter = 0
    vectors: dict[str, DType] = {}
    thread_range: Optional[UOp] = None

    def ref(u: UOp) -> str:
      if u.op is Ops.CONST: return c_const(u.arg, u.dtype)
      return names[u]

    def fresh(prefix: str) -> str:
      nonlocal counter
      counter += 1
      return f"{prefix}{counter - 1}"

    def declare(u: UOp, expr: str, prefix: str = "v") -> None:
      names[u] = fresh(prefix)
      if u.dtype.count > 1: vectors[u.dtype.name] = u.dtype
      lines.append("  " * indent + f"const {u.dtype.cname} {names[u]} = {expr};")

    for u in program:
      op = u.op
      if op is Ops.CONST: continue
      if op is Ops.DEFINE_GLOBAL: names[u] = f"data{u.arg}"
      elif op is Ops.DEFINE_VAR:
        if u.dtype is dtypes.float16: declare(u, f"(_Float16)var{u.arg}")
        else: names[u] = f"var{u.arg}"
      elif op is Ops.RANGE:
        names[u] = fresh("ridx")
        if u.kind is AxisType.THREAD:
          thread_range = u
          lines.append("  " * indent + f"for (long long {names[u]} = lo; {names[u]} < hi; {names[u]}++) {{")
        else:
          lines.append("  " * indent + f"for (long long {names[u]} = 0; {names[u]} < {ref(u.src[0])}; {names[u]}++) {{")
        indent += 1
      elif op is Ops.ENDRANGE:
        indent -= 1
        lines.append("  " * indent + "}")
      elif op is Ops.DEFINE_ACC:
        names[u] = fresh("acc")
        if u.dtype.count > 1: vectors[u.dtype.name] = u.dtype
        lines.append("  " * indent + f"{u.dtype.cname} {names[u]} = {ref(u.src[0])};")
      elif op is Ops.ASSIGN: lines.append("  " * indent + f"{names[u.src[0]]} = {self.render_accumulate(u, ref)};")
      elif op is Ops.LOAD: declare(u, self.render_load(u, ref), "val")
      elif op is Ops.STORE:
        buf, idx, value = u.src
        if value.dtype.count > 1: lines.append("  " * indent + f"*({value.dtype.cname}_u*)({ref(buf)} + {ref(idx)}) = {ref(value)};")
        else: lines.append("  " * indent + f"{ref(buf)}[{ref(idx)}] = {ref(value)};")
      else: declare(u, self.render_alu(u, ref), "alu")
    # buffers (the ones stored to are writable), then scalar parameters (numbered 0, 1, ... in the AST,
    # passed in that order)
    written = {u.src[0].arg for u in program if u.op is Ops.STORE}
    params = [f"{'' if i in written else 'const '}{dt.cname}*{self.buffer_qualifier} data{i}" for i, dt in enumerate(buffer_dtypes)]
    params += [f"{param_ctype(dt)} var{i}" for i, dt in enumerate(param_dtypes)]
    arg_names = [f"data{i}" for i in range(len(buffer_dtypes))] + [f"var{i}" for i in range(len(param_dtypes))]
    body = "\n".join(lines)
    # every vector type the body names, the masks of native vector ops (tgfn/renderer/cvector.py) included
    vectors.update((n, dtype_from_name(n)) for n in dict.fromkeys(_VECTOR_NAME.findall(body)))
    typedefs = "".join(f"typedef {dt.scalar().cname if not dt.is_bool else 'unsigned char'} {dt.cname} "
                       f"__attribute__((vector_size({dt.count * dt.itemsize})));\n"
                       f"typedef {dt.cname} {dt.cname}_u __attribute__((aligned({dt.itemsize})));\n"
                       for dt in vectors.values())
    if thread_range is None:
      return f"{PRELUDE}{typedefs}{self.kernel_prefix} {name}({', '.join(params)}) {{\n{body}\n}}\n"
    # the loop over the THREAD axis runs in chunks [lo, hi) on the worker pool: the kernel's arguments
    # travel in a struct, and the entry point hands the body to tg_parallel_for
    fields = "".join(f"  {p};\n" for p in params).replace(self.buffer_qualifier, "")
    unpack = "".join(f"  {p} = ctx->{a};\n" for p, a in zip(params, arg_names))
    n = thread_range.size
    return (f"{PRELUDE}{THREAD_PRELUDE}{typedefs}struct {name}_ctx {{\n{fields}}};\n"
            f"static void {name}_body(void *ctx_, long long lo, long long hi) {{\n"
            f"  const struct {name}_ctx *ctx = ctx_;\n{unpack}{body}\n}}\n"
            f"{self.kernel_prefix} {name}({', '.join(params)}) {{\n"
            f"  struct {name}_ctx ctx = {{{', '.join(arg_names)}}};\n"
            f"  tg_parallel_for({name}_body, &ctx, {n}, {max(1, n // 16)});\n}}\n")

  def render_load(self, u: UOp, ref: Callable[[UOp], str]) -> str:
    buf, idx = ref(u.src[0]), ref(u.src[1])
    load = f"*(const {u.dtype.cname}_u*)({buf} + {idx})" if u.dtype.count > 1 else f"{buf}[{idx}]"
    if len(u.src) == 2: return load
    zero = c_const(0, u.dtype.scalar())
    if u.dtype.count > 1: zero = f"(({u.dtype.cname}){{{', '.join([zero] * u.dtype.count)}}})"
    return f"({ref(u.src[2])} ? {load} : {zero})"

  def render_accumulate(self, u: UOp, ref: Callable[[UOp], str]) -> str:
    acc, value = u.src
    dtype = acc.dtype.scalar()
    # the float policy lets a reduction fuse its multiply-add (one rounding instead of two)
    fma = u.arg is Ops.ADD and value.op is Ops.MUL and dtype.is_float and not strict_float()
    fn = "__builtin_fma" + ("f" if dtype is not dtypes.float64 else "")
    if acc.dtype.count == 1:
      if fma: return f"{fn}({ref(value.src[0])}, {ref(value.src[1])}, {ref(acc)})"
      return c_binary(u.arg, ref(acc), ref(value), dtype, value)
    if fma and (builtin := self.vector_fma.get(acc.dtype.name)) is not None:
      return builtin.format(*(ref(s) for s in value.src), ref(acc))
    if fma:
      a, b = (f"{ref(s)}[_l]" if s.dtype.count > 1 else ref(s) for s in value.src)
      return (f"({{ {acc.dtype.cname} _r; for (int _l = 0; _l < {acc.dtype.count}; _l++) "
              f"_r[_l] = {fn}({a}, {b}, {ref(acc)}[_l]); _r; }})")
    if u.arg in (Ops.ADD, Ops.MUL) and not dtype.is_bool: return f"({ref(acc)} {_NATIVE_VECTOR[u.arg]} {ref(value)})"
    if (native := VectorALU(ref).alu(u.arg, acc.dtype, (acc, value))) is not None: return native
    return _lanewise(acc, lambda r: c_binary(u.arg, r(acc), r(value), dtype, value), ref)

  def render_alu(self, u: UOp, ref: Callable[[UOp], str]) -> str:
    op, srcs = u.op, u.src
    if op is Ops.VECTORIZE: return f"(({u.dtype.cname}){{{', '.join(ref(s) for s in srcs)}}})"
    if op is Ops.GEP: return f"{ref(srcs[0])}[{u.arg}]"
    if u.dtype.count > 1:
      scalar = u.dtype.scalar()
      if op in _NATIVE_VECTOR and srcs[0].dtype.count > 1 and not scalar.is_bool and \
          (scalar.is_float or scalar.itemsize >= 4):
        return f"({ref(srcs[0])} {_NATIVE_VECTOR[op]} {ref(srcs[1])})"
      if op is Ops.FDIV: return f"({ref(srcs[0])} / {ref(srcs[1])})"
      if (native := VectorALU(ref).render(u)) is not None: return native
      return _lanewise(u, lambda r: self.render_scalar_alu(u, r, scalar), ref)
    return self.render_scalar_alu(u, ref, u.dtype)

  def render_scalar_alu(self, u: UOp, ref: Callable[[UOp], str], dtype: DType) -> str:
    op, srcs = u.op, u.src
    if op is Ops.CAST: return c_cast(ref(srcs[0]), srcs[0].dtype.scalar(), dtype)
    if op is Ops.BITCAST:
      return f"({{ {dtype.cname} _b; {srcs[0].dtype.scalar().cname} _a = {ref(srcs[0])}; memcpy(&_b, &_a, sizeof _b); _b; }})"
    if op is Ops.WHERE: return f"({ref(srcs[0])} ? {ref(srcs[1])} : {ref(srcs[2])})"
    if len(srcs) == 1: return c_unary(op, ref(srcs[0]), dtype)
    return c_binary(op, ref(srcs[0]), ref(srcs[1]), srcs[0].dtype.scalar(), srcs[1])
