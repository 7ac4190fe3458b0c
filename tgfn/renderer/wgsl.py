"""WGSL, the WebGPU shading language: scalar compute kernels whose innermost output axes are the invocation
ids of the launch grid (tgfn_drivers/webgpu.py runs them).

The semantics passes (tgfn/codegen/semantics.py) have already made every op defined, so this printer writes
plain operators, as the C family's does; what WGSL adds:
  - types: only 32-bit numbers and bool exist without extensions. float32, int32 and uint32 are native;
    bool, int8, uint8 (a byte each), int16, uint16, float16 and bfloat16 (two bytes) are packed in u32
    words in memory: a store sets its part of a word with two atomics (clear, then set), so neighbours
    written by other invocations survive. In registers the narrow ints are i32 (sign-extended) or u32
    (zero-extended), wrapped to their width after every + - * << and negation; the halves are their u32
    bits, converted by integer code (round to nearest even), and their math is float32 (promote_halves).
    float64, int64 and uint64 in memory or as parameters raise NotImplementedError naming them.
  - index arithmetic: tgfn computes indices in int64; here they are i32. A value that may not fit 32 bits
    where the difference shows (a division, a comparison, a max, a conversion) raises NotImplementedError,
    as does a kernel over 2**31 elements (`_check_index_ranges`).
  - literals are exact: floats are written as their bits, made opaque to the compiler (`^ tg_zero`, below), so
    NaN and infinity need no literal and no algebra is done on a known constant (x * 0.0 -> 0, x / c -> x * 1/c).
  - exact float arithmetic: the WebGPU compilers may rewrite float math algebraically (SwiftShader folds
    `(x + c) - c` to `x`, which breaks the rounding tricks codegen relies on). Every float32 result
    therefore passes through `bitcast<f32>(bitcast<u32>(r) ^ tg_zero)`, where tg_zero (a private variable)
    is `gid.x >> 31`: 0 at run time (grids are smaller than 2**31) but unknown to the compiler, so each op
    rounds once, where tgfn/uop/alu.py says. For the same reason NaN never reaches a float comparison or a
    float -> bool cast (SwiftShader assumes there is none: NaN cast to False): they test its bits first.
  - denormals: SwiftShader flushes denormal operands and results to zero. Elementwise + - * / sqrt call
    helpers (tgfn/renderer/wgsl_math.py) that take an exact slow path where a denormal may occur, and float
    comparisons compare bits. A reduction's accumulation is plain (its tolerance is absolute too).
  - transcendentals (exp2, log2, sin, cos) are wgsl_math's helpers: codegen's polynomials, with a 32-bit
    Payne-Hanek reduction for sin and cos (codegen's needs 64-bit integers) and denormals in integer bits.
  - scalar parameters arrive as the u32 words of one read-only storage buffer, bound after the buffers.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from tgfn.codegen.policy import strict_float
from tgfn.codegen.semantics import lower_alu
from tgfn.dtype import DType, dtypes
from tgfn.renderer.cstyle import CStyleRenderer, Ref
from tgfn.renderer import wgsl_math
from tgfn.renderer.dialects import Dialect
from tgfn.uop.ops import Ops, UOp

WORKGROUP_X = 64  # invocations per workgroup along the innermost axis; y and z: one workgroup per index
_I32_MIN, _I32_MAX = -2 ** 31, 2 ** 31 - 1
MEMORY_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "float16", "bfloat16", "int32", "uint32", "float32")
_PACKED = ("bool", "int8", "uint8", "int16", "uint16", "float16", "bfloat16")  # in parts of u32 words
_NARROW_INTS = ("int8", "uint8", "int16", "uint16")

WGSL = Dialect(
  name="WGSL",
  # int64 is the index dtype: i32 in registers, checked by the renderer
  types={"bool": "bool", "int8": "i32", "int16": "i32", "uint8": "u32", "uint16": "u32", "float16": "u32",
         "bfloat16": "u32", "int32": "i32", "uint32": "u32", "float32": "f32", "int64": "i32"},
  kernel_prefix="fn", helper_prefix="fn ",
  # x: workgroups of WORKGROUP_X invocations (the last may overshoot); y, z: one workgroup per index
  global_ids=(("i32(gid.x)", 65535 * WORKGROUP_X, True), ("i32(gid.y)", 65535, False), ("i32(gid.z)", 65535, False)))

_OPERATOR = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.IDIV: "/", Ops.MOD: "%", Ops.CMPLT: "<",
             Ops.CMPNE: "!=", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}
_BOOL_OPERATOR = {Ops.ADD: "|", Ops.MUL: "&", Ops.MAX: "|", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "!=", Ops.CMPNE: "!="}
# ops whose result on an int64 value computed in 32 bits differs from the 64-bit one once the value does not
# fit; + - * << & | ^ keep the low 32 bits right and need no check
_OBSERVING = {Ops.IDIV, Ops.MOD, Ops.SHR, Ops.CMPLT, Ops.CMPNE, Ops.MAX, Ops.CAST}
_MATH = {Ops.TRUNC: "trunc"}  # sqrt, exp2, log2, sin, cos: helpers (_EXACT, wgsl_math.CALLS)
_HELPERS = {"tg_isnan": "fn tg_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n",
            # comparisons in bits: SwiftShader's float compares flush denormals to zero (1e-40 == 0.0 was true)
            "tg_ne": "fn tg_ne(a: f32, b: f32) -> bool { return tg_isnan(a) || tg_isnan(b) || tg_order(a) != tg_order(b); }\n",
            "tg_lt": "fn tg_lt(a: f32, b: f32) -> bool { return !tg_isnan(a) && !tg_isnan(b) && tg_order(a) < tg_order(b); }\n",
            # a non-NaN float's order as an i32: its magnitude's bits, negated for negative values (-0.0 is 0)
            "tg_order": "fn tg_order(x: f32) -> i32 {\n  let u = bitcast<u32>(x); let m = bitcast<i32>(u & 0x7fffffffu);\n"
                        "  return select(m, -m, (u >> 31u) != 0u);\n}\n",
            # float16 and bfloat16 bits <-> float32, in integer code (round to nearest even; f32(m) * 2^-24 is exact)
            "tg_h2f": """fn tg_h2f(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u; let e = (h >> 10u) & 0x1fu; let m = h & 0x3ffu;
  if (e == 0u) { return bitcast<f32>(sign | bitcast<u32>(f32(m) * bitcast<f32>(0x33800000u))); }
  if (e == 31u) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}
""",
            "tg_f2h": """fn tg_f2h(f: f32) -> u32 {
  let u = bitcast<u32>(f); let sign = (u >> 16u) & 0x8000u; let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) { return sign | 0x7e00u; }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a >= 0x38800000u) { let r = a - 0x38000000u; return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u); }
  if (a <= 0x33000000u) { return sign; }
  let m = (a & 0x7fffffu) | 0x800000u; let shift = 126u - (a >> 23u); let k = m >> shift;
  let rest = m & ((1u << shift) - 1u); let tie = 1u << (shift - 1u);
  return sign | (k + select(0u, 1u, rest > tie || (rest == tie && (k & 1u) != 0u)));
}
""",
            "tg_bf2f": "fn tg_bf2f(b: u32) -> f32 { return bitcast<f32>(b << 16u); }\n",
            "tg_f2bf": """fn tg_f2bf(f: f32) -> u32 {
  let u = bitcast<u32>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return 0x7fc0u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
""", **wgsl_math.HELPERS}
# the helpers each helper calls
_NEEDS = {"tg_ne": ("tg_isnan", "tg_order"), "tg_lt": ("tg_isnan", "tg_order"), **wgsl_math.NEEDS}


def unsupported(what: str, dtype: DType) -> NotImplementedError:
  return NotImplementedError(f"WGSL (DEV=WEBGPU) has no {dtype.name} {what}: it supports "
                             f"{', '.join(MEMORY_DTYPES)} in memory (docs/backends.md, WebGPU)")


def _bounds(program: list[UOp]) -> dict[UOp, tuple[int, int]]:
  """An interval for every int64 value (the index dtype), from ranges, constants and the dtypes cast from;
  unknown values get the whole int64 range."""
  whole = (-2 ** 63, 2 ** 63 - 1)
  out: dict[UOp, tuple[int, int]] = {}
  for u in program:
    if u.dtype is not dtypes.int64: continue
    src = [out.get(s, whole) for s in u.src]
    if u.op is Ops.CONST: out[u] = (int(u.arg), int(u.arg))
    elif u.op is Ops.RANGE: out[u] = (0, max(0, out.get(u.src[0], whole)[1] - 1))
    elif u.op is Ops.CAST:
      s = u.src[0].dtype
      out[u] = (s.min, s.max) if s.is_int or s.is_bool else whole
    elif u.op in (Ops.ADD, Ops.SUB, Ops.MUL):
      (a, b), (c, d) = src
      if u.op is Ops.SUB: c, d = -d, -c
      corners = [a + c, b + d] if u.op is not Ops.MUL else [a * c, a * d, b * c, b * d]
      out[u] = (min(corners), max(corners))
    elif u.op is Ops.NEG: out[u] = (-src[0][1], -src[0][0])
    elif u.op is Ops.MAX: out[u] = (max(src[0][0], src[1][0]), max(src[0][1], src[1][1]))
    elif u.op is Ops.WHERE: out[u] = (min(src[1][0], src[2][0]), max(src[1][1], src[2][1]))
    elif u.op is Ops.IDIV and src[1][0] > 0: out[u] = (min(src[0][0], 0), max(src[0][1], 0))
    elif u.op is Ops.MOD and src[1][0] > 0: out[u] = (min(src[0][0], 0, -src[1][1]), max(src[0][1], 0, src[1][1]))
    elif u.op is Ops.AND and src[1][0] >= 0: out[u] = (0, src[1][1])
    else: out[u] = whole
  return out


def _check_index_ranges(program: list[UOp]) -> None:
  """Raise where int64 arithmetic computed in 32 bits could give another answer than the reference's."""
  bounds = _bounds(program)
  fits = lambda u: u.dtype is not dtypes.int64 or _I32_MIN <= bounds[u][0] and bounds[u][1] <= _I32_MAX  # noqa: E731
  for u in program:
    if u.op is Ops.CONST and not fits(u) or u.op is Ops.RANGE and not fits(u.src[0]) and u.src[0].op is not Ops.CONST:
      raise NotImplementedError(f"WGSL (DEV=WEBGPU) computes indices in 32 bits; this kernel has an index of "
                                f"{bounds[u.src[0] if u.op is Ops.RANGE else u]} (over 2**31 elements)")
    if u.op is Ops.RANGE and u.src[0].op is Ops.CONST and u.src[0].arg > _I32_MAX:
      raise NotImplementedError(f"WGSL (DEV=WEBGPU) computes indices in 32 bits; this kernel loops {u.src[0].arg} times")
    if u.op in _OBSERVING and not all(fits(s) for s in u.src):
      raise NotImplementedError(f"WGSL (DEV=WEBGPU) has no 64-bit integers: an int64 {u.op.name} on values that may "
                                "not fit 32 bits (only index arithmetic that fits is computed in i32)")


class WGSLRenderer(CStyleRenderer):
  """WGSL compute shaders: one entry point per kernel, buffers as storage bindings of group 0."""
  dialect = WGSL
  supports_opts = False
  has_64bit = False
  has_transcendentals = True  # wgsl_math's helpers: codegen's need 64-bit integers (sin, cos) and denormals

  def type(self, dtype: DType) -> str:
    if dtype.count > 1: raise NotImplementedError("WGSL kernels are scalar (no opts)")
    if dtype.name not in WGSL.types: raise unsupported("values", dtype)
    return WGSL.types[dtype.name]

  def const(self, value: object, dtype: DType) -> str:
    if dtype.is_bool: return "true" if value else "false"
    # float constants are their bits, opaque to the compiler (^ tg_zero): SwiftShader folds x * 0.0 to 0 (wrong
    # for inf and NaN) and x / c to x * (1 / c) (not correctly rounded), and cannot do either to an unknown value
    if dtype is dtypes.bfloat16:
      from tgfn.uop.alu import float_to_bf16_bits
      return f"({float_to_bf16_bits(float(value))}u ^ tg_zero)"  # type: ignore[arg-type]
    if dtype is dtypes.float16:
      with np.errstate(over="ignore"): return f"({int(np.float16(value).view(np.uint16))}u ^ tg_zero)"
    if dtype.is_float:
      if dtype is not dtypes.float32: raise unsupported("values", dtype)
      with np.errstate(over="ignore"): f = np.float32(value)
      return f"bitcast<f32>({int(f.view(np.uint32))}u ^ tg_zero)"
    v = int(value)  # type: ignore[call-overload]
    if dtype.is_unsigned and dtype.itemsize <= 4: return f"{v}u"
    if dtype.is_unsigned or dtype.itemsize > 4 and dtype is not dtypes.int64: raise unsupported("values", dtype)
    if not _I32_MIN <= v <= _I32_MAX: raise NotImplementedError(f"WGSL (DEV=WEBGPU) has no 64-bit integers: constant {v}")
    return "(-2147483647i - 1i)" if v == _I32_MIN else f"{v}i"

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = ()) -> str:
    for dt in buffer_dtypes:
      if dt.name not in MEMORY_DTYPES: raise unsupported("buffers", dt)
    for dt in param_dtypes:
      if dt.name not in MEMORY_DTYPES: raise unsupported("parameters", dt)
    _check_index_ranges(program)
    names: dict[UOp, str] = {}
    lines: list[str] = []
    indent, counter = 1, 0
    ids = self.global_ids(program)
    written = {u.src[0].arg for u in program if u.op is Ops.STORE}

    def ref(u: UOp) -> str: return self.const(u.arg, u.dtype) if u.op is Ops.CONST else names[u]
    def emit(text: str) -> None: lines.append("  " * indent + text)

    def fresh(prefix: str) -> str:
      nonlocal counter
      counter += 1
      return f"{prefix}{counter - 1}"

    def declare(u: UOp, expr: str, prefix: str) -> None:
      names[u] = fresh(prefix)
      emit(f"let {names[u]}: {self.type(u.dtype)} = {expr};")

    for u in program:
      op = u.op
      if op is Ops.CONST: continue
      if op is Ops.DEFINE_GLOBAL: names[u] = f"data{u.arg}"
      elif op is Ops.DEFINE_VAR: declare(u, self._param(u.arg, u.dtype), "var")
      elif op is Ops.RANGE:
        names[u] = fresh("ridx")
        if u in ids:
          emit(f"let {names[u]}: i32 = {WGSL.global_ids[ids[u]][0]};")
          if ids[u] == 0: emit(f"if ({names[u]} >= {u.size}) {{ return; }}")
          continue
        emit(f"for (var {names[u]}: i32 = 0; {names[u]} < {ref(u.src[0])}; {names[u]}++) {{")
        indent += 1
      elif op is Ops.ENDRANGE:
        if u.src[0] in ids: continue
        indent -= 1
        emit("}")
      elif op is Ops.DEFINE_ACC:
        names[u] = fresh("acc")
        emit(f"var {names[u]}: {self.type(u.dtype)} = {ref(u.src[0])};")
      elif op is Ops.ASSIGN: emit(f"{names[u.src[0]]} = {self.render_accumulate(u, ref)};")
      elif op is Ops.LOAD:
        load = self._load(u.src[0], ref(u.src[1]), u.dtype, u.src[0].arg in written)
        if len(u.src) == 2: declare(u, load, "val")
        else:  # a gated load reads nothing where the gate is off (the index may be out of bounds there)
          names[u] = fresh("val")
          emit(f"var {names[u]}: {self.type(u.dtype)} = {self.const(0, u.dtype)};")
          emit(f"if ({ref(u.src[2])}) {{ {names[u]} = {load}; }}")
      elif op is Ops.STORE: emit(self._store(u.src[0], ref(u.src[1]), ref(u.src[2]), u.src[2].dtype))
      else: declare(u, self.render_alu(u, ref), "alu")
    if 0 not in ids.values(): lines.insert(0, "  if (gid.x != 0u) { return; }")  # one invocation does the loops
    lines.insert(0, "  tg_zero = gid.x >> 31u;  // 0, unknown to the compiler")
    sizes = [1, 1, 1]
    for rng, dim in ids.items(): sizes[dim] = rng.size
    bindings = [self._binding(i, dt, i in written) for i, dt in enumerate(buffer_dtypes)]
    if param_dtypes: bindings.append(f"@group(0) @binding({len(buffer_dtypes)}) var<storage, read> params: array<u32>;\n")
    body = "\n".join(lines)
    used = {fn for fn in _HELPERS if f"{fn}(" in body}
    used |= {need for fn in list(used) for need in _NEEDS.get(fn, ())}
    helpers = "var<private> tg_zero: u32;\n" + "".join(text for fn, text in _HELPERS.items() if fn in used)
    return (f"// tgfn launch: global={','.join(map(str, sizes))}\n{''.join(bindings)}{helpers}"
            f"@compute @workgroup_size({WORKGROUP_X})\nfn {name}(@builtin(global_invocation_id) gid: vec3<u32>) {{\n{body}\n}}\n")

  @staticmethod
  def _binding(i: int, dtype: DType, written: bool) -> str:
    access = "read_write" if written else "read"
    if dtype.name in _PACKED: element = "atomic<u32>" if written else "u32"  # packed in words
    else: element = WGSL.types[dtype.name]
    return f"@group(0) @binding({i}) var<storage, {access}> data{i}: array<{element}>;\n"

  def _param(self, index: int, dtype: DType) -> str:
    word = f"params[{index}]"
    if dtype.is_bool: return f"({word} != 0u)"
    return word if self.type(dtype) == "u32" else f"bitcast<{self.type(dtype)}>({word})"  # narrow values arrive in range

  @staticmethod
  def _part(idx: str, dtype: DType) -> tuple[str, str, str]:
    """The word of element `idx` of a packed buffer, the shift of its bits in it, and their mask."""
    per_word = 4 // dtype.itemsize
    return (f"({idx}) >> {per_word.bit_length() - 1}u", f"(u32(({idx}) & {per_word - 1}i) * {8 * dtype.itemsize}u)",
            f"{(1 << 8 * dtype.itemsize) - 1}u")

  def _load(self, buf: UOp, idx: str, dtype: DType, written: bool) -> str:
    if dtype.name not in _PACKED: return f"{buf_name(buf)}[{idx}]"
    word, shift, mask = self._part(idx, dtype)
    word = f"atomicLoad(&{buf_name(buf)}[{word}])" if written else f"{buf_name(buf)}[{word}]"  # atomic words
    bits = f"(({word} >> {shift}) & {mask})"
    if dtype.is_bool: return f"({bits} != 0u)"
    if dtype.name in ("int8", "int16"): return _wrap(f"bitcast<i32>({bits})", dtype)  # sign-extended
    return bits

  def _store(self, buf: UOp, idx: str, value: str, dtype: DType) -> str:
    if dtype.name not in _PACKED: return f"{buf_name(buf)}[{idx}] = {value};"
    # this invocation's part of a shared word: cleared, then set, each atomically
    word, shift, mask = self._part(idx, dtype)
    bits = f"select(0u, 1u, {value})" if dtype.is_bool else f"(u32({value}) & {mask})"
    word = f"&{buf_name(buf)}[{word}]"
    return f"atomicAnd({word}, ~({mask} << {shift})); atomicOr({word}, {bits} << {shift});"

  def render_accumulate(self, u: UOp, ref: Ref) -> str:
    acc, value = u.src
    dtype = acc.dtype
    if u.arg is Ops.MAX and dtype.is_float:
      return self.render_inline(lower_alu(UOp(Ops.MAX, acc.dtype, (acc, value))), (acc, value), ref)
    if u.arg is Ops.ADD and value.op is Ops.MUL and dtype.is_float and not strict_float():
      return f"fma({ref(value.src[0])}, {ref(value.src[1])}, {ref(acc)})"
    out = self.binary(u.arg, ref(acc), ref(value), dtype)
    if dtype.name in _NARROW_INTS and u.arg in _WRAPPING: return _wrap(out, dtype)
    return _opaque(out) if dtype is dtypes.float32 and u.arg in _ROUNDING else out

  def render_alu(self, u: UOp, ref: Ref) -> str:
    if u.dtype.count > 1 or u.op in (Ops.VECTORIZE, Ops.GEP): raise NotImplementedError("WGSL kernels are scalar (no opts)")
    op, srcs = u.op, u.src
    if op is Ops.CAST: return self.cast(ref(srcs[0]), srcs[0].dtype, u.dtype)
    if op is Ops.BITCAST: return self.bitcast(ref(srcs[0]), srcs[0].dtype, u.dtype)
    if op is Ops.WHERE: return f"select({ref(srcs[2])}, {ref(srcs[1])}, {ref(srcs[0])})"
    if op in (Ops.CMPNE, Ops.CMPLT) and srcs[0].dtype.is_float:  # NaN tests in bits: see the module's docstring
      if op is Ops.CMPNE and srcs[0] is srcs[1]: return f"tg_isnan({ref(srcs[0])})"
      return f"{'tg_ne' if op is Ops.CMPNE else 'tg_lt'}({ref(srcs[0])}, {ref(srcs[1])})"
    if u.dtype is dtypes.float32 and op in _EXACT:  # denormals kept (SwiftShader flushes them): wgsl_math
      return _EXACT[op].format(*(ref(s) for s in srcs), one=self.const(1.0, dtypes.float32))
    if len(srcs) == 1: out = self.unary(op, ref(srcs[0]), u.dtype)
    else: out = self.binary(op, ref(srcs[0]), ref(srcs[1]), srcs[0].dtype)
    if u.dtype.name in _NARROW_INTS and op in _WRAPPING: return _wrap(out, u.dtype)
    return out  # (float32's rounding ops went to _EXACT's helpers, each rounding once)

  def bitcast(self, x: str, src: DType, dst: DType) -> str:
    for dt in (src, dst):
      if dt.name not in MEMORY_DTYPES or dt.is_bool: raise unsupported("bit casts", dt)
    if src.itemsize == 4: return f"bitcast<{self.type(dst)}>({x})"
    bits = f"(u32({x}) & {(1 << 8 * src.itemsize) - 1}u)"  # 8 and 16 bits: the value's low bits
    return _wrap(f"bitcast<i32>({bits})", dst) if dst.name in ("int8", "int16") else bits

  def binary(self, op: Ops, a: str, b: str, dtype: DType) -> str:
    if dtype.is_bool:
      if op is Ops.CMPLT: return f"(!{a} && {b})"
      if op in _BOOL_OPERATOR: return f"({a} {_BOOL_OPERATOR[op]} {b})"
    if op is Ops.MAX:
      if dtype.is_float: raise NotImplementedError("a float MAX reached the printer: lower_semantics gives it its NaN rule")
      return f"max({a}, {b})"
    if op in (Ops.SHL, Ops.SHR): return f"({a} {_OPERATOR[op]} u32({b}))"  # WGSL shift amounts are u32
    if op in _OPERATOR: return f"({a} {_OPERATOR[op]} {b})"  # i32 + - * wrap in WGSL
    raise NotImplementedError(f"WGSL rendering of {op}")

  def unary(self, op: Ops, x: str, dtype: DType) -> str:
    if op is Ops.NEG:
      if dtype.is_bool: return f"(!{x})"
      if dtype is dtypes.float32: return f"tg_neg({x})"  # the sign bit flipped: SwiftShader's -x flushes denormals
      return f"(0u - {x})" if self.type(dtype) == "u32" else f"(-{x})"  # WGSL has no unary minus on u32
    if op in _MATH: return f"{_MATH[op]}({x})"
    if op.name in wgsl_math.CALLS: return wgsl_math.CALLS[op.name].format(x)  # float32: halves were widened
    raise NotImplementedError(f"WGSL rendering of {op}")

  def cast(self, x: str, src: DType, dst: DType) -> str:
    for dt in (src, dst):
      if dt.name not in WGSL.types: raise unsupported("values", dt)
    # halves are bits: widen to float32 first (exact), narrow from float32 last (one rounding)
    if src is dtypes.float16: x, src = f"tg_h2f({x})", dtypes.float32
    elif src is dtypes.bfloat16: x, src = f"tg_bf2f({x})", dtypes.float32
    if dst in (dtypes.float16, dtypes.bfloat16):
      # int -> float32 is exact below 2**24, and every int beyond that is past float16's range anyway
      wide = x if src is dtypes.float32 else self.cast(x, src, dtypes.float32)
      return f"{'tg_f2h' if dst is dtypes.float16 else 'tg_f2bf'}({wide})"
    if dst.name in _NARROW_INTS and not src.is_bool:  # ints wrap to the width; floats arrive in range
      return _wrap(f"{self.type(dst)}({x})", dst)
    if dst.is_bool and src.is_float: return f"((bitcast<u32>({x}) & 0x7fffffffu) != 0u)"  # NaN is True, -0.0 False
    if dst.is_bool: return f"({x} != {self.const(0, src)})" if not src.is_bool else x
    if src.is_bool: return f"select({self.const(0, dst)}, {self.const(1, dst)}, {x})"
    if src is dtypes.uint32 and dst is dtypes.float32:  # two exact halves, one rounding (SwiftShader's f32(u32) is off)
      return _opaque(f"(f32({x} >> 16u) * 65536.0f + f32({x} & 0xffffu))")
    return f"{self.type(dst)}({x})"  # i32 <-> u32 keep the bits; float -> int is in range (lower_semantics)


_ROUNDING = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP}  # a float32 accumulation's, made opaque
_EXACT = {Ops.ADD: "tg_add({0}, {1})", Ops.SUB: "tg_add({0}, tg_neg({1}))", Ops.MUL: "tg_mul({0}, {1})",
          Ops.FDIV: "tg_div({0}, {1})", Ops.RECIP: "tg_div({one}, {0})", Ops.SQRT: "tg_sqrt({0})"}
_WRAPPING = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL, Ops.NEG}  # may leave a narrow int's range


def _wrap(x: str, dtype: DType) -> str:
  """An i32/u32 value reduced to the range of a narrow int: sign-extended from its width, or masked."""
  bits = 8 * dtype.itemsize
  if dtype.is_unsigned: return f"(u32({x}) & {(1 << bits) - 1}u)"
  return f"(({x} << {32 - bits}u) >> {32 - bits}u)"


def _opaque(f32: str) -> str:
  """A float32 result the shader compiler cannot combine with the ops around it (it rounds once, here)."""
  return f"bitcast<f32>(bitcast<u32>({f32}) ^ tg_zero)"


def buf_name(buf: UOp) -> str: return f"data{buf.arg}"


def parse_launch(src: str) -> tuple[str, tuple[int, int, int]]:
  """The entry point's name and its grid (innermost axis first) from a kernel's source."""
  m = re.search(r"// tgfn launch: global=(\d+),(\d+),(\d+)\n.*?\bfn (\w+)\(@builtin", src, re.DOTALL)
  if m is None: raise ValueError("WGSL kernel source without a '// tgfn launch:' line and an entry point")
  return m.group(4), (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def workgroups(grid: tuple[int, int, int]) -> tuple[int, int, int]:
  """How many workgroups a dispatch of `grid` needs."""
  return (-(-grid[0] // WORKGROUP_X), grid[1], grid[2])

