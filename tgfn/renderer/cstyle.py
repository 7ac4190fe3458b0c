"""One printer for the C family: C for the CPU, OpenCL C and CUDA C, which differ only in the tables of
tgfn/renderer/dialects.py. Every value gets a typed `const` local, so integer results wrap at their dtype's
width exactly where the reference semantics (tgfn/uop/alu.py) say they do. Constants, buffers and loop
counters are spelled inline.

The printer holds no semantics of its own: `lower_semantics` (tgfn/codegen/semantics.py) has already
made every op defined on the values that reach it (no division by zero, no shift past the width, no
out-of-range float -> int cast, NaN-propagating max as a select), so an op is its plain operator.

Loops: on the CPU every axis is a loop, and a THREAD axis runs in chunks on the worker pool. On a device
with kernel ids (OpenCL, CUDA) the innermost output axes (up to three) are the ids of the launch grid,
whose sizes the source states on its first line (`launch_sizes` reads them back); a LOCAL axis (an opt,
tgfn/codegen/opts.py) is group id * group size + local id, and the line then states the work-group size
too (`local_sizes`)."""
from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

from tgfn.codegen.policy import strict_float
from tgfn.codegen.semantics import lower_alu
from tgfn.dtype import DType, dtype_from_name, dtypes
from tgfn.renderer import Renderer
from tgfn.renderer.ctranspose import block_columns, shuffler, transpose
from tgfn.renderer.cvector import VectorALU
from tgfn.renderer.dialects import C, CUDA, OPENCL, Dialect
from tgfn.uop.ops import AxisType, Ops, UOp

# A parallel loop's entry point calls tg_parallel_for: a pointer of this library, a serial loop until the CPU
# driver hands it the worker pool's (tgfn_drivers/_cpu_threads.py, when_pool_ready) through tg_use_pool. Static:
# a library's own pointer, never bound to the pool's exported function of the same name.
THREAD_PRELUDE = """#ifndef TG_THREAD_PRELUDE
#define TG_THREAD_PRELUDE
typedef void (*tg_body)(void *, long long, long long);
static void tg_serial_for(tg_body body, void *ctx, long long n, long long grain) { (void)grain; body(ctx, 0, n); }
static void (*tg_parallel_for)(tg_body, void *, long long, long long) = tg_serial_for;
void tg_use_pool(void (*pool_for)(tg_body, void *, long long, long long)) { tg_parallel_for = pool_for; }
#endif
"""

Ref = Callable[[UOp], str]


_VECTOR_NAME = re.compile(r"\btg_([a-z]+[0-9]*x[0-9]+)(?![0-9])")
_NATIVE_VECTOR = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*"}
_OPERATOR = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.FDIV: "/", Ops.IDIV: "/", Ops.MOD: "%", Ops.CMPLT: "<",
             Ops.CMPNE: "!=", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}
_BOOL_OPERATOR = {Ops.ADD: "|", Ops.MUL: "&", Ops.MAX: "|"}  # as alu.py defines them on bool
_LAUNCH = re.compile(r"// tgfn launch: global=(\d+),(\d+),(\d+)(?: local=(\d+),(\d+),(\d+))?\n.*?\bvoid (\w+)\(",
                     re.DOTALL)


def _launch_lines(src: str) -> list[re.Match]:
  found = list(_LAUNCH.finditer(src))
  if not found: raise ValueError("kernel source without a '// tgfn launch:' line")
  return found


def launch_sizes(src: str) -> dict[str, tuple[int, int, int]]:
  """Kernel name -> the grid it is launched on (work items), innermost axis first, for each kernel of `src`
  (several kernels' sources concatenate into one program): each kernel's first line says."""
  return {m.group(7): (int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in _launch_lines(src)}


def local_sizes(src: str) -> dict[str, tuple[int, int, int]]:
  """Kernel name -> its work-group (block) size, for the kernels of `src` whose launch line states one (a
  LOCAL axis); the grid's sizes are then whole multiples of it. The driver chooses for the others."""
  return {m.group(7): (int(m.group(4)), int(m.group(5)), int(m.group(6))) for m in _launch_lines(src) if m.group(4)}


def function_name(op: Ops, dtype: DType) -> str: return f"tg_{op.name.lower()}_{dtype.name}"


def function_call(fn: str, dtype: DType, arg: str) -> str:
  """A C expression: the function `fn` (out, in pointers to dtype's lanes) applied to the named value `arg`."""
  scalar = dtype.scalar().cname
  return f"({{ {dtype.cname if dtype.count > 1 else scalar} _o; {fn}(({scalar}*)&_o, (const {scalar}*)&{arg}); _o; }})"


def _lanewise(u: UOp, scalar: Callable[[Ref], str], ref: Ref) -> str:
  """A vector op the C vector extensions cannot express exactly, computed lane by lane (gcc turns the
  short loop back into vector instructions where the target has them)."""
  lane_ref = lambda s: f"{ref(s)}[_l]" if s.dtype is not None and s.dtype.count > 1 else ref(s)  # noqa: E731
  return (f"({{ {u.dtype.cname} _r; for (int _l = 0; _l < {u.dtype.count}; _l++) _r[_l] = {scalar(lane_ref)}; _r; }})")


def _fused_multiply_add(assign: UOp) -> bool:
  """An accumulation `acc += a * b` rendered as one fused multiply-add (one rounding instead of two), as the
  float policy allows a reduction (tgfn/codegen/policy.py)."""
  acc, value = assign.src
  return assign.arg is Ops.ADD and value.op is Ops.MUL and acc.dtype.scalar().is_float and not strict_float()


def _fused_products(program: list[UOp]) -> set[UOp]:
  """The products whose every use is a fused multiply-add, which reads their operands instead: not written
  out (dead statements the C compiler would parse and remove: in a register-tiled matmul, half of the inner
  loop's)."""
  uses: dict[UOp, int] = {}
  for u in program:
    for s in u.src: uses[s] = uses.get(s, 0) + 1
  fused: dict[UOp, int] = {}
  for u in program:
    if u.op is Ops.ASSIGN and _fused_multiply_add(u): fused[u.src[1]] = fused.get(u.src[1], 0) + 1
  return {m for m, n in fused.items() if uses[m] == n}


class CStyleRenderer(Renderer):
  """The printer; `dialect` says which member of the C family it writes (C with GCC vector extensions by
  default: the CPU driver's)."""
  dialect: Dialect = C
  supports_opts = True
  # vector dtype name -> a fused multiply-add of whole vectors, "{0}*{1}+{2}" (else a lane loop of fma)
  vector_fma: dict[str, str] = {}
  # vector dtype name -> the square root of a whole vector, "{0}" (else a lane loop of sqrt)
  vector_sqrt: dict[str, str] = {}
  # whose two-vector shuffle builtin to write square block transposes with ("gcc", "clang"; else lane by lane)
  shuffle: Optional[str] = None
  # float32/float64 ops rendered as calls to a function of the whole vector, whose definition
  # (`function_definition`) the source carries once under an include guard (tgfn/codegen/math_functions.py)
  function_ops: frozenset[Ops] = frozenset()

  def function_definition(self, op: Ops, dtype: DType) -> str:
    raise NotImplementedError(f"{type(self).__name__} has no function for {op.name} on {dtype.name}")

  def type(self, dtype: DType) -> str: return dtype.cname if dtype.count > 1 else self.dialect.type(dtype)
  def const(self, value: object, dtype: DType) -> str: return self.dialect.const(value, dtype)

  def global_ids(self, program: list[UOp]) -> dict[UOp, int]:
    """The output axes that become kernel ids, with their dimension: the innermost ones, as many as the
    dialect has ids whose range covers them (the others stay loops around the body)."""
    if not self.dialect.global_ids: return {}
    closing = set()
    for u in reversed(program):  # the output loops close last
      if u.op is not Ops.ENDRANGE: break
      closing.add(u.src[0])
    # in the order they open; work hoisted out of the loops inside them (linearize.py), a loop-invariant
    # reduction included, may come between them: each work item runs it in program order
    outer = [u for u in program if u.op is Ops.RANGE and u.kind in (AxisType.GLOBAL, AxisType.LOCAL) and u in closing]
    ids: dict[UOp, int] = {}
    for dim, rng in enumerate(reversed(outer[-len(self.dialect.global_ids):])):
      if rng.size > self.dialect.global_ids[dim][1]: break
      ids[rng] = dim
    return ids

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = (),
             linkage: str = "") -> str:
    """The kernel's source; `linkage` goes before its declaration (a function of the source's own, static)."""
    d = self.dialect
    names: dict[UOp, str] = {}
    lines: list[str] = []
    indent = 1
    counter = 0
    vectors: dict[str, DType] = {}
    thread_range: Optional[UOp] = None
    ids = self.global_ids(program)
    index_type = self.type(dtypes.index)
    unused = _fused_products(program)
    blocks = block_columns(program) if self.shuffle is not None else {}
    functions: dict[str, str] = {}  # name -> definition, of the functions the kernel calls

    def ref(u: UOp) -> str:
      if u.op is Ops.CONST: return self.const(u.arg, u.dtype)
      return names[u]

    def fresh(prefix: str) -> str:
      nonlocal counter
      counter += 1
      return f"{prefix}{counter - 1}"

    def declare(u: UOp, expr: str, prefix: str = "v") -> None: names[u] = named(u.dtype, expr, prefix)

    def named(dtype: DType, expr: str, prefix: str = "alu") -> str:
      name = fresh(prefix)
      if dtype.count > 1: vectors[dtype.name] = dtype
      lines.append("  " * indent + f"const {self.type(dtype)} {name} = {expr};")
      return name

    def transpose_block(rows: tuple[UOp, ...], dtype: DType) -> None:
      """Name every column of the block of `rows` (tgfn/renderer/ctranspose.py)."""
      shuffle = shuffler(self.shuffle, dtype.itemsize)  # type: ignore[arg-type]
      columns = transpose([ref(r) for r in rows], shuffle, lambda expr: named(dtype, expr))
      for column, (of, i) in blocks.items():
        if of is rows: names[column] = columns[i]

    for u in program:
      op = u.op
      if op is Ops.CONST or u in unused: continue
      if op is Ops.DEFINE_GLOBAL: names[u] = f"data{u.arg}"
      elif op is Ops.DEFINE_VAR:
        # a parameter passed in another type (C's float16 as a double) becomes a value of its own type once
        if d.param_type(u.dtype) != d.type(u.dtype): declare(u, f"(({d.type(u.dtype)})var{u.arg})")
        else: names[u] = f"var{u.arg}"
      elif op is Ops.RANGE:
        names[u] = fresh("ridx")
        if u.kind is AxisType.LOCAL and u not in ids:
          raise NotImplementedError(f"{d.name}: a LOCAL axis (work groups of {u.arg[2]}) of size {u.size} that is not a kernel id")
        if u in ids:
          expr, _, overshoots = d.global_ids[ids[u]]
          if u.kind is AxisType.LOCAL:  # whole groups are launched: the last one overshoots unless they divide
            group, local = d.local_ids[ids[u]]
            expr, overshoots = f"(({index_type}){group} * {u.arg[2]} + {local})", u.size % u.arg[2] != 0
          lines.append("  " * indent + f"const {index_type} {names[u]} = {expr};")
          if overshoots: lines.append("  " * indent + f"if ({names[u]} >= {u.size}) return;")
          continue
        if u.kind is AxisType.THREAD:
          thread_range = u
          lines.append("  " * indent + f"for ({index_type} {names[u]} = lo; {names[u]} < hi; {names[u]}++) {{")
        else:
          lines.append("  " * indent + f"for ({index_type} {names[u]} = 0; {names[u]} < {ref(u.src[0])}; {names[u]}++) {{")
        indent += 1
      elif op is Ops.ENDRANGE:
        if u.src[0] in ids: continue
        indent -= 1
        lines.append("  " * indent + "}")
      elif op is Ops.DEFINE_ACC:
        names[u] = fresh("acc")
        if u.dtype.count > 1: vectors[u.dtype.name] = u.dtype
        lines.append("  " * indent + f"{self.type(u.dtype)} {names[u]} = {ref(u.src[0])};")
      elif op is Ops.ASSIGN: lines.append("  " * indent + f"{names[u.src[0]]} = {self.render_accumulate(u, ref)};")
      elif op is Ops.LOAD: declare(u, self.render_load(u, ref), "val")
      # a lane of a named value is written where it is used: a gather built from row loads (transposed_loads)
      # picks 64 lanes, and a statement for each would be most of its C. Not an accumulator's: it changes
      elif op is Ops.GEP and u.src[0].op is not Ops.DEFINE_ACC: names[u] = self.render_alu(u, ref)
      elif u in blocks:
        if u not in names: transpose_block(blocks[u][0], u.dtype)
      elif op is Ops.STORE:
        buf, idx, value = u.src
        if value.dtype.count > 1: lines.append("  " * indent + f"*({value.dtype.cname}_u*)({ref(buf)} + {ref(idx)}) = {ref(value)};")
        else: lines.append("  " * indent + f"{ref(buf)}[{ref(idx)}] = {ref(value)};")
      elif op in self.function_ops and u.dtype.scalar() in (dtypes.float32, dtypes.float64):
        arg = u.src[0]
        # the function reads its argument through a pointer: a literal gets a name first
        operand = named(arg.dtype, ref(arg)) if arg.op is Ops.CONST and arg.dtype.count == 1 else ref(arg)
        fn = function_name(op, u.dtype)
        if fn not in functions: functions[fn] = self.function_definition(op, u.dtype)
        declare(u, function_call(fn, u.dtype, operand), "alu")
      else: declare(u, self.render_alu(u, ref), "alu")
    # buffers (the ones stored to are writable), then scalar parameters (numbered 0, 1, ... in the AST,
    # passed in that order)
    written = {u.src[0].arg for u in program if u.op is Ops.STORE}
    params = [f"{d.buffer_space}{'' if i in written else 'const '}{d.buffer_type(dt)}*{d.restrict} data{i}"
              for i, dt in enumerate(buffer_dtypes)]
    params += [f"{d.param_type(dt)} var{i}" for i, dt in enumerate(param_dtypes)]
    arg_names = [f"data{i}" for i in range(len(buffer_dtypes))] + [f"var{i}" for i in range(len(param_dtypes))]
    body = "\n".join(lines)
    # every vector type the body names, the masks of native vector ops (tgfn/renderer/cvector.py) included
    vectors.update((n, dtype_from_name(n)) for n in dict.fromkeys(_VECTOR_NAME.findall(body)))
    typedefs = "".join(f"typedef {dt.scalar().cname if not dt.is_bool else 'unsigned char'} {dt.cname} "
                       f"__attribute__((vector_size({dt.count * dt.itemsize})));\n"
                       f"typedef {dt.cname} {dt.cname}_u __attribute__((aligned({dt.itemsize})));\n"
                       for dt in vectors.values())
    head = f"{d.prelude}{d.used_helpers(body)}{typedefs}" + "".join(
      f"#ifndef TG_FN_{fn.upper()}\n#define TG_FN_{fn.upper()}\n{src}#endif\n" for fn, src in functions.items())
    if d.global_ids:
      sizes, groups = [1, 1, 1], [1, 1, 1]
      for rng, dim in ids.items():
        if rng.kind is AxisType.LOCAL: groups[dim] = rng.arg[2]
        sizes[dim] = -(-rng.size // groups[dim]) * groups[dim]  # whole work groups
      local = f" local={','.join(map(str, groups))}" if groups != [1, 1, 1] else ""
      head = f"// tgfn launch: global={','.join(map(str, sizes))}{local}\n{head}"
    if thread_range is None:
      return f"{head}{linkage}{d.kernel_prefix} {name}({', '.join(params)}) {{\n{body}\n}}\n"
    # the loop over the THREAD axis runs in chunks [lo, hi) on the worker pool: the kernel's arguments
    # travel in a struct, and the entry point hands the body to tg_parallel_for
    fields = "".join(f"  {p};\n" for p in params).replace(d.restrict, "")
    unpack = "".join(f"  {p} = ctx->{a};\n" for p, a in zip(params, arg_names))
    n = thread_range.size
    return (f"{head}{THREAD_PRELUDE}struct {name}_ctx {{\n{fields}}};\n"
            f"static void {name}_body(void *ctx_, long long lo, long long hi) {{\n"
            f"  const struct {name}_ctx *ctx = ctx_;\n{unpack}{body}\n}}\n"
            f"{d.kernel_prefix} {name}({', '.join(params)}) {{\n"
            f"  struct {name}_ctx ctx = {{{', '.join(arg_names)}}};\n"
            f"  tg_parallel_for({name}_body, &ctx, {n}, {max(1, n // 16)});\n}}\n")

  def render_load(self, u: UOp, ref: Ref) -> str:
    buf, idx = ref(u.src[0]), ref(u.src[1])
    load = f"*(const {u.dtype.cname}_u*)({buf} + {idx})" if u.dtype.count > 1 else f"{buf}[{idx}]"
    if len(u.src) == 2: return load
    zero = self.const(0, u.dtype.scalar())
    if u.dtype.count > 1: zero = f"(({u.dtype.cname}){{{', '.join([zero] * u.dtype.count)}}})"
    return f"({ref(u.src[2])} ? {load} : {zero})"

  def render_inline(self, u: UOp, leaves: tuple[UOp, ...], ref: Ref) -> str:
    """`u` as one expression, down to `leaves` (named values) and constants."""
    def inner(x: UOp) -> str: return ref(x) if x in leaves or x.op is Ops.CONST else self.render_alu(x, inner)
    return inner(u)

  def render_accumulate(self, u: UOp, ref: Ref) -> str:
    acc, value = u.src
    dtype = acc.dtype.scalar()
    if u.arg is Ops.MAX and dtype.is_float:  # the update is an op too: given its meaning by the same rule
      return self.render_inline(lower_alu(UOp(Ops.MAX, acc.dtype, (acc, value))), (acc, value), ref)
    fma = _fused_multiply_add(u)
    fn = self.dialect.fma[dtype is dtypes.float64]
    if acc.dtype.count == 1:
      if fma: return f"{fn}({ref(value.src[0])}, {ref(value.src[1])}, {ref(acc)})"
      return self.binary(u.arg, ref(acc), ref(value), dtype)
    if fma and (builtin := self.vector_fma.get(acc.dtype.name)) is not None:
      return builtin.format(*(ref(s) for s in value.src), ref(acc))
    if fma:
      a, b = (f"{ref(s)}[_l]" if s.dtype.count > 1 else ref(s) for s in value.src)
      return (f"({{ {acc.dtype.cname} _r; for (int _l = 0; _l < {acc.dtype.count}; _l++) "
              f"_r[_l] = {fn}({a}, {b}, {ref(acc)}[_l]); _r; }})")
    if u.arg in (Ops.ADD, Ops.MUL) and not dtype.is_bool: return f"({ref(acc)} {_NATIVE_VECTOR[u.arg]} {ref(value)})"
    if (native := VectorALU(ref).alu(u.arg, acc.dtype, (acc, value))) is not None: return native
    return _lanewise(acc, lambda r: self.binary(u.arg, r(acc), r(value), dtype), ref)

  def render_alu(self, u: UOp, ref: Ref) -> str:
    op, srcs = u.op, u.src
    if op is Ops.VECTORIZE: return f"(({u.dtype.cname}){{{', '.join(ref(s) for s in srcs)}}})"
    if op is Ops.GEP: return f"{ref(srcs[0])}[{u.arg}]"
    if u.dtype.count > 1:
      scalar = u.dtype.scalar()
      if op in _NATIVE_VECTOR and srcs[0].dtype.count > 1 and not scalar.is_bool and \
          (scalar.is_float or scalar.itemsize >= 4):
        return f"({ref(srcs[0])} {_NATIVE_VECTOR[op]} {ref(srcs[1])})"
      if op is Ops.FDIV: return f"({ref(srcs[0])} / {ref(srcs[1])})"
      if op is Ops.SQRT and (builtin := self.vector_sqrt.get(u.dtype.name)) is not None:
        return builtin.format(ref(srcs[0]))
      if (native := VectorALU(ref).render(u)) is not None: return native
      return _lanewise(u, lambda r: self.render_scalar_alu(u, r, scalar), ref)
    return self.render_scalar_alu(u, ref, u.dtype)

  def render_scalar_alu(self, u: UOp, ref: Ref, dtype: DType) -> str:
    op, srcs = u.op, u.src
    if op is Ops.CAST: return self.cast(ref(srcs[0]), srcs[0].dtype.scalar(), dtype)
    if op is Ops.BITCAST: return self.dialect.bitcast(ref(srcs[0]), srcs[0].dtype.scalar(), dtype)
    if op is Ops.WHERE: return f"({ref(srcs[0])} ? {ref(srcs[1])} : {ref(srcs[2])})"
    if len(srcs) == 1: return self.unary(op, ref(srcs[0]), dtype)
    return self.binary(op, ref(srcs[0]), ref(srcs[1]), srcs[0].dtype.scalar())

  def _wrapping(self, dtype: DType) -> Optional[str]:
    """The unsigned type that signed arithmetic of `dtype` goes through where the dialect does not wrap
    (int and wider: narrower types are promoted to int, which cannot overflow on them), else None."""
    if self.dialect.wrapping_ints or not dtype.is_int or dtype.is_unsigned or dtype.itemsize < 4: return None
    return self.dialect.type(dtype_from_name("u" + dtype.name))

  def binary(self, op: Ops, a: str, b: str, dtype: DType) -> str:
    if dtype.is_bool and op in _BOOL_OPERATOR: return f"({a} {_BOOL_OPERATOR[op]} {b})"
    if op is Ops.MAX:
      if dtype.is_float: raise NotImplementedError("a float MAX reached the printer: lower_semantics gives it its NaN rule")
      return f"({a} > {b} ? {a} : {b})"
    if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL) and (unsigned := self._wrapping(dtype)) is not None:
      b = b if op is Ops.SHL else f"({unsigned}){b}"
      return self.dialect.from_unsigned.format(t=self.dialect.type(dtype), x=f"(({unsigned}){a} {_OPERATOR[op]} {b})")
    if op in _OPERATOR: return f"({a} {_OPERATOR[op]} {b})"
    raise NotImplementedError(f"{self.dialect.name} rendering of {op}")

  def unary(self, op: Ops, x: str, dtype: DType) -> str:
    if op is Ops.NEG:
      if dtype.is_bool: return f"(!{x})"
      if (unsigned := self._wrapping(dtype)) is not None:
        return self.dialect.from_unsigned.format(t=self.dialect.type(dtype), x=f"(-({unsigned}){x})")
      return f"(-{x})"
    if op is Ops.RECIP: return f"({self.const(1.0, dtype)} / {x})"
    return f"{self.dialect.math(op, dtype)}({x})"

  def cast(self, x: str, src: DType, dst: DType) -> str:
    d = self.dialect
    # bfloat16 (and float16 where there is no half type) are held as bits: widen first (bits 0x8000, -0.0,
    # must still cast to False)
    if src is dtypes.bfloat16: x, src = f"tg_bf2f({x})", dtypes.float32
    elif src is dtypes.float16 and not d.native_half: x, src = f"tg_h2f({x})", dtypes.float32
    if dst.is_bool: return f"({x} != 0)"
    if dst is dtypes.bfloat16: return f"tg_f2bf((float)({x}))"
    if dst is dtypes.float16 and not d.native_half:
      return f"tg_d2h({x})" if src is dtypes.float64 else f"tg_f2h((float)({x}))"
    if src is dtypes.float64 and dst is dtypes.float32: return d.narrow_double.format(x=x)
    return f"(({d.type(dst)})({x}))"


class OpenCLRenderer(CStyleRenderer):
  """OpenCL C: scalar kernels whose innermost output axes are get_global_id(0..2); the first one runs in work
  groups of `local_size` (get_group_id, get_local_id) where the heuristic gives it a LOCAL opt."""
  dialect = OPENCL
  supports_opts = False
  local_size = 64


class CUDARenderer(CStyleRenderer):
  """CUDA C: scalar kernels over a grid of thread blocks (the innermost output axis across the threads, in
  blocks of `local_size` where the heuristic gives it a LOCAL opt)."""
  dialect = CUDA
  supports_opts = False
  local_size = 128
