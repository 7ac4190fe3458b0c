"""The structure of a graph to realize, with its data abstracted: the key under which the engine keeps
a realization plan (tgfn/engine/realize.py), so repeating an eager computation on new arrays and new
Python scalars schedules, lowers and compiles nothing.

Two graphs have the same key when they differ only in which buffers they read (of the same dtype, device,
shape and commitment) and in the values of their PARAMs (Python scalars, of the same dtype). Already-realized
subgraphs (`realized_buffer`) count as the buffers holding them. Everything else -- ops, dtypes, args,
constants, and which leaves are shared (`x * x` is not `x * y`) -- is part of the key.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from tgfn.uop.ops import Ops, UOp


# the attribute of a lazy node that holds the BUFFER node with its value, once realized: it lives as long
# as the node, and reading it is cheaper than a weak dictionary's lookup
REALIZED = "realized_as"


def realized_buffer(node: UOp) -> Optional[UOp]:
  """The BUFFER node holding the value of lazy `node`, once realized."""
  return node.__dict__.get(REALIZED)


class Structure(NamedTuple):
  key: tuple                 # hashable; equal for graphs that differ only in their data
  leaves: list[UOp]          # the BUFFER nodes read, in walk order (realized subgraphs as their BUFFERs)
  params: list[UOp]          # the PARAM nodes, in walk order
  out_leaves: list[Optional[UOp]]  # per output: the BUFFER holding it already, if any


def structure(outs: Sequence[UOp]) -> Optional[Structure]:
  """The structure of `outs`, or None when they depend on a transform's PLACEHOLDER (not computable as is).
  Nodes are numbered in the order a depth-first walk first meets them: the same for equal structures."""
  position: dict[UOp, int] = {}
  entries: list = []
  leaves: list[UOp] = []
  params: list[UOp] = []
  inner: list[UOp] = []
  stack = list(reversed(outs))
  while stack:
    node = stack.pop()
    if node in position: continue
    op = node.op
    buffer = node if op is Ops.BUFFER else node.__dict__.get(REALIZED)
    if buffer is not None:  # a leaf: only its kind of data is structure
      if buffer in position:  # met before, as itself or as another node realized into it: one leaf
        position[node] = position[buffer]
        continue
      position[node] = position[buffer] = len(entries)
      entries.append((Ops.BUFFER, buffer.dtype, buffer.arg[1], buffer.arg[2], buffer.committed))
      leaves.append(buffer)
      continue
    position[node] = len(entries)
    if op is Ops.PARAM:
      entries.append((Ops.PARAM, node.dtype))
      params.append(node)
    elif op is Ops.CONST: entries.append(node)  # keyed by the node: hash-consing tells -0.0 from 0.0, == does not
    elif op is Ops.PLACEHOLDER: return None
    else:
      entries.append(None)  # filled below, once its sources have positions
      inner.append(node)
      stack.extend(reversed(node.src))
  for node in inner:
    entries[position[node]] = (node.op, node.dtype, node.arg, tuple([position[s] for s in node.src]))
  out_leaves = [o if o.op is Ops.BUFFER else o.__dict__.get(REALIZED) for o in outs]
  return Structure((tuple(entries), tuple(position[o] for o in outs)), leaves, params, out_leaves)
