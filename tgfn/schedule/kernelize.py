"""Split a tensor-level graph into kernels, and lower each kernel to index arithmetic over loops.

Fusion rule: a node gets its own kernel (a buffer) only when it must:
  - it is an output being realized, CONTIGUOUS, or feeds a COPY;
  - it is a reduction whose result is broadcast (an EXPAND above it, through movement and elementwise
    ops): computing it inside the consumer would redo the whole reduction for every broadcast element.
Everything else -- elementwise chains, movement ops, reductions consumed where they are -- is inlined
into the kernel that needs it. Movement ops never make kernels: they only change index expressions.

Lowering ("rangeify") computes the kernel's output at a symbolic index: one RANGE per output axis.
Each tensor-level op maps an index into its source's index (RESHAPE re-splits a linear index, PAD
adds a validity gate, EXPAND pins broadcast axes to 0, ...), elementwise ops apply to lowered sources,
and REDUCE_AXIS opens fresh RANGEs for its reduced axes. Realized inputs become gated LOADs.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Optional

from tgfn.dtype import dtypes
from tgfn.uop.ops import GroupOp, Ops, UOp, substitute, toposort, unique_id

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


def _and(a: Optional[UOp], b: Optional[UOp]) -> Optional[UOp]:
  if a is None: return b
  if b is None: return a
  return a.logical_and(b)


def find_realize_points(outs: list[UOp]) -> set[UOp]:
  """The tensor-level nodes that get a buffer of their own (see the module docstring)."""
  nodes = toposort(outs)
  realize = {o for o in outs if o.op not in _INPUTS}
  for n in nodes:
    if n.op is Ops.CONTIGUOUS: realize.add(n)
    if n.op is Ops.COPY: realize.update((n, n.src[0]) if n.src[0].op not in _INPUTS else (n,))
  for n in nodes:
    if n.op is Ops.EXPAND and math.prod(n.shape) != math.prod(n.src[0].shape):
      stack = [n.src[0]]
      seen: set[UOp] = set()
      while stack:
        x = stack.pop()
        if x in seen or x in realize or x.op in _INPUTS: continue
        seen.add(x)
        if x.op is Ops.REDUCE_AXIS: realize.add(x)
        else: stack.extend(x.src)
  return realize


@dataclass
class LoweredKernel:
  name: str
  ast: UOp                 # SINK(STORE(DEFINE_GLOBAL 0, index, value))
  buffers: list[UOp]       # tensor-level nodes bound to DEFINE_GLOBAL 0, 1, ...: output first


class _Lowerer:
  def __init__(self, root: UOp, realized: set[UOp]):
    self.root, self.realized = root, realized
    self.buffers: list[UOp] = [root]
    self.globals: dict[UOp, UOp] = {}
    self.memo: dict[tuple, UOp] = {}
    self.has_reduce = False

  def global_for(self, node: UOp) -> UOp:
    if node not in self.globals:
      if node is not self.root and node not in self.buffers: self.buffers.append(node)
      slot = self.buffers.index(node)
      self.globals[node] = UOp(Ops.DEFINE_GLOBAL, node.dtype, (), slot)
    return self.globals[node]

  def lower(self, node: UOp, idx: tuple[UOp, ...], gate: Optional[UOp]) -> UOp:
    key = (node, idx, gate)
    if key not in self.memo: self.memo[key] = self._lower(node, idx, gate)
    return self.memo[key]

  def _lower(self, node: UOp, idx: tuple[UOp, ...], gate: Optional[UOp]) -> UOp:
    op, arg = node.op, node.arg
    if (node is not self.root and node in self.realized) or op in _INPUTS:
      src = (self.global_for(node), linear_index(idx, node.shape)) + ((gate,) if gate is not None else ())
      return UOp(Ops.LOAD, node.dtype, src)
    if op is Ops.CONST: return UOp.const(node.dtype, arg)
    if op in (Ops.CONTIGUOUS, Ops.COPY, Ops.DETACH, Ops.CUSTOM): return self.lower(node.src[0], idx, gate)
    if op in GroupOp.ALU: return UOp(op, node.dtype, tuple(self.lower(s, idx, gate) for s in node.src))
    src_shape = node.src[0].shape
    if op is Ops.RESHAPE:
      linear = linear_index(idx, node.shape)
      new = tuple(UOp.const(_IDX, 0) if n == 1 else (linear // st) % n
                  for st, n in zip(strides_for(src_shape), src_shape))
      return self.lower(node.src[0], new, gate)
    if op is Ops.PERMUTE:
      new = [None] * len(idx)
      for out_axis, in_axis in enumerate(arg): new[in_axis] = idx[out_axis]
      return self.lower(node.src[0], tuple(new), gate)
    if op is Ops.EXPAND:
      new = tuple(UOp.const(_IDX, 0) if s == 1 and n != 1 else i for i, s, n in zip(idx, src_shape, arg))
      return self.lower(node.src[0], new, gate)
    if op is Ops.SHRINK:
      return self.lower(node.src[0], tuple(i + start for i, (start, _) in zip(idx, arg)), gate)
    if op is Ops.FLIP:
      new = tuple((n - 1) - i if axis in arg else i for axis, (i, n) in enumerate(zip(idx, src_shape)))
      return self.lower(node.src[0], new, gate)
    if op is Ops.PAD:
      valid: Optional[UOp] = None
      new = []
      for i, n, (lo, hi) in zip(idx, src_shape, arg):
        if lo: valid = _and(valid, i.lt(lo).ne(True))
        if hi: valid = _and(valid, i.lt(lo + n))
        new.append(i - lo if lo else i)
      inner = self.lower(node.src[0], tuple(new), _and(gate, valid))
      return inner if valid is None else valid.where(inner, UOp.const(node.dtype, 0))
    if op is Ops.REDUCE_AXIS:
      alu_op, axes = arg
      ranges, new = [], list(idx)
      for axis in axes:
        if src_shape[axis] == 1: continue
        rng = UOp(Ops.RANGE, _IDX, (UOp.const(_IDX, src_shape[axis]),), unique_id())
        ranges.append(rng)
        new[axis] = rng
      value = self.lower(node.src[0], tuple(new), gate)
      if not ranges: return value
      self.has_reduce = True
      return UOp(Ops.REDUCE, node.dtype, (value, *ranges), alu_op)
    raise NotImplementedError(f"lowering of {op} is not implemented")


def lower_kernel(root: UOp, realized: set[UOp]) -> LoweredKernel:
  """Lower the computation of `root` (with `realized` nodes read from buffers) to a kernel AST."""
  # lowering recurses once per op in the kernel: allow the depth of long elementwise chains (Python 3.11+
  # calls Python functions without growing the C stack, so a high limit is safe)
  sys.setrecursionlimit(max(sys.getrecursionlimit(), 50_000))
  lowerer = _Lowerer(root, realized)
  shape = root.shape
  idx = tuple(UOp.const(_IDX, 0) if n == 1 else UOp(Ops.RANGE, _IDX, (UOp.const(_IDX, n),), unique_id())
              for n in shape)
  value = lowerer.lower(root, idx, None)
  out = lowerer.global_for(root)
  ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, linear_index(idx, shape), value)),))
  # number the loops 0, 1, 2... so the same computation always gives the same AST (and hits caches)
  ranges = sorted((u for u in toposort([ast]) if u.op is Ops.RANGE), key=lambda r: r.arg)
  ast = substitute(ast, {r: r.replace(arg=i) for i, r in enumerate(ranges)})
  prefix = "r" if lowerer.has_reduce else "E"
  name = "_".join([prefix] + [str(n) for n in shape]) if shape else prefix
  return LoweredKernel(name, ast, lowerer.buffers)

