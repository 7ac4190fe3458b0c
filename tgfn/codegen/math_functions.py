"""exp2 and log2 as C functions of whole vectors, written once per compiled unit and called from its kernels.

Decomposed inline (tgfn/codegen/decompositions.py), each exp2 or log2 is about 60 lines of C at every use: a
transformer's softmax, GELU and their gradients repeat it dozens of times, and the C compiler digests every
copy. Left as libm calls, small kernels ran them one lane at a time (a VAE's softplus over 128x64 elements
took 85 us). Here each (op, vector type) becomes one function, generated from the same decomposition through
the same passes as a kernel (a kernel `out[i] = exp2(in[i])` over one vector of lanes), so a call computes
exactly what the inline code would, in every kernel whatever its size. Each kernel's source carries the
functions it calls under an include guard: a unit of several kernels compiles each function once. They are
`noinline`, so the compiler sees one body however many calls there are; the call passes the vector through
memory, a few cycles against the function's ~30 vector operations.
"""
from __future__ import annotations

import functools

from tgfn.codegen.decompositions import decomposition_rules
from tgfn.codegen.opts import Opt, OptOps
from tgfn.codegen.pipeline import optimize
from tgfn.dtype import DType
from tgfn.renderer.cstyle import CStyleRenderer, function_name
from tgfn.uop.ops import AxisType, Ops, UOp, graph_rewrite
from tgfn.uop.symbolic import symbolic

FUNCTION_OPS = frozenset({Ops.EXP2, Ops.LOG2})


def function_program(op: Ops, dtype: DType) -> list[UOp]:
  """The linear program of `op`'s function over dtype's lanes: the kernel `out[i] = op(in[i])`, decomposed."""
  scalar, lanes = dtype.scalar(), dtype.count
  lane = UOp.range(lanes, 0, AxisType.GLOBAL)
  value = UOp(Ops.LOAD, scalar, (UOp(Ops.DEFINE_GLOBAL, scalar, (), 1), lane))
  ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (UOp(Ops.DEFINE_GLOBAL, scalar, (), 0), lane, UOp(op, scalar, (value,)))),))
  ast = graph_rewrite(ast, decomposition_rules(frozenset({op})) + symbolic, name=f"{op.name.lower()} as a function")
  return optimize(ast, [Opt(OptOps.VECTOR, 0, lanes)] if lanes > 1 else [])


@functools.lru_cache(maxsize=None)
def function_source(renderer: CStyleRenderer, op: Ops, dtype: DType) -> str:
  """The C definition of `function_name(op, dtype)`: `void f(T *out, const T *in)` over dtype's lanes."""
  scalar = dtype.scalar()
  return renderer.render(function_name(op, dtype), function_program(op, dtype), [scalar, scalar],
                         linkage="static __attribute__((noinline)) ")
