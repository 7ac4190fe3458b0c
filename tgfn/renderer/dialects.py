"""The C family as tables: what C (the CPU), OpenCL C and CUDA C spell differently, read by the one printer
in tgfn/renderer/cstyle.py. The meaning of every op is fixed before printing (tgfn/codegen/semantics.py);
a dialect only says how to write it: type names, qualifiers, kernel ids, math functions, literals,
bit casts, half types and the helpers they need."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from tgfn.dtype import DType, dtypes
from tgfn.uop.ops import Ops

_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@dataclass(frozen=True)
class Dialect:
  name: str
  types: dict[str, str]                  # dtype name -> how a value of it is declared
  kernel_prefix: str                     # before the kernel's name
  helper_prefix: str                     # before a helper function of the prelude
  buffer_space: str = ""                 # address space of a buffer pointer ("__global ")
  restrict: str = " restrict"
  buffer_types: dict[str, str] = field(default_factory=dict)  # a buffer's element type, where not `types`
  param_types: dict[str, str] = field(default_factory=dict)   # a scalar parameter's type, where not `types`
  long_suffix: str = "LL"                # 64-bit literals
  ulong_suffix: str = "ull"
  nan: tuple[str, str] = ('__builtin_nanf("")', '__builtin_nan("")')   # float32, float64
  inf: tuple[str, str] = ("__builtin_inff()", "__builtin_inf()")
  math_suffix: str = "f"                 # sqrtf: float32 math functions carry it ("" where they are overloaded)
  fma: tuple[str, str] = ("__builtin_fmaf", "__builtin_fma")
  native_half: bool = True               # float16 values in a native type (C's _Float16), else as uint16 bits
  wrapping_ints: bool = True             # signed + - * << wrap (gcc -fwrapv); else they go through unsigned
  from_unsigned: str = "(({t})({x}))"     # an unsigned value's bits as the signed type {t}
  narrow_double: str = "((float)({x}))"   # float64 -> float32
  bitcast: Optional[Callable[[str, DType, DType], str]] = None  # (x, src, dst) -> expression
  # ids of the kernel's output axes (innermost first), each "{n}"-formatted with the axis size, with the
  # largest size each may cover and whether it may overshoot the size (then the kernel checks it)
  global_ids: tuple[tuple[str, int, bool], ...] = ()
  # (group id, id within the group) of each kernel id dimension, innermost first: a LOCAL axis (work groups,
  # tgfn/codegen/opts.py) is group id * group size + local id
  local_ids: tuple[tuple[str, str], ...] = ()
  prelude: str = ""                      # at the top of every kernel
  helpers: str = ""                      # helper functions, each included when the kernel calls it
  vectors: bool = False                  # GCC vector extensions (tgfn/renderer/cvector.py)

  def type(self, dtype: DType) -> str: return self.types[dtype.name]
  def buffer_type(self, dtype: DType) -> str: return self.buffer_types.get(dtype.name, self.type(dtype))
  def param_type(self, dtype: DType) -> str: return self.param_types.get(dtype.name, self.type(dtype))
  def math(self, op: Ops, dtype: DType) -> str:
    return _MATH[op] + (self.math_suffix if dtype is not dtypes.float64 else "")

  def const(self, value: object, dtype: DType) -> str:
    """A literal of `dtype` (bfloat16 and, without native halves, float16: their bits)."""
    if dtype.is_bool: return "1" if value else "0"
    if dtype.is_float:
      f = float(value)  # type: ignore[arg-type]
      if dtype is dtypes.bfloat16:
        from tgfn.uop.alu import float_to_bf16_bits
        return f"(({self.type(dtype)}){float_to_bf16_bits(f)})"
      if dtype is dtypes.float16 and not self.native_half:
        with np.errstate(over="ignore"): return f"(({self.type(dtype)}){int(np.float16(f).view(np.uint16))})"
      double = dtype is dtypes.float64
      if math.isnan(f): text = self.nan[double]
      elif math.isinf(f): text = ("-" if f < 0 else "") + self.inf[double]
      else: text = f.hex() + ("" if double else "f")
      # float16: converted from the double literal in one step; through a float literal it would round twice
      if dtype is dtypes.float16: return f"(({self.type(dtype)}){f.hex() if math.isfinite(f) else text})"
      return f"({text})"
    v = int(value)  # type: ignore[call-overload]
    if dtype.is_unsigned: return f"{v}{self.ulong_suffix}" if dtype.itemsize == 8 else f"{v}u"
    suffix = self.long_suffix if dtype.itemsize == 8 else ""
    if v == dtype.min: return f"({v + 1}{suffix}-1)"
    return f"{v}{suffix}"

  def used_helpers(self, body: str) -> str:
    """The helper functions `body` calls (and the ones they call), in prelude order, each guarded so that
    several kernels' sources concatenate into one program (a batched compile)."""
    chunks = re.split(r"\n(?=\S[^\n]*\btg_\w+\()", self.helpers.strip()) if self.helpers else []  # one per function
    needed, text = [], body
    for chunk in reversed(chunks):  # a helper only calls the ones defined before it
      name = re.search(r"(tg_\w+)\(", chunk)
      if name is not None and re.search(rf"\b{name.group(1)}\(", text):
        needed.append(chunk)
        text += chunk
    guarded = []
    for chunk in reversed(needed):
      guard = "TG_" + re.search(r"(tg_\w+)\(", chunk).group(1).upper()
      guarded.append(f"#ifndef {guard}\n#define {guard}\n{chunk}\n#endif\n")
    return "".join(guarded)


_MATH = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.COS: "cos", Ops.TRUNC: "trunc"}


# float16 and bfloat16 as uint16 bits, converted in integer arithmetic (round to nearest even) where a
# dialect has no half type everywhere (PoCL has no cl_khr_fp16). {p}: helper prefix, {f2u}/{u2f}: bit
# casts between float and uint, {d2f_rz}: double to float rounding toward zero
_HALF_HELPERS = """{p}float tg_h2f(unsigned short h) {{
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return {u2f}(sign | {f2u}((float)m * 0x1p-24f));
  return {u2f}(sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13)));
}}
{p}unsigned short tg_f2h(float f) {{
  unsigned int u = {f2u}(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (a >= 0x38800000u) {{ unsigned int r = a - 0x38000000u; r += 0xfffu + ((r >> 13) & 1u); return (unsigned short)(sign | (r >> 13)); }}
  if (a <= 0x33000000u) return (unsigned short)sign;
  unsigned int m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23), k = m >> shift;
  unsigned int rest = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
  return (unsigned short)(sign | (k + (rest > tie || (rest == tie && (k & 1u)))));
}}
{p}unsigned short tg_d2h(double d) {{
  float f = {d2f_rz}(d);
  if (f == f && (double)f != d) f = {u2f}({f2u}(f) | 1u);
  return tg_f2h(f);
}}
{p}float tg_bf2f(unsigned short b) {{ return {u2f}((unsigned int)b << 16); }}
{p}unsigned short tg_f2bf(float f) {{
  unsigned int u = {f2u}(f);
  if (f != f) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}}
"""
# tg_d2h: rounding to float toward zero, then setting the lowest bit where that was inexact (round to odd),
# keeps the final rounding to half correct: float has 13 more bits than half, so no double rounding

# guarded, so the sources of several kernels concatenate into one translation unit (batched compiles);
# the vector typedefs each kernel repeats are identical, which C11 allows. The C library functions kernels
# call are declared here, as C allows, instead of including <math.h> and <string.h>: reading those headers
# took ~9 ms of each compiler run (a cold first call compiles several units). Each name is in parentheses,
# so a kernel's source contains `sinf(` only where it calls sinf.
_C_PRELUDE = """#ifndef TG_PRELUDE
#define TG_PRELUDE
float (sqrtf)(float), (exp2f)(float), (log2f)(float), (sinf)(float), (cosf)(float), (truncf)(float);
double (sqrt)(double), (exp2)(double), (log2)(double), (sin)(double), (cos)(double), (trunc)(double);
void *(memcpy)(void *restrict, const void *restrict, __SIZE_TYPE__);
static inline float tg_bf2f(unsigned short b) { unsigned int u = (unsigned int)b << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short tg_f2bf(float f) {
  unsigned int u; memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
#endif
"""

C = Dialect(
  name="C",
  types={"bool": "_Bool", **{n: getattr(dtypes, n).cname for n in _INTS}, "float16": "_Float16",
         "bfloat16": "unsigned short", "float32": "float", "float64": "double"},
  # ctypes cannot pass a _Float16: it comes as a double and is rounded once inside, as a constant is
  param_types={"float16": "double"},
  kernel_prefix="void", helper_prefix="static inline ", vectors=True, prelude=_C_PRELUDE,
  # gcc 12's SLP vectorizer turns (double)(float)x of a short unrolled loop into a plain copy of x (no
  # rounding at all); an empty asm that may change the float in memory keeps the narrowing
  narrow_double='({{ float _n = (float)({x}); __asm__("" : "+m"(_n)); _n; }})',
  bitcast=lambda x, src, dst: (f"({{ {dst.cname} _b; {src.cname} _a = {x}; memcpy(&_b, &_a, sizeof _b); _b; }})"))


def _opencl_bitcast(x: str, src: DType, dst: DType) -> str:
  if src.is_bool or dst.is_bool: raise NotImplementedError(f"OpenCL bit cast {src.name} -> {dst.name}")
  return f"as_{OPENCL.type(dst)}({x})"


OPENCL = Dialect(
  name="OpenCL",
  types={"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long", "uint8": "uchar",
         "uint16": "ushort", "uint32": "uint", "uint64": "ulong", "float16": "ushort", "bfloat16": "ushort",
         "float32": "float", "float64": "double"},
  buffer_types={"bool": "uchar"}, param_types={"bool": "uchar"},  # bool is not allowed in either
  kernel_prefix="__kernel void", helper_prefix="static inline ", buffer_space="__global ",
  long_suffix="L", ulong_suffix="UL", nan=("NAN", "((double)NAN)"), inf=("INFINITY", "((double)INFINITY)"),
  math_suffix="", fma=("fma", "fma"), native_half=False, wrapping_ints=False, from_unsigned="as_{t}({x})",
  bitcast=_opencl_bitcast,
  global_ids=(("((long)get_global_id(0))", 2 ** 62, False), ("((long)get_global_id(1))", 2 ** 62, False),
              ("((long)get_global_id(2))", 2 ** 62, False)),
  local_ids=tuple((f"get_group_id({d})", f"get_local_id({d})") for d in range(3)),
  # FP_CONTRACT OFF: every op rounds as tgfn/uop/alu.py says (the float policy fuses only reductions, and
  # writes those fma calls itself)
  prelude="#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#pragma OPENCL FP_CONTRACT OFF\n",
  helpers=_HALF_HELPERS.format(p="static inline ", f2u="as_uint", u2f="as_float", d2f_rz="convert_float_rtz"))


_CUDA_BITS = {("float32", 4): "__float_as_int", ("float64", 8): "__double_as_longlong"}
_CUDA_FROM_BITS = {"float32": ("__int_as_float", "int"), "float64": ("__longlong_as_double", "long long")}


def _cuda_bitcast(x: str, src: DType, dst: DType) -> str:
  if src.is_bool or dst.is_bool: raise NotImplementedError(f"CUDA bit cast {src.name} -> {dst.name}")
  if src.name in ("float32", "float64"): x, src = f"{_CUDA_BITS[(src.name, src.itemsize)]}({x})", dtypes.int64
  if dst.name in ("float32", "float64"):
    fn, int_type = _CUDA_FROM_BITS[dst.name]
    return f"{fn}(({int_type})({x}))"
  return f"(({CUDA.type(dst)})({x}))"  # between ints (and half bits) of one size: a conversion that wraps


CUDA = Dialect(
  name="CUDA",
  types={"bool": "bool", **{n: getattr(dtypes, n).cname for n in _INTS}, "float16": "unsigned short",
         "bfloat16": "unsigned short", "float32": "float", "float64": "double"},
  kernel_prefix='extern "C" __global__ void', helper_prefix="static __device__ inline ", restrict=" __restrict__",
  nan=("__int_as_float(0x7fc00000)", "__longlong_as_double(0x7ff8000000000000LL)"),
  inf=("__int_as_float(0x7f800000)", "__longlong_as_double(0x7ff0000000000000LL)"),
  fma=("fmaf", "fma"), native_half=False, wrapping_ints=False, bitcast=_cuda_bitcast,
  # x: blocks of threads (the driver picks the block size, so the last block may overshoot); y, z: one
  # block per index, at most 65535
  global_ids=(("(blockIdx.x * (long long)blockDim.x + threadIdx.x)", 2 ** 31 - 1, True),
              ("((long long)blockIdx.y)", 65535, False), ("((long long)blockIdx.z)", 65535, False)),
  local_ids=tuple((f"blockIdx.{c}", f"threadIdx.{c}") for c in "xyz"),
  helpers=_HALF_HELPERS.format(p="static __device__ inline ", f2u="__float_as_uint", u2f="__uint_as_float",
                               d2f_rz="__double2float_rz"))
