"""Batching: one rule per primitive op, and the graph rewrite that applies them.

`vmap(f)` traces `f` on placeholders of one example's shape, then rewrites the traced graph so every
node that depends on a batched input carries the batch as a new leading axis: elementwise ops
broadcast their unbatched sources, reductions and movement ops shift their axis arguments.
A rule takes the node and its sources as (Array, is_batched) pairs (batched ones lead with the batch
axis) and returns the batched result. Nodes that do not depend on a batched input are left alone.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from tgfn.array import Array
from tgfn.dtype import dtypes
from tgfn.helpers import track
from tgfn.uop.ops import GroupOp, Ops, UOp, toposort

Batched = tuple[Array, bool]


def _lead(x: Array, batched: bool, size: int) -> Array:
  """`x` with the batch as its leading axis, broadcasting an unbatched value."""
  return x if batched else x._reshape((1,) + x.shape)._broadcast_to((size,) + x.shape)


def _alu_rule(y: UOp, srcs: Sequence[Batched], size: int) -> Array:
  return Array(UOp(y.op, y.dtype, tuple(_lead(a, b, size).uop for a, b in srcs), y.arg))


def _with_arg(arg_fn: Callable[[UOp, int], object]) -> Callable[[UOp, Sequence[Batched], int], Array]:
  def rule(y: UOp, srcs: Sequence[Batched], size: int) -> Array:
    return Array(UOp(y.op, y.dtype, (srcs[0][0].uop,), arg_fn(y, size)))
  return rule


def _gather_rule(y: UOp, srcs: Sequence[Batched], size: int) -> Array:
  """Source and indices both lead with the batch (an unbatched index is broadcast, an unbatched source gets a size-1 axis)."""
  (x, bx), (index, bi) = srcs
  x = x if bx else x._reshape((1,) + x.shape)  # a size-1 axis of the source is read at 0: no broadcast copy
  return Array(UOp(Ops.GATHER, y.dtype, (x.uop, _lead(index, bi, size).uop), y.arg + 1))


def _scatter_rule(y: UOp, srcs: Sequence[Batched], size: int) -> Array:
  """One scatter over the stacked operands: member b's positions move to b's block of the flat result
  (dropped ones stay dropped)."""
  import tgfn.numpy as tnp
  (x, bx), (p, bp), (u, bu) = srcs
  n = math.prod(y.shape)
  p = _lead(p, bp, size).astype(dtypes.int64)
  block = tnp.arange(size, dtype=dtypes.int64).reshape((size,) + (1,) * (p.ndim - 1)) * n
  p = tnp.where((p >= 0) & (p < n), p + block, -1)
  return _lead(x, bx, size)._scatter(p, _lead(u, bu, size), y.arg)


def _host_batch(y: UOp, srcs: Sequence[Batched], size: int) -> Array:
  from tgfn.ops.host import host_batch
  return host_batch(y, srcs, size)


BATCH_RULES: dict[Ops, Callable[[UOp, Sequence[Batched], int], Array]] = {
  **{op: _alu_rule for op in GroupOp.ALU},
  Ops.REDUCE_AXIS: _with_arg(lambda y, n: (y.arg[0], tuple(a + 1 for a in y.arg[1]))),
  Ops.RESHAPE: _with_arg(lambda y, n: (n,) + y.arg),
  Ops.EXPAND: _with_arg(lambda y, n: (n,) + y.arg),
  Ops.PERMUTE: _with_arg(lambda y, n: (0,) + tuple(a + 1 for a in y.arg)),
  Ops.PAD: _with_arg(lambda y, n: ((0, 0),) + y.arg),
  Ops.SHRINK: _with_arg(lambda y, n: ((0, n),) + y.arg),
  Ops.FLIP: _with_arg(lambda y, n: tuple(a + 1 for a in y.arg)),
  Ops.CONTIGUOUS: _with_arg(lambda y, n: y.arg),
  Ops.COPY: _with_arg(lambda y, n: y.arg),
  Ops.DETACH: _with_arg(lambda y, n: y.arg),
  Ops.GATHER: _gather_rule,
  Ops.SCATTER: _scatter_rule,
  Ops.HOST: lambda y, srcs, n: _host_batch(y, srcs, n),
}
NO_BATCH_RULE_NEEDED: dict[Ops, str] = {
  Ops.BUFFER: "a leaf: never batched", Ops.CONST: "a leaf: never batched", Ops.PARAM: "a leaf: never batched",
  Ops.PLACEHOLDER: "a leaf: batched inputs are substituted before the rules run",
}


def batch_graph(outputs: Sequence[UOp], batched_inputs: dict[UOp, Array], size: int) -> list[Batched]:
  """Rewrite `outputs` given batched values (batch axis leading) for some input nodes."""
  from tgfn.lax.collective_batching import over_batch_axis  # (a collective over the vmap's own axis)
  done: dict[UOp, Batched] = {u: (a, True) for u, a in batched_inputs.items()}
  custom_calls: dict = {}
  for node in toposort(list(outputs)):
    if node in done: continue
    srcs = [done[s] for s in node.src]
    if not any(b for _, b in srcs) and not over_batch_axis(node):
      done[node] = (Array(node) if all(a.uop is s for (a, _), s in zip(srcs, node.src))
                    else Array(node.replace(src=tuple(a.uop for a, _ in srcs))), False)
    elif node.op is Ops.CALL:  # a sub-graph call: all of its outputs batched at once
      from tgfn.lax.rules import call_batch
      key = (node.arg[0], node.src)
      if key not in custom_calls: custom_calls[key] = call_batch(node, srcs, size)
      done[node] = custom_calls[key][node.arg[1]]
    else:
      rule = BATCH_RULES.get(node.op)
      if rule is None: raise NotImplementedError(f"no batching rule for {node.op}")
      done[node] = (rule(node, srcs, size), True)
  result = [done[o] for o in outputs]
  track("vmap: batching walk", outputs, [a for a, _ in result])
  return result
