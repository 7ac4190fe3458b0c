"""Order a kernel AST into a flat program with explicit loops.

The output loops (THREAD first, then GLOBAL, by id) are the outer loops; inside them the stores come in
order, each within its own sequential loops (AxisType.LOOP: a scatter's copy, then its pass over the
updates), which close before the next store's open. Every other node is placed in
the innermost loop it depends on, in dependency order, so loop-invariant work is hoisted out of every
loop (an output loop opens after what does not depend on it), except a read of a buffer that a
sequential loop writes (a scatter reading its copied output), which waits for those stores. Each REDUCE
becomes an accumulator: DEFINE_ACC before its loops, ASSIGN acc = acc <op> value inside them (once per
value, in order), and after the loops the DEFINE_ACC itself stands for the result. REDUCEs over the
same loops that are ready together share one loop nest: an unrolled tile of accumulators (a register
block) is updated by a single pass over the reduction axis.

The program is a list of UOps:
  RANGE      opens a loop `for r in range(size)`          ENDRANGE closes it
  DEFINE_ACC declares an accumulator, and reads it after its loops
  ASSIGN     src (acc, value), arg: ALU op
  STORE / LOAD / CONST / DEFINE_GLOBAL / VECTORIZE / GEP / ALU ops: each computes one value
"""
from __future__ import annotations

from typing import Iterable

from tgfn.dtype import DType
from tgfn.uop.ops import AxisType, Ops, UOp, toposort

REDUCE_IDENTITY = {Ops.ADD: 0, Ops.MUL: 1}


def reduce_identity(op: Ops, dtype: DType) -> object:
  if op is Ops.MAX: return dtype.scalar().min
  return REDUCE_IDENTITY[op]


class _Reduction:
  def __init__(self, op: Ops, values: tuple[UOp, ...], ranges: tuple[UOp, ...]):
    self.op, self.values, self.ranges = op, values, ranges


def _accumulators(ast: UOp) -> tuple[UOp, dict[UOp, _Reduction]]:
  """The AST with each REDUCE replaced by a DEFINE_ACC, and what each accumulator accumulates."""
  done: dict[UOp, UOp] = {}
  reductions: dict[UOp, _Reduction] = {}
  for node in toposort([ast]):
    src = tuple(done[s] for s in node.src)
    if node.op is Ops.REDUCE:
      n_values = len(node.reduce_values)
      init = UOp.const(node.dtype.scalar(), reduce_identity(node.arg, node.dtype))
      if node.dtype.count > 1: init = UOp(Ops.VECTORIZE, node.dtype, (init,) * node.dtype.count)
      acc = UOp(Ops.DEFINE_ACC, node.dtype, (init,), len(reductions))
      reductions[acc] = _Reduction(node.arg, src[:n_values], src[n_values:])
      done[node] = acc
    else: done[node] = node if src == node.src else node.replace(src=src)
  return done[ast], reductions


class _Linearizer:
  def __init__(self, reductions: dict[UOp, _Reduction]) -> None:
    self.reductions = reductions
    self.program: list[UOp] = []
    self.placed: set[UOp] = set()
    self._deps: dict[UOp, frozenset[UOp]] = {}
    self._accs_below: dict[UOp, frozenset[UOp]] = {}
    # buffers a sequential loop writes (a scatter's copy): a value that loads one must not be placed before
    # the stores, so the steps that hoist work ahead of them skip it while this is set
    self.unwritten: frozenset[UOp] = frozenset()
    self._reads: dict[UOp, frozenset[UOp]] = {}

  def children(self, u: UOp) -> tuple[UOp, ...]:
    """What must be computed before `u`: for an accumulator, the values it accumulates (and their loops)."""
    red = self.reductions.get(u)
    return u.src + red.values + red.ranges if red is not None else u.src

  def order(self, roots: Iterable[UOp]) -> list[UOp]: return toposort(list(roots), self.children)

  def deps(self, root: UOp) -> frozenset[UOp]:
    """The RANGEs whose loops must be open to compute `root`."""
    if root not in self._deps:
      # walk only what is not known yet: a deep chain would otherwise be walked once per node (quadratic)
      for u in toposort([root], lambda u: () if u in self._deps else self.children(u)):
        if u in self._deps: continue
        if u.op is Ops.RANGE: self._deps[u] = frozenset({u})
        elif (red := self.reductions.get(u)) is not None:
          self._deps[u] = frozenset().union(*(self._deps[v] for v in red.values)) - frozenset(red.ranges)
        else: self._deps[u] = frozenset().union(*(self._deps[s] for s in u.src))
    return self._deps[root]

  def accs_below(self, root: UOp) -> frozenset[UOp]:
    """The accumulators `root` reads, directly or through other values."""
    if root not in self._accs_below:
      for u in toposort([root], lambda u: () if u in self._accs_below else self.children(u)):
        if u in self._accs_below: continue
        below = frozenset().union(*(self._accs_below[c] for c in self.children(u)))
        self._accs_below[u] = below | {u} if u in self.reductions else below
    return self._accs_below[root]

  def reads(self, root: UOp) -> frozenset[UOp]:
    """The buffers (DEFINE_GLOBAL) `root` loads from, directly or through other values."""
    if root not in self._reads:
      for u in toposort([root], lambda u: () if u in self._reads else self.children(u)):
        if u in self._reads: continue
        below = frozenset().union(*(self._reads[c] for c in self.children(u)))
        self._reads[u] = below | {u.src[0]} if u.op is Ops.LOAD else below
    return self._reads[root]

  def emit_scope(self, roots: Iterable[UOp], open_ranges: frozenset[UOp]) -> None:
    for node in self.order(roots):
      if node in self.placed or node.op is Ops.RANGE or not self.deps(node) <= open_ranges: continue
      if self.unwritten and self.reads(node) & self.unwritten: continue
      if node in self.reductions: self.emit_reductions(self.group_for(node, open_ranges), open_ranges)
      else: self.place(node)

  def group_for(self, acc: UOp, open_ranges: frozenset[UOp]) -> list[UOp]:
    """`acc` and the other ready accumulators over the same loops that neither reads: one loop nest."""
    ranges = set(self.reductions[acc].ranges)
    group = [acc]
    for other, red in self.reductions.items():
      if other in self.placed or other is acc or set(red.ranges) != ranges or not self.deps(other) <= open_ranges:
        continue
      if any(g in self.accs_below(other) or other in self.accs_below(g) for g in group): continue
      group.append(other)
    return group

  def place(self, node: UOp) -> None:
    if node in self.placed: return
    if node.op is Ops.RANGE: self.place(node.src[0])  # the loop bound comes first
    self.program.append(node)
    self.placed.add(node)

  def emit_reductions(self, accs: list[UOp], open_ranges: frozenset[UOp]) -> None:
    reds = [self.reductions[a] for a in accs]
    ranges = sorted(reds[0].ranges, key=lambda r: r.arg[0])
    # hoist what does not depend on these loops
    self.emit_scope([v for red in reds for v in red.values], open_ranges)
    for acc in accs:
      self.emit_scope(acc.src, open_ranges)
      self.place(acc)
    for rng in ranges: self.place(rng)
    inner = open_ranges | frozenset(ranges)
    # appended, not placed: an unrolled reduction may add the same value several times. Interleaved
    # across the accumulators, so independent updates stand next to each other; each update's operands
    # are computed just before it, so a register tile keeps few operands live at once (the C compiler
    # allocates registers mostly in source order)
    for i in range(max(len(red.values) for red in reds)):
      for acc, red in zip(accs, reds):
        if i >= len(red.values): continue
        self.emit_scope([red.values[i]], inner)
        self.program.append(UOp(Ops.ASSIGN, None, (acc, red.values[i]), red.op))
    for rng in reversed(ranges): self.program.append(UOp(Ops.ENDRANGE, None, (rng,)))


def linearize(ast: UOp) -> list[UOp]:
  """Flatten a kernel SINK into a program list (see the module docstring)."""
  ast, reductions = _accumulators(ast)
  lin = _Linearizer(reductions)
  nodes = toposort([ast])
  outer = [u for u in nodes if u.op is Ops.RANGE and u in lin.deps(ast) and u.kind is not AxisType.LOOP]
  outer.sort(key=lambda r: (r.kind is not AxisType.THREAD, r.arg[0]))
  # each output loop opens after the work that does not depend on it or on a loop inside it (loop-invariant
  # code motion: Adam's bias correction is computed once, not per element). A THREAD loop opens first:
  # its body is what runs on each worker
  by_loops: dict[frozenset[UOp], list[UOp]] = {}
  for store in ast.src: by_loops.setdefault(lin.deps(store) - frozenset(outer), []).append(store)
  # a scatter reads its output after its copy loop wrote it: such reads wait for the stores below
  lin.unwritten = frozenset(store.src[0] for loops, stores in by_loops.items() if loops for store in stores)
  work = [u for u in nodes if u.op is not Ops.STORE and u.op is not Ops.SINK]
  opened: frozenset[UOp] = frozenset()
  for rng in outer:
    if rng.kind is not AxisType.THREAD: lin.emit_scope(work, opened)
    lin.place(rng)
    opened |= {rng}
  # every load the stores need (outside sequential loops) before the first store: a tile that does not
  # divide its axis stores its last element more than once (opts.py), and an in-place update must read
  # the old value each time
  lin.emit_scope([u for u in nodes if u.op is Ops.LOAD], frozenset(outer))
  # the stores by their sequential loops (AxisType.LOOP), in order of first appearance: one loop nest per
  # set of loops (a complex value's two stores share theirs), each closed before the next one opens
  lin.unwritten = frozenset()
  for loops, stores in by_loops.items():
    ordered = sorted(loops, key=lambda r: r.arg[0])
    for rng in ordered: lin.place(rng)
    lin.emit_scope(stores, frozenset(outer) | loops)
    for rng in reversed(ordered): lin.program.append(UOp(Ops.ENDRANGE, None, (rng,)))
  for rng in reversed(outer): lin.program.append(UOp(Ops.ENDRANGE, None, (rng,)))
  return [u for u in lin.program if u.op is not Ops.SINK]
