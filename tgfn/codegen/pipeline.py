"""Kernel AST -> linear program: the codegen passes, in order."""
from __future__ import annotations

from tgfn.codegen.decompositions import decompose_transcendentals, force_decomposition
from tgfn.codegen.linearize import linearize
from tgfn.dtype import dtypes
from tgfn.renderer import Renderer
from tgfn.uop.ops import GroupOp, Ops, PatternMatcher, UOp, UPat, graph_rewrite
from tgfn.uop.symbolic import symbolic

_HALF = (dtypes.float16, dtypes.bfloat16)


def _compute_in_float32(x: UOp) -> UOp | None:
  """Half-precision math runs in float32 and rounds back after every op, so results match NumPy's
  per-op float16 rounding and no backend needs native half arithmetic."""
  if x.op in (Ops.CAST, Ops.BITCAST, Ops.WHERE) or not any(s.dtype in _HALF for s in x.src): return None
  wide = UOp(x.op, dtypes.float32 if x.dtype in _HALF else x.dtype, tuple(s.cast(dtypes.float32) for s in x.src))
  return wide.cast(x.dtype)


def _reduce_in_float32(red: UOp) -> UOp | None:
  if red.dtype not in _HALF: return None
  return UOp(Ops.REDUCE, dtypes.float32, (red.src[0].cast(dtypes.float32),) + red.src[1:], red.arg).cast(red.dtype)


promote_halves = PatternMatcher([
  (UPat(GroupOp.ALU, name="x"), _compute_in_float32),
  (UPat(Ops.REDUCE, name="red"), _reduce_in_float32),
])


def codegen(ast: UOp, renderer: Renderer) -> list[UOp]:
  ast = graph_rewrite(ast, symbolic)
  ast = graph_rewrite(ast, promote_halves)
  if not renderer.has_transcendentals or force_decomposition():
    ast = graph_rewrite(ast, decompose_transcendentals + symbolic)
  return linearize(ast)
