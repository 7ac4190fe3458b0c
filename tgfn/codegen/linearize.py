"""Order a kernel AST into a flat program with explicit loops.

The output RANGEs become the outer loops. Every other node is placed in the innermost loop it
depends on, in dependency order. A REDUCE becomes: hoist the parts of its body that do not depend
on its ranges, DEFINE_ACC, open its RANGE loops, compute the body, ASSIGN acc = acc <op> body,
ENDRANGE. After the loops, the REDUCE node itself stands for the accumulator's final value.

The program is a list of UOps:
  RANGE      opens a loop `for r in range(size)`          ENDRANGE closes it
  DEFINE_ACC declares an accumulator (arg: id of the REDUCE's first RANGE)
  ASSIGN     src (acc, value), arg: ALU op                REDUCE  reads the accumulator
  STORE / LOAD / CONST / DEFINE_GLOBAL / ALU ops          each computes one value
"""
from __future__ import annotations

from tgfn.uop.ops import Ops, UOp, toposort

REDUCE_IDENTITY = {Ops.ADD: 0, Ops.MUL: 1}


def reduce_identity(op: Ops, dtype) -> object:
  if op is Ops.MAX: return dtype.min
  return REDUCE_IDENTITY[op]


class _Linearizer:
  def __init__(self) -> None:
    self.program: list[UOp] = []
    self.placed: set[UOp] = set()
    self._deps: dict[UOp, frozenset[UOp]] = {}

  def deps(self, root: UOp) -> frozenset[UOp]:
    """The RANGEs whose loops must be open to compute `root`."""
    if root in self._deps: return self._deps[root]
    for u in toposort([root]):
      if u in self._deps: continue
      if u.op is Ops.RANGE: self._deps[u] = frozenset({u})
      else:
        out = frozenset().union(*(self._deps[s] for s in u.src))
        self._deps[u] = out - frozenset(u.src[1:]) if u.op is Ops.REDUCE else out
    return self._deps[root]

  def emit_scope(self, root: UOp, open_ranges: frozenset[UOp]) -> None:
    for node in toposort([root]):
      if node in self.placed or node.op is Ops.RANGE or not self.deps(node) <= open_ranges: continue
      if node.op is Ops.REDUCE: self.emit_reduce(node, open_ranges)
      else: self.place(node)

  def place(self, node: UOp) -> None:
    if node in self.placed: return
    if node.op is Ops.RANGE: self.place(node.src[0])  # the loop bound comes first
    self.program.append(node)
    self.placed.add(node)

  def emit_reduce(self, red: UOp, open_ranges: frozenset[UOp]) -> None:
    value, ranges = red.src[0], red.src[1:]
    self.emit_scope(value, open_ranges)  # hoist what does not depend on this reduction's loops
    acc = UOp(Ops.DEFINE_ACC, red.dtype, (UOp.const(red.dtype, reduce_identity(red.arg, red.dtype)),),
              ranges[0].arg)
    self.place(acc.src[0])
    self.place(acc)
    for rng in ranges: self.place(rng)
    self.emit_scope(value, open_ranges | frozenset(ranges))
    self.place(UOp(Ops.ASSIGN, None, (acc, value), red.arg))
    for rng in reversed(ranges): self.place(UOp(Ops.ENDRANGE, None, (rng,)))
    self.place(red)


def linearize(ast: UOp) -> list[UOp]:
  """Flatten a kernel SINK into a program list (see the module docstring)."""
  lin = _Linearizer()
  outer = sorted((u for u in toposort([ast]) if u.op is Ops.RANGE and u in lin.deps(ast)), key=lambda r: r.arg)
  for rng in outer: lin.place(rng)
  lin.emit_scope(ast, frozenset(outer))
  for rng in reversed(outer): lin.place(UOp(Ops.ENDRANGE, None, (rng,)))
  return [u for u in lin.program if u.op is not Ops.SINK]
