"""Kernel optimizations as data: an `Opt(op, axis, amount)` splits one loop axis of a kernel AST.

The axes of a kernel are its RANGEs of kind GLOBAL (output) or REDUCE, numbered in loop order
(`kernel_axes`). Applying an opt splits axis `r` of size n into `r_outer * amount + r_inner`, where
r_outer keeps r's kind and r_inner takes the opt's kind:

  UPCAST  an output axis: `amount` outputs computed at once (a tile of values and accumulators); an
          amount that does not divide the axis leaves a ragged last tile (the last element repeats)
  UNROLL  a reduction axis: `amount` iterations per trip, accumulated in their original order
  VECTOR  either: the inner part becomes the lanes of a vector (on a reduction axis the lanes are
          partial sums combined at the end -- a reordering the float policy allows)
  THREAD  an output axis (amount 0: the whole axis) whose iterations are split among worker threads
  BLOCK   an output axis (or the THREAD one, whose blocks are then split among the threads): the inner part
          is a plain output loop of `amount` iterations that nests inside every other output loop (its id is
          the kernel's newest): a group of column panels walked innermost, under the rows. An amount that
          does not divide leaves a ragged last block (its extra iterations repeat the axis's last element,
          as UPCAST's do)
  LOCAL   an output axis that becomes the first kernel id on a GPU-style device (OpenCL, CUDA): its
          iterations run as work groups (blocks) of `amount` work items (threads). The axis keeps its
          length in the AST (kind LOCAL, the group size in its arg); the renderer writes the index as
          group id * amount + local id, launches whole groups, and returns past the end where `amount`
          does not divide the axis

An applied opt list fully describes a kernel's schedule, so it can be printed, cached, searched and
replayed. `apply_opts` raises OptError for an opt that does not fit (an amount that does not divide a
reduction or vector axis, or is longer than the axis).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from tgfn.dtype import dtypes
from tgfn.uop.ops import AxisType, Ops, UOp, substitute, toposort

# the element types vector values are made of (the C vector extensions' types, with exact semantics)
VECTOR_DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64)


class OptOps(Enum):
  UPCAST = auto(); UNROLL = auto(); VECTOR = auto(); THREAD = auto(); SWAP = auto(); LOCAL = auto(); BLOCK = auto()  # noqa: E702

  def __repr__(self) -> str: return f"OptOps.{self.name}"


@dataclass(frozen=True)
class Opt:
  op: OptOps
  axis: int
  amount: int = 0

  def __repr__(self) -> str: return f"Opt({self.op.name}, {self.axis}, {self.amount})"


class OptError(ValueError):
  pass


_KIND = {OptOps.UPCAST: AxisType.UPCAST, OptOps.UNROLL: AxisType.UNROLL, OptOps.VECTOR: AxisType.VECTOR, OptOps.BLOCK: AxisType.GLOBAL}
_SPLITTABLE = (AxisType.GLOBAL, AxisType.THREAD, AxisType.LOCAL, AxisType.REDUCE)


def kernel_axes(ast: UOp) -> list[UOp]:
  """The loop axes opts address: output axes (by id), then reduction axes (by id)."""
  ranges = [u for u in toposort([ast]) if u.op is Ops.RANGE and u.kind in _SPLITTABLE]
  return sorted(ranges, key=lambda r: (r.kind is AxisType.REDUCE, r.arg[0]))


def apply_opt(ast: UOp, opt: Opt) -> UOp:
  axes = kernel_axes(ast)
  if not 0 <= opt.axis < len(axes): raise OptError(f"{opt}: the kernel has {len(axes)} axes")
  rng = axes[opt.axis]
  reduce = rng.kind is AxisType.REDUCE
  if opt.op is OptOps.SWAP: return _swap(ast, axes, opt)
  if rng.kind is AxisType.LOCAL: raise OptError(f"{opt}: axis {opt.axis} already runs in work groups (LOCAL)")
  if opt.op is OptOps.LOCAL:
    if rng.kind is not AxisType.GLOBAL: raise OptError(f"{opt}: only an output axis runs in work groups")
    if any(a.kind is AxisType.LOCAL for a in axes): raise OptError(f"{opt}: the kernel already has a LOCAL axis")
    if not 1 <= opt.amount <= rng.size: raise OptError(f"{opt}: a work group of {opt.amount} on an axis of {rng.size}")
    return substitute(ast, {rng: rng.replace(arg=(rng.arg[0], AxisType.LOCAL, opt.amount))})
  if opt.op is OptOps.THREAD:
    if reduce or rng.kind is AxisType.THREAD: raise OptError(f"{opt}: only an output axis can be threaded")
    if any(a.kind is AxisType.THREAD for a in axes): raise OptError(f"{opt}: the kernel is already threaded")
    return substitute(ast, {rng: rng.replace(arg=(rng.arg[0], AxisType.THREAD))})
  if opt.op is OptOps.VECTOR and any(u.op is Ops.DEFINE_GLOBAL and u.dtype not in VECTOR_DTYPES for u in toposort([ast])):
    raise OptError(f"{opt}: vectors hold {', '.join(d.name for d in VECTOR_DTYPES)} only")
  if opt.op is OptOps.VECTOR and any(u.kind is AxisType.VECTOR for u in toposort([ast]) if u.op is Ops.RANGE):
    raise OptError(f"{opt}: the kernel already has a vector axis")
  if opt.op is OptOps.VECTOR and opt.amount & (opt.amount - 1):
    raise OptError(f"{opt}: a vector holds a power of two of lanes")
  if opt.op is OptOps.UPCAST and reduce: raise OptError(f"{opt}: UPCAST needs an output axis (UNROLL a reduction)")
  if opt.op is OptOps.UNROLL and not reduce: raise OptError(f"{opt}: UNROLL needs a reduction axis")
  if opt.op is OptOps.BLOCK and rng.kind not in (AxisType.GLOBAL, AxisType.THREAD):
    raise OptError(f"{opt}: only an output loop is cut into blocks")
  if opt.amount < 2 or rng.size == 0: raise OptError(f"{opt}: {opt.amount} does not split size {rng.size}")
  next_id = 1 + max(u.arg[0] for u in toposort([ast]) if u.op is Ops.RANGE)
  inner = UOp.range(opt.amount, next_id, _KIND[opt.op])
  if rng.size % opt.amount:
    if opt.op not in (OptOps.UPCAST, OptOps.BLOCK) or rng.size < opt.amount: raise OptError(f"{opt}: {opt.amount} does not split size {rng.size}")
    return _ragged_upcast(ast, rng, inner, opt)
  # the outer part stays even when it has one trip, so later opts address the same axis numbers
  outer = UOp.range(rng.size // opt.amount, rng.arg[0], rng.kind)
  return split_range(ast, rng, (outer, inner), outer * opt.amount + inner)


def _ragged_upcast(ast: UOp, rng: UOp, inner: UOp, opt: Opt) -> UOp:
  """UPCAST (or BLOCK) by an amount that does not divide the axis: the axis is rounded up to whole tiles, and
  the last tile's extra elements repeat the axis's last element (index clamped to n-1), computed and stored
  again with the same value. A 6-row matmul tile then fits any number of rows. An in-place update (a
  donated buffer, read only at the element stored) stays right because the linearizer places every load
  before the first store (linearize.py)."""
  n = rng.size
  outer = UOp.range(-(-n // opt.amount), rng.arg[0], rng.kind)
  # min(i, n-1) written as -max(-i, 1-n): the index keeps exact bounds [0, n-1] for the simplifier
  index = -((-(outer * opt.amount + inner)).alu(Ops.MAX, UOp.const(rng.dtype, 1 - n)))
  return split_range(ast, rng, (outer, inner), index)


def _swap(ast: UOp, axes: list[UOp], opt: Opt) -> UOp:
  """Exchange the loop positions of two output axes (`amount` names the other one): loops nest by id, so
  the two ranges trade ids. A matmul walking column panels outside its rows keeps each panel in cache."""
  if not 0 <= opt.amount < len(axes) or opt.amount == opt.axis: raise OptError(f"{opt}: no other axis {opt.amount}")
  a, b = axes[opt.axis], axes[opt.amount]
  if a.kind is not AxisType.GLOBAL or b.kind is not AxisType.GLOBAL: raise OptError(f"{opt}: only output loops swap")
  return substitute(ast, {a: a.replace(arg=(b.arg[0], a.kind)), b: b.replace(arg=(a.arg[0], b.kind))})


def split_range(ast: UOp, rng: UOp, new_ranges: tuple[UOp, ...], index: UOp) -> UOp:
  """Replace loop `rng` by `new_ranges`: uses of its value become `index`, and the REDUCE that closes
  it closes the new ranges instead."""
  closing = {u: u.replace(src=u.reduce_values + tuple(x for r in u.reduce_ranges for x in (new_ranges if r is rng else (r,))))
             for u in toposort([ast]) if u.op is Ops.REDUCE and rng in u.reduce_ranges}
  return substitute(substitute(ast, closing), {rng: index})


def apply_opts(ast: UOp, opts: list[Opt]) -> UOp:
  for opt in opts: ast = apply_opt(ast, opt)
  for rng in [u for u in toposort([ast]) if u.op is Ops.RANGE and u.size == 1]:  # loops of one trip go
    ast = split_range(ast, rng, (), UOp.const(rng.dtype, 0))
  return ast
