"""Long reductions in blocks: a float sum of n values accumulated one by one has an error that grows
with n (2e7 float32 ones sum to 16777216). Splitting the loop into blocks of at most REDUCE_BLOCK
elements and summing the blocks' results bounds the error by about (block + n/block) roundings, and
the blocks nest again for longer inputs. Applies to every renderer unless STRICT_FLOAT=1."""
from __future__ import annotations

import math
from typing import Optional

from tgfn.codegen.policy import REDUCE_BLOCK, strict_float
from tgfn.uop.ops import AxisType, Ops, PatternMatcher, UOp, UPat, graph_rewrite, substitute, toposort


def _block(red: UOp, next_id: list[int]) -> Optional[UOp]:
  if red.arg is not Ops.ADD or not red.dtype.is_float: return None
  ranges = red.reduce_ranges
  if math.prod(r.size for r in ranges) <= REDUCE_BLOCK: return None
  # the innermost loops whose trips fit in a block stay inside; the next one is split in two
  inner: list[UOp] = []
  trips = 1
  for r in reversed(ranges):
    if trips * r.size > REDUCE_BLOCK: break
    inner.insert(0, r)
    trips *= r.size
  split = ranges[len(ranges) - len(inner) - 1]
  outer = ranges[:len(ranges) - len(inner) - 1]
  part = max(1, REDUCE_BLOCK // trips)
  blocks = -(-split.size // part)
  r_out = UOp.range(blocks, next_id[0], AxisType.REDUCE)
  r_in = UOp.range(part, next_id[0] + 1, AxisType.REDUCE)
  next_id[0] += 2
  index = r_out * part + r_in
  values = tuple(substitute(v, {split: index}) for v in red.reduce_values)
  if blocks * part != split.size:  # a ragged last block: the extra iterations add nothing
    valid = index.lt(split.size)
    zero = UOp.const(red.dtype, 0)
    values = tuple(_gated(v, valid, zero) for v in values)
  inner_red = UOp(Ops.REDUCE, red.dtype, values + (r_in, *inner), red.arg)
  return UOp(Ops.REDUCE, red.dtype, (inner_red, *outer, r_out), red.arg)


def _gated(value: UOp, valid: UOp, zero: UOp) -> UOp:
  """`value` where `valid`, else 0, with the loads under it gated so they never read out of bounds."""
  def gate(load: UOp) -> UOp:
    g = valid if len(load.src) == 2 else load.src[2].logical_and(valid)
    return load.replace(src=(load.src[0], load.src[1], g))
  loads = {u: gate(u) for u in toposort([value]) if u.op is Ops.LOAD}
  return valid.where(substitute(value, loads), zero)


# the next free range id is the rewrite's context (built once: a matcher inspects its rules when made)
_blocking = PatternMatcher([(UPat(Ops.REDUCE, name="red"), lambda red, ctx: _block(red, ctx))])


def block_long_reductions(ast: UOp) -> UOp:
  if strict_float(): return ast
  next_id = [1 + max((u.arg[0] for u in toposort([ast]) if u.op is Ops.RANGE), default=-1)]
  return graph_rewrite(ast, _blocking, ctx=next_id, name="block long reductions")
