"""Split a tensor-level graph into kernels, and lower each kernel to index arithmetic over loops.

Fusion rule: a node gets its own kernel (a buffer) only when it must:
  - it is an output being realized, CONTIGUOUS, or feeds a COPY;
  - it is a reduction whose result is broadcast (an EXPAND above it, through movement and elementwise
    ops): computing it inside the consumer would redo the whole reduction for every broadcast element;
  - it is a computed value broadcast inside a reduction's loop (the operand of a contraction: random
    draws, an activation's derivative): inlined, it would be recomputed for every multiply-add. A scalar
    is not: it depends on no loop, so codegen computes it once ahead of them (the -1/n of a mean's gradient);
  - it is a costly value that several kernels would each compute (a residual stream summed from many
    buffers, a random draw): see SHARED_CHAIN_WORK.
Everything else -- elementwise chains, movement ops, reductions consumed where they are -- is inlined
into the kernel that needs it. Movement ops never make kernels: they only change index expressions.

Lowering ("rangeify") computes the kernel's output at a symbolic index: one RANGE per output axis.
Each tensor-level op maps an index into its source's index (RESHAPE re-splits a linear index, or keeps
the loop variables when it only adds or drops axes of size 1; PAD adds a validity gate; EXPAND pins
broadcast axes to 0, ...), elementwise ops apply to lowered sources, and REDUCE_AXIS opens fresh RANGEs
for its reduced axes. Realized inputs become gated LOADs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from tgfn.codegen.linearize import reduce_identity
from tgfn.dtype import dtypes
from tgfn.uop.ops import AxisType, GroupOp, Ops, UOp, substitute, toposort, unique_id

_IDX = dtypes.index
# values that arrive in buffers: realized data, and (inside jit) the inputs of the traced function
_INPUTS = (Ops.BUFFER, Ops.PLACEHOLDER)


def strides_for(shape: tuple[int, ...]) -> tuple[int, ...]:
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return tuple(reversed(out))


def linear_index(idx: tuple[UOp, ...], shape: tuple[int, ...]) -> UOp:
  out = UOp.const(_IDX, 0)
  for i, st, n in zip(idx, strides_for(shape), shape):
    if n != 1: out = out + i * st
  return out


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
  """`shape` without its axes of size 1: shapes equal so hold the same elements at the same positions."""
  return tuple(n for n in shape if n != 1)


def _at_axes(loops: tuple[UOp, ...], shape: tuple[int, ...]) -> tuple[UOp, ...]:
  """An index into `shape`: `loops` on its axes longer than 1, in order, and 0 on the others."""
  rest = iter(loops)
  return tuple(UOp.const(_IDX, 0) if n == 1 else next(rest) for n in shape)


def _and(a: Optional[UOp], b: Optional[UOp]) -> Optional[UOp]:
  if a is None: return b
  if b is None: return a
  return a.logical_and(b)


def _computed_base(node: UOp) -> UOp:
  """The value a chain of movement ops moves (what to materialize instead of one of its views)."""
  while node.op in GroupOp.Movement: node = node.src[0]
  return node


def find_realize_points(outs: list[UOp]) -> set[UOp]:
  """The tensor-level nodes that get a buffer of their own (see the module docstring)."""
  nodes = toposort(outs)
  realize = {o for o in outs if o.op not in _INPUTS}
  for n in nodes:
    if n.op is Ops.CONTIGUOUS: realize.add(n)
    if n.op is Ops.COPY: realize.update((n, n.src[0]) if n.src[0].op not in _INPUTS else (n,))
    if n.op is Ops.CALL: realize.update((n, *(s for s in n.src if s.op not in _INPUTS)))  # run by the engine
    if n.op is Ops.HOST: realize.update((n, *(s for s in n.src if s.op not in _INPUTS)))  # a host call reads buffers
    if n.op is Ops.SCATTER: realize.add(n)  # its own kernel: a sequential pass (see lower_scatter)
  parents: dict[UOp, list[UOp]] = {}
  for n in nodes:
    for s in n.src: parents.setdefault(s, []).append(n)
  # consumers first, so whether a node is computed inside a reduction's loop is known when it is reached
  in_reduction: dict[UOp, bool] = {}
  padded: dict[UOp, bool] = {}  # computed inside a reduction's loop, under a PAD's gate
  for n in reversed(nodes):
    in_reduction[n] = any(p.op is Ops.REDUCE_AXIS or (in_reduction[p] and p not in realize) for p in parents.get(n, ()))
    padded[n] = any(p not in realize and ((p.op is Ops.PAD and in_reduction[p]) or padded[p]) for p in parents.get(n, ()))
    # a gate does not skip a loop: a reduction under one would run its loop in full for every padded
    # position of the outer reduction (a strided conv's input gradient did 11x its work so)
    if n.op is Ops.REDUCE_AXIS and padded[n]: realize.add(n)
    if n.op is not Ops.EXPAND or math.prod(n.shape) == math.prod(n.src[0].shape): continue
    stack = [n.src[0]]
    seen: set[UOp] = set()
    while stack:
      x = stack.pop()
      if x in seen or x in realize or x.op in _INPUTS: continue
      seen.add(x)
      if x.op is Ops.REDUCE_AXIS: realize.add(x)
      else: stack.extend(x.src)
    # a computed value broadcast inside a reduction (the operand of a contraction) would be recomputed
    # for every multiply-add: compute it once into a buffer. Not a scalar: it depends on no loop, so codegen
    # computes it once ahead of the loops (its reductions got buffers just above)
    base = _computed_base(n.src[0])
    if in_reduction[n] and base.op not in _INPUTS and math.prod(base.shape) > 1 and _computes(base, realize):
      realize.add(base)
  return _shared_chains_once(_reductions_once(realize))


def _reductions_once(realize: set[UOp]) -> set[UOp]:
  """Give a buffer to every reduction that more than one kernel would compute (each would redo it in full)."""
  while True:
    kernels_of: dict[UOp, int] = {}
    for root in realize:
      for x in _unrealized(root, realize):
        if x.op is Ops.REDUCE_AXIS and x is not root: kernels_of[x] = kernels_of.get(x, 0) + 1
    shared = {x for x, n in kernels_of.items() if n > 1}
    if not shared: return realize
    realize |= shared


# An elementwise value that several kernels would compute gets a buffer of its own when the work they
# would repeat, (kernels - 1) x its cost, reaches SHARED_CHAIN_WORK. Its cost counts each buffer it reads
# (a load, and in a register tile a load per row), each gather (a clamped index, then the load) as
# GATHER_COST, and its ALU ops at a quarter each (cheap to redo in registers, but each is C that every
# kernel repeats). A transformer's residual stream (the sum of every block's output before it) was
# recomputed from 17 buffers in each of the ~20 kernels that read it, half of the step's C; a normal sample
# (threefry and erfinv, ~1000 ops) was drawn twice in a VAE, for z and for z's gradient. A short chain (a
# bias and an activation, softmax's exp) stays inlined: recomputing it costs less than a store and a load
SHARED_CHAIN_WORK = 16
GATHER_COST = 4


def _shared_chains_once(realize: set[UOp]) -> set[UOp]:
  """Give a buffer to every elementwise value that several kernels would recompute at a cost (above); of
  nested ones the outermost first (once it has a buffer, what it is computed from often has one reader)."""
  while True:
    kernels_of: dict[UOp, int] = {}
    for root in realize:
      for x in _unrealized(root, realize):
        if x is not root and (x.op in GroupOp.ALU or x.op is Ops.GATHER): kernels_of[x] = kernels_of.get(x, 0) + 1
    shared = {x for x, n in kernels_of.items()
              if n > 1 and math.prod(x.shape) > 1 and (n - 1) * _cost(x, realize) >= SHARED_CHAIN_WORK}
    inner = {y for x in shared for y in _unrealized(x, realize) if y is not x}
    outermost = shared - inner
    if not outermost: return realize
    realize |= outermost


def _cost(node: UOp, realize: set[UOp]) -> float:
  """What computing `node` inside a kernel costs, from realized values and inputs (see SHARED_CHAIN_WORK)."""
  part = _unrealized(node, realize)
  reads = len({s for x in part for s in x.src if s in realize or s.op in _INPUTS})
  gathers = sum(1 for x in part if x.op is Ops.GATHER)
  return reads + GATHER_COST * gathers + 0.25 * sum(1 for x in part if x.op in GroupOp.ALU)


def _unrealized(node: UOp, realize: set[UOp]) -> list[UOp]:
  """`node` and what it is computed from, down to realized values and inputs (one kernel's part)."""
  seen, stack, out = set(), [node], []
  while stack:
    x = stack.pop()
    if x in seen or (x in realize and x is not node) or x.op in _INPUTS: continue
    seen.add(x)
    out.append(x)
    stack.extend(x.src)
  return out


def _computes(node: UOp, realize: set[UOp]) -> bool:
  """Whether `node` does any ALU work of its own (down to realized values and inputs)."""
  return any(x.op in GroupOp.ALU or x.op is Ops.REDUCE_AXIS for x in _unrealized(node, realize))


@dataclass
class LoweredKernel:
  name: str
  ast: UOp                 # SINK(STORE(DEFINE_GLOBAL 0, index, value), STORE(DEFINE_GLOBAL 1, ...), ...)
  buffers: list[UOp]       # tensor-level nodes bound to DEFINE_GLOBAL 0, 1, ...: the outputs first
  params: list[UOp] = field(default_factory=list)  # PARAM nodes bound to DEFINE_VAR 0, 1, ...
  n_outputs: int = 1

  @property
  def outputs(self) -> list[UOp]: return self.buffers[:self.n_outputs]

  @property
  def inputs(self) -> list[UOp]: return self.buffers[self.n_outputs:]


_Key = tuple  # (node, index tuple, gate): one value to lower
_Plan = Union[UOp, tuple[list[_Key], Callable[[list[UOp]], UOp]]]


class _Lowerer:
  """Lowers with an explicit stack, not recursion: elementwise chains can be thousands of ops deep."""
  def __init__(self, roots: list[UOp], realized: set[UOp]):
    self.roots, self.realized = set(roots), realized
    self.buffers: list[UOp] = list(roots)
    self.params: list[UOp] = []
    self.globals: dict[UOp, UOp] = {}
    self.memo: dict[_Key, UOp] = {}
    self.plans: dict[_Key, _Plan] = {}
    self.has_reduce = False

  def global_for(self, node: UOp) -> UOp:
    if node not in self.globals:
      if node not in self.buffers: self.buffers.append(node)
      slot = self.buffers.index(node)
      self.globals[node] = UOp(Ops.DEFINE_GLOBAL, node.dtype, (), slot)
    return self.globals[node]

  def lower(self, node: UOp, idx: tuple[UOp, ...], gate: Optional[UOp]) -> UOp:
    root: _Key = (node, idx, gate)
    stack = [root]
    while stack:
      key = stack[-1]
      if key in self.memo:
        stack.pop()
        continue
      if key not in self.plans: self.plans[key] = self._plan(*key)
      plan = self.plans[key]
      if isinstance(plan, UOp):
        self.memo[key] = plan
        stack.pop()
        continue
      children, combine = plan
      missing = [c for c in children if c not in self.memo]
      if missing:
        stack.extend(missing)
        continue
      self.memo[key] = combine([self.memo[c] for c in children])
      stack.pop()
    return self.memo[root]

  def _plan(self, node: UOp, idx: tuple[UOp, ...], gate: Optional[UOp]) -> _Plan:
    """A leaf's lowered value, or the (node, index, gate) keys to lower first and how to combine them."""
    op, arg = node.op, node.arg
    # the kernel's other outputs are computed in place (grouping.py made sure they are read at this index)
    if (node not in self.roots and node in self.realized) or op in _INPUTS:
      src = (self.global_for(node), linear_index(idx, node.shape)) + ((gate,) if gate is not None else ())
      return UOp(Ops.LOAD, node.dtype, src)
    if op is Ops.CONST: return UOp.const(node.dtype, arg)
    if op is Ops.PARAM:  # a kernel argument: the AST is the same whatever the value
      if node not in self.params: self.params.append(node)
      return UOp(Ops.DEFINE_VAR, node.dtype, (), self.params.index(node))
    if op in (Ops.CONTIGUOUS, Ops.COPY, Ops.DETACH): return [(node.src[0], idx, gate)], lambda v: v[0]
    if op in GroupOp.ALU: return [(s, idx, gate) for s in node.src], lambda v: UOp(op, node.dtype, tuple(v))
    src_shape = node.src[0].shape
    same = lambda v: v[0]  # noqa: E731
    if op is Ops.RESHAPE:
      # adding or dropping axes of size 1 moves no element: the source reads the same loop variables, with
      # no index arithmetic to build (a linear index re-split) and simplify away again
      if squeezed(src_shape) == squeezed(node.shape):
        return [(node.src[0], _at_axes(tuple(i for i, n in zip(idx, node.shape) if n != 1), src_shape), gate)], same
      linear = linear_index(idx, node.shape)
      new = tuple(UOp.const(_IDX, 0) if n == 1 else (linear // st) % n
                  for st, n in zip(strides_for(src_shape), src_shape))
      return [(node.src[0], new, gate)], same
    if op is Ops.PERMUTE:
      new = [None] * len(idx)
      for out_axis, in_axis in enumerate(arg): new[in_axis] = idx[out_axis]
      return [(node.src[0], tuple(new), gate)], same
    if op is Ops.EXPAND:
      new = tuple(UOp.const(_IDX, 0) if s == 1 and n != 1 else i for i, s, n in zip(idx, src_shape, arg))
      return [(node.src[0], new, gate)], same
    if op is Ops.SHRINK:
      return [(node.src[0], tuple(i + start for i, (start, _) in zip(idx, arg)), gate)], same
    if op is Ops.FLIP:
      new = tuple((n - 1) - i if axis in arg else i for axis, (i, n) in enumerate(zip(idx, src_shape)))
      return [(node.src[0], new, gate)], same
    if op is Ops.PAD:
      valid: Optional[UOp] = None
      new = []
      for i, n, (lo, hi) in zip(idx, src_shape, arg):
        if lo: valid = _and(valid, i.lt(lo).ne(True))
        if hi: valid = _and(valid, i.lt(lo + n))
        new.append(i - lo if lo else i)
      if valid is None: return [(node.src[0], tuple(new), gate)], same
      return [(node.src[0], tuple(new), _and(gate, valid))], lambda v: valid.where(v[0], UOp.const(node.dtype, 0))
    if op is Ops.REDUCE_AXIS:
      alu_op, axes = arg
      # nothing to reduce: the identity, and no load of the (empty) source that a zero-trip loop would skip
      if any(src_shape[a] == 0 for a in axes): return UOp.const(node.dtype, reduce_identity(alu_op, node.dtype))
      ranges, new = [], list(idx)
      for axis in axes:
        if src_shape[axis] == 1: continue
        rng = UOp.range(src_shape[axis], unique_id(), AxisType.REDUCE)
        ranges.append(rng)
        new[axis] = rng
      if not ranges: return [(node.src[0], tuple(new), gate)], same
      self.has_reduce = True
      return [(node.src[0], tuple(new), gate)], lambda v: UOp(Ops.REDUCE, node.dtype, (v[0], *ranges), alu_op)
    if op is Ops.GATHER:  # the index first: the read's position along `arg` is the loaded index value
      return [(node.src[1], idx, gate)], lambda v: self._gathered(node, idx, gate, v[0])
    raise NotImplementedError(f"lowering of {op} is not implemented")

  def _gathered(self, node: UOp, idx: tuple[UOp, ...], gate: Optional[UOp], index: UOp) -> UOp:
    """GATHER's source read where `index` (a value computed in the kernel) points along the gather axis,
    clamped into the axis, so no index value reads outside the buffer. min(i, n-1) is written as
    -max(-i, 1-n) so the index's bounds are exactly [0, n-1] and the index arithmetic still simplifies."""
    axis, shape = node.arg, node.src[0].shape
    at = index.cast(_IDX).alu(Ops.MAX, UOp.const(_IDX, 0))
    at = -((-at).alu(Ops.MAX, UOp.const(_IDX, 1 - shape[axis])))
    src_idx = tuple(at if k == axis else UOp.const(_IDX, 0) if n == 1 else i for k, (i, n) in enumerate(zip(idx, shape)))
    return self.lower(node.src[0], src_idx, gate)


def lower_kernel(roots: list[UOp], realized: set[UOp]) -> LoweredKernel:
  """Lower the computation of `roots`, values of one shape (with the other `realized` nodes read from
  buffers), to one kernel AST that stores each of them."""
  if roots[0].op is Ops.SCATTER: return lower_scatter(roots[0], realized)
  lowerer = _Lowerer(roots, realized)
  shape = roots[0].shape
  idx = _at_axes(tuple(UOp.range(n, unique_id(), AxisType.GLOBAL) for n in squeezed(shape)), shape)
  at = linear_index(idx, shape)
  stores = [UOp(Ops.STORE, None, (lowerer.global_for(r), at, lowerer.lower(r, idx, None))) for r in roots]
  return _finish(lowerer, stores, shape, "r" if lowerer.has_reduce else "E", len(roots))


def _unflatten(linear: UOp, shape: tuple[int, ...]) -> tuple[UOp, ...]:
  return tuple(UOp.const(_IDX, 0) if n == 1 else (linear // st) % n for st, n in zip(strides_for(shape), shape))


def lower_scatter(node: UOp, realized: set[UOp]) -> LoweredKernel:
  """A SCATTER's kernel: one loop copies the operand into the output, then a second walks the updates in
  order and combines each into the element its position names. Both are LOOP axes: the second reads what
  the first and its own earlier iterations wrote, so neither may be split, reordered or vectorized.
  A dropped position (outside the output) rewrites the element at a clamped position with its own value."""
  lowerer = _Lowerer([node], realized)
  operand, positions, updates = node.src
  out, n, count = lowerer.global_for(node), math.prod(node.shape), math.prod(updates.shape)
  stores = []
  if n:
    copy = UOp.range(n, unique_id(), AxisType.LOOP)
    stores.append(UOp(Ops.STORE, None, (out, copy, lowerer.lower(operand, _unflatten(copy, node.shape), None))))
  if n and count:
    step = UOp.range(count, unique_id(), AxisType.LOOP)
    idx = _unflatten(step, updates.shape)
    raw = lowerer.lower(positions, idx, None)
    valid = raw.lt(0).ne(True).logical_and(raw.lt(n)) if n <= raw.dtype.max else raw.lt(0).ne(True)
    at = valid.where(raw, UOp.const(raw.dtype, 0)).cast(_IDX).alu(Ops.MAX, UOp.const(_IDX, 0))
    at = -((-at).alu(Ops.MAX, UOp.const(_IDX, 1 - n)))  # [0, n-1] as bounds the index arithmetic knows
    old, update = UOp(Ops.LOAD, node.dtype, (out, at)), lowerer.lower(updates, idx, None)
    new = update if node.arg is None else UOp(node.arg, node.dtype, (old, update))
    stores.append(UOp(Ops.STORE, None, (out, at, valid.where(new, old))))
  return _finish(lowerer, stores, node.shape, "S", 1)


def _finish(lowerer: _Lowerer, stores: list[UOp], shape: tuple[int, ...], prefix: str, n_outputs: int) -> LoweredKernel:
  ast = UOp(Ops.SINK, None, tuple(stores))
  # number the loops 0, 1, 2... so the same computation always gives the same AST (and hits caches)
  ranges = sorted((u for u in toposort([ast]) if u.op is Ops.RANGE), key=lambda r: r.arg[0])
  ast = substitute(ast, {r: r.replace(arg=(i, r.kind)) for i, r in enumerate(ranges)})
  name = "_".join([prefix] + [str(n) for n in shape]) if shape else prefix
  return LoweredKernel(name, ast, lowerer.buffers, lowerer.params, n_outputs)

