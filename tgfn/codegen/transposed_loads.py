"""Gathers that together read a block of memory become contiguous row loads and lane picks.

A vectorized transposing copy (`x.T`, a transposed operand packed into panels) gathers each vector
lane by lane: with 8 lanes a row apart and the copy upcast 8 along the rows, every block is 64 scalar
loads. The same 64 values are 8 contiguous rows of 8: load each row as one vector, and build each
gathered vector from one lane of every row (VECTORIZE of GEPs; a square block of them the C renderer
writes as a shuffle network, tgfn/renderer/ctranspose.py). The values, and the memory read, are exactly
the same, in far fewer statements of C, which is what the compiler's time on these kernels was (the MLP
step's transposing copies: 0.55-0.7x the gcc time; a 512x512 transpose 98 -> 55 us on one core).

Which gathers: VECTORIZEs of ungated scalar LOADs of one buffer whose lane indices are the same sums
but for a constant, and whose constants step by one from one gather to the next (`W` gathers at
columns c, c+1, ..., c+W-1). Only whole runs of W are rewritten, so each row load reads exactly the
elements the W gathers read: nothing out of bounds, nothing new.
"""
from __future__ import annotations

from tgfn.codegen.opts import VECTOR_DTYPES
from tgfn.uop.ops import Ops, UOp, substitute, toposort
from tgfn.uop.symbolic import split_sum

# the row lengths tried, longest first: a row of fewer elements saves little over the scalar loads
ROW_LENGTHS = (16, 8, 4)
ROW_BYTES = 64  # no longer than the widest vector register


def _gather_key(v: UOp) -> tuple | None:
  """(buffer, each lane's index terms, each lane's offset from lane 0) and the column (lane 0's constant)
  of a gather of scalar loads, or None for anything else."""
  if v.op is not Ops.VECTORIZE or v.dtype.count < 2 or v.src[0].op is not Ops.LOAD or v.dtype.scalar() not in VECTOR_DTYPES: return None
  if not all(s.op is Ops.LOAD and len(s.src) == 2 and s.src[0] is v.src[0].src[0] for s in v.src): return None
  if len(set(v.src)) != len(v.src): return None  # a broadcast (one load in every lane), not a gather
  sums = [split_sum(s.src[1]) for s in v.src]
  column = sums[0][1]
  return (v.src[0].src[0], tuple(frozenset(terms) for terms, _ in sums), tuple(c - column for _, c in sums)), column


def transposed_loads(ast: UOp) -> UOp:
  """`ast` with every whole run of gathers over a block read as rows (see the module docstring)."""
  runs: dict[tuple, dict[int, UOp]] = {}
  for u in toposort([ast]):
    if (found := _gather_key(u)) is not None: runs.setdefault(found[0], {})[found[1]] = u
  mapping: dict[UOp, UOp] = {}
  for by_column in runs.values():
    for start in sorted(by_column):
      gather = by_column[start]
      if gather in mapping: continue  # in a block already
      scalar = gather.dtype.scalar()
      length = next((n for n in ROW_LENGTHS if n * scalar.itemsize <= ROW_BYTES
                     and all(start + i in by_column and by_column[start + i] not in mapping for i in range(n))), None)
      if length is None: continue
      rows = [UOp(Ops.LOAD, scalar.vec(length), lane.src) for lane in gather.src]
      for i in range(length):
        mapping[by_column[start + i]] = UOp(Ops.VECTORIZE, gather.dtype, tuple(UOp(Ops.GEP, scalar, (row,), i) for row in rows))
  return substitute(ast, mapping) if mapping else ast
