"""Expand the axes the optimizer marked: UPCAST and UNROLL axes are replicated, a VECTOR axis
becomes the lanes of vector values. After this a kernel has only GLOBAL, THREAD and REDUCE loops.

  UPCAST r (size n): every STORE that depends on r is written n times, with r = 0..n-1. Shared
                     sources are shared nodes (hash-consing), so an operand that does not depend on
                     r is loaded once; a reduction becomes n accumulators over one loop nest.
  UNROLL r (size n): a REDUCE over r accumulates n values per trip, r = 0..n-1, in that order.
  VECTOR r (size w): nodes that depend on r get a w-lane vector dtype. A LOAD or STORE whose index
                     is `base + r` moves w consecutive elements at once; any other index is a gather
                     (w scalar loads) or a scatter (w scalar stores). A REDUCE over r accumulates
                     vectors and adds the lanes up at the end.
"""
from __future__ import annotations

from typing import Optional

from tgfn.uop.ops import AxisType, Ops, UOp, substitute, toposort
from tgfn.uop.symbolic import build_sum, split_sum


def _ranges_of(ast: UOp, kind: AxisType) -> list[UOp]:
  return sorted((u for u in toposort([ast]) if u.op is Ops.RANGE and u.kind is kind), key=lambda r: r.arg[0])


def _at(u: UOp, rng: UOp, value: int, memo: Optional[dict[UOp, UOp]] = None) -> UOp:
  """`u` with `rng` set to `value`; `memo` is shared by the calls for one (rng, value) (see substitute)."""
  return substitute(u, {rng: UOp.const(rng.dtype, value)}, memo)


def expand_upcasts(ast: UOp) -> UOp:
  for rng in _ranges_of(ast, AxisType.UPCAST):
    stores, memos = [], [{} for _ in range(rng.size)]
    for store in ast.src:
      if rng in toposort([store]): stores.extend(_at(store, rng, i, memos[i]) for i in range(rng.size))
      else: stores.append(store)
    ast = ast.replace(src=tuple(stores))
  return ast


def expand_unrolls(ast: UOp) -> UOp:
  for rng in _ranges_of(ast, AxisType.UNROLL):
    closing, memos = {}, [{} for _ in range(rng.size)]
    for u in toposort([ast]):
      if u.op is Ops.REDUCE and rng in u.reduce_ranges:
        values = tuple(_at(v, rng, i, memos[i]) for v in u.reduce_values for i in range(rng.size))
        closing[u] = u.replace(src=values + tuple(r for r in u.reduce_ranges if r is not rng))
    ast = substitute(ast, closing)
  return ast


def _contiguous_base(idx: UOp, rng: UOp):
  """`base` when idx == base + rng and base does not depend on rng, else None."""
  terms, const = split_sum(idx)
  if (rng, 1) not in terms: return None
  rest = [(t, c) for t, c in terms if t is not rng]
  if rest and rng in toposort([t for t, _ in rest]): return None  # one walk over every other term
  return build_sum(rest, const, idx.dtype)


class _Vectorizer:
  def __init__(self, rng: UOp):
    self.rng, self.width = rng, rng.size
    self.memos: list[dict[UOp, UOp]] = [{} for _ in range(self.width)]  # one per lane, for _at
    self.out: dict[UOp, UOp] = {rng: UOp(Ops.VECTORIZE, rng.dtype.vec(self.width),
                                         tuple(UOp.const(rng.dtype, i) for i in range(self.width)))}

  def is_vector(self, s: UOp) -> bool: return s in self.out and self.out[s].dtype.count > 1

  def scalar_rebuilt(self, u: UOp) -> UOp:
    """`u` over the new versions of its sources that are scalars (lanes combined by a reduction)."""
    src = tuple(self.out[s] if s in self.out and not self.is_vector(s) else s for s in u.src)
    return u if src == u.src else u.replace(src=src)

  def lanes(self, u: UOp) -> tuple[UOp, ...]:
    u = self.scalar_rebuilt(u)
    return tuple(_at(u, self.rng, i, self.memos[i]) for i in range(self.width))

  def vec(self, s: UOp) -> UOp:
    """The vectorized value of source `s` (a broadcast if it does not depend on the lanes)."""
    if self.is_vector(s): return self.out[s]
    s = self.out.get(s, s)
    return UOp(Ops.VECTORIZE, s.dtype.vec(self.width), (s,) * self.width)

  def run(self, ast: UOp) -> UOp:
    stores: list[UOp] = []
    for u in toposort([ast]):
      if u.op is Ops.SINK or not any(s in self.out for s in u.src): continue
      if not any(self.is_vector(s) for s in u.src) and u.op is not Ops.REDUCE:
        if u.op is Ops.STORE: stores.append(self.scalar_rebuilt(u))
        else: self.out[u] = self.scalar_rebuilt(u)
      elif u.op is Ops.STORE: stores.extend(self.store(u))
      elif u.op is Ops.LOAD: self.out[u] = self.load(u)
      elif u.op is Ops.REDUCE: self.out[u] = self.reduce(u)
      else: self.out[u] = UOp(u.op, u.dtype.vec(self.width), tuple(self.vec(s) for s in u.src), u.arg)
    untouched = tuple(s for s in ast.src if not any(x in self.out for x in s.src))
    return ast.replace(src=untouched + tuple(stores))

  def load(self, u: UOp) -> UOp:
    base = _contiguous_base(u.src[1], self.rng)
    gate_ok = len(u.src) == 2 or u.src[2] not in self.out
    if base is not None and gate_ok: return UOp(Ops.LOAD, u.dtype.vec(self.width), (u.src[0], base) + u.src[2:])
    return UOp(Ops.VECTORIZE, u.dtype.vec(self.width), self.lanes(u))  # a gather

  def store(self, u: UOp) -> list[UOp]:
    buf, idx, value = u.src
    base = _contiguous_base(idx, self.rng)
    if base is not None: return [UOp(Ops.STORE, None, (buf, base, self.vec(value)))]
    vector = self.vec(value)
    return [UOp(Ops.STORE, None, (buf, _at(idx, self.rng, i, self.memos[i]), UOp(Ops.GEP, value.dtype, (vector,), i)))
            for i in range(self.width)]

  def reduce(self, u: UOp) -> UOp:
    values = tuple(self.vec(v) for v in u.reduce_values)
    vdtype = u.dtype.vec(self.width)
    if self.rng not in u.reduce_ranges: return UOp(Ops.REDUCE, vdtype, values + u.reduce_ranges, u.arg)
    # a reduction over the lanes: accumulate vectors over the other loops, then combine the lanes
    others = tuple(r for r in u.reduce_ranges if r is not self.rng)
    if others: partial = UOp(Ops.REDUCE, vdtype, values + others, u.arg)
    else:
      partial = values[0]
      for v in values[1:]: partial = UOp(u.arg, vdtype, (partial, v))
    lanes = [UOp(Ops.GEP, u.dtype, (partial,), i) for i in range(self.width)]
    while len(lanes) > 1:  # pairwise
      lanes = [UOp(u.arg, u.dtype, (a, b)) for a, b in zip(lanes[::2], lanes[1::2])] + lanes[len(lanes) // 2 * 2:]
    return lanes[0]


def expand_vectors(ast: UOp) -> UOp:
  ranges = _ranges_of(ast, AxisType.VECTOR)
  assert len(ranges) <= 1, "a kernel vectorizes one axis"
  return _Vectorizer(ranges[0]).run(ast) if ranges else ast


def expand(ast: UOp) -> UOp:
  return expand_vectors(expand_unrolls(expand_upcasts(ast)))
