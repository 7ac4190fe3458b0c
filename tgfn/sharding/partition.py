"""`jit(f, in_shardings=, out_shardings=)`: f traced once on whole-array placeholders, then partitioned:
each node of the graph gets a layout (for each dimension, the mesh axes it is split over) and one block per
device, and the collectives the layouts call for are inserted.

Propagation, node by node in dependency order:
- elementwise ops compute on the layout of their first split operand; a replicated operand is sliced to
  it locally (no communication), an operand split differently is gathered first;
- movement ops carry the layout when they keep a split dimension intact: PERMUTE permutes it, EXPAND
  grows size-1 axes, RESHAPE when the split dimension is the outermost non-1 dimension of a group of
  merged or split dimensions; otherwise the operand is gathered;
- a reduction over unsplit dimensions is local; over a split dimension each device reduces its block
  and the partial results are all-reduced over the mesh axes of that dimension (a psum for a sum):
- anything else (gathers, scans, ...) runs replicated on gathered operands.

So a batch-split MLP (data parallel) computes locally and all-reduces only the gradient sums over the
batch, a column-split weight gives a column-split product with no communication, and a row-split
weight times a column-split activation gives partial products and one all-reduce: the Megatron layer.
The outputs are laid out by out_shardings (resharded when they differ), as ShardedArrays.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional, Sequence

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.sharding.compiled import CompiledMap
from tgfn.sharding.mesh import Mesh, PartitionSpec
from tgfn.sharding.named import NamedSharding, ShardedArray, place, shard, sharding_of
from tgfn.transforms.jit import Lowered
from tgfn.transforms.shard_map import assemble
from tgfn.transforms.spmd import to_device
from tgfn.transforms.trace import flatten_outputs, fn_name, placeholder
from tgfn.tree import broadcast_prefix, flatten, unflatten
from tgfn.uop.body import inline_calls
from tgfn.uop.ops import GroupOp, Ops, UOp, toposort

Layout = tuple[tuple[str, ...], ...]  # per dimension, the mesh axes it is split over


def _spec(layout: Layout) -> PartitionSpec:
  entries = [None if not names else names[0] if len(names) == 1 else names for names in layout]
  while entries and entries[-1] is None: entries.pop()
  return PartitionSpec(*entries)


def _layout(spec: PartitionSpec, ndim: int) -> Layout: return tuple(spec.names(k) for k in range(ndim))


class _Partitioner:
  def __init__(self, mesh: Mesh):
    self.mesh = mesh
    self.n = mesh.size

  def count(self, names: Sequence[str]) -> int: return math.prod(self.mesh.shape[a] for a in names)

  def block_shape(self, shape: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    return tuple(s // self.count(names) for s, names in zip(shape, layout))

  def fits(self, shape: tuple[int, ...], layout: Layout) -> bool:
    return all(s % self.count(names) == 0 for s, names in zip(shape, layout))

  # ---- moving between layouts
  def gather(self, blocks: list[UOp], layout: Layout) -> list[UOp]:
    """Every device gets the whole value (an all-gather)."""
    if not any(layout): return blocks
    spec = _spec(layout)
    return [assemble([Array(b) for b in blocks], spec, self.mesh, dev).uop for dev in self.mesh.device_names]

  def local_slice(self, whole: list[UOp], layout: Layout) -> list[UOp]:
    """From replicated values, each device's block of `layout` (a view: no communication)."""
    if not any(layout): return whole
    out = []
    for d, u in enumerate(whole):
      index = []
      for s, names in zip(u.shape, layout):
        pos, count = self.mesh.index_along(d, names)
        index.append(slice(pos * (s // count), (pos + 1) * (s // count)))
      out.append(Array(u)[tuple(index)].uop)
    return out

  def reshard(self, blocks: list[UOp], layout: Layout, target: Layout) -> list[UOp]:
    if layout == target: return blocks
    return self.local_slice(self.gather(blocks, layout), target)

  def all_reduce(self, partials: list[UOp], names: tuple[str, ...], op: Ops) -> list[UOp]:
    """Combine the partial results of the devices that differ only along `names` (the same order on each)."""
    combine = {Ops.ADD: tnp.add, Ops.MAX: tnp.maximum, Ops.MUL: tnp.multiply}[op]
    out = []
    for d, dev in enumerate(self.mesh.device_names):
      values = [to_device(Array(partials[m]), dev) for m in self.mesh.group(d, names)]
      total = values[0]
      for v in values[1:]: total = combine(total, v).astype(total.dtype)
      out.append(total.uop)
    return out

  # ---- the rules
  def node(self, node: UOp, srcs: list[tuple[Layout, list[UOp]]]) -> tuple[Layout, list[UOp]]:
    op, n = node.op, self.n
    if op in (Ops.BUFFER, Ops.PLACEHOLDER):  # data captured from outside: a copy on each device
      return ((),) * len(node.shape), [to_device(Array(node), dev).uop for dev in self.mesh.device_names]
    if not node.src: return ((),) * len(node.shape), [node] * n
    if op in GroupOp.ALU:
      target = next((lay for lay, _ in srcs if any(lay)), srcs[0][0])
      if not self.fits(node.shape, target): target = ((),) * len(node.shape)
      moved = [self.reshard(b, lay, target) for lay, b in srcs]
      return target, [node.replace(src=tuple(m[d] for m in moved)) for d in range(n)]
    lay, blocks = srcs[0]
    if op in (Ops.DETACH, Ops.CONTIGUOUS):
      return lay, [node.replace(src=(b,)) for b in blocks]
    if op is Ops.PERMUTE:
      return tuple(lay[a] for a in node.arg), [node.replace(src=(b,)) for b in blocks]
    if op is Ops.EXPAND:
      shape = self.block_shape(node.arg, lay)
      return lay, [node.replace(src=(b,), arg=shape) for b in blocks]
    if op is Ops.RESHAPE and (out := self._reshape_layout(node.src[0].shape, node.arg, lay)) is not None:
      shape = self.block_shape(node.arg, out)
      return out, [node.replace(src=(b,), arg=shape) for b in blocks]
    if op is Ops.REDUCE_AXIS:
      reduce_op, axes = node.arg
      split = tuple(a for ax in axes for a in lay[ax])
      local = [node.replace(src=(b,)) for b in blocks]
      out = tuple(() if k in axes else names for k, names in enumerate(lay))
      return out, (self.all_reduce(local, split, reduce_op) if split else local)
    # anything else: on whole operands, replicated
    whole = [self.gather(b, lay) for lay, b in srcs]
    return ((),) * len(node.shape), [node.replace(src=tuple(w[d] for w in whole)) for d in range(n)]

  def _reshape_layout(self, src: tuple[int, ...], dst: tuple[int, ...], lay: Layout) -> Optional[Layout]:
    """The layout after a reshape, when every split dimension is the outermost non-1 dimension of its
    group (input and output dimensions with the same product) and the count divides the group's outermost
    non-1 output dimension; None otherwise."""
    out: list[tuple[str, ...]] = [()] * len(dst)
    i = j = 0
    while i < len(src) or j < len(dst):
      gi, gj, ps, pd = [], [], 1, 1
      while True:
        if i < len(src) and (not gi or ps < pd): gi.append(i); ps *= src[i]; i += 1  # noqa: E702
        elif j < len(dst) and (not gj or pd < ps): gj.append(j); pd *= dst[j]; j += 1  # noqa: E702
        else: break
      split = [k for k in gi if lay[k]]
      if not split: continue
      first_src = next((k for k in gi if src[k] != 1), None)
      first_dst = next((k for k in gj if dst[k] != 1), None)
      if split != [first_src] or first_dst is None or dst[first_dst] % self.count(lay[first_src]): return None
      out[first_dst] = lay[first_src]
    return tuple(out)


def partition(outputs: Sequence[UOp], inputs: dict[UOp, tuple[Layout, list[UOp]]], mesh: Mesh) -> list[tuple[Layout, list[UOp]]]:
  """(layout, per-device blocks) of each output."""
  p = _Partitioner(mesh)
  done: dict[UOp, tuple[Layout, list[UOp]]] = dict(inputs)
  for node in toposort(list(outputs)):
    if node in done: continue
    lay, blocks = p.node(node, [done[s] for s in node.src])
    if not p.fits(node.shape, lay) or any(b.shape != p.block_shape(node.shape, lay) for b in blocks[:1]):
      raise AssertionError(f"partitioning {node.op} gave blocks {blocks[0].shape} for {node.shape} under {lay}")
    done[node] = (lay, blocks)
  return [done[o] for o in outputs]


def _shardings(spec: Any, tree: Any, what: str) -> list[Optional[NamedSharding]]:
  try:
    return broadcast_prefix(spec, tree, is_leaf=lambda s: s is None or isinstance(s, NamedSharding))
  except ValueError as e:
    raise ValueError(f"jit {what} {spec!r} does not match the structure: {e}") from None


def _mesh_of(given: list[Optional[NamedSharding]], out_shardings: Any) -> Mesh:
  meshes = {s.mesh for s in given if s is not None}
  if out_shardings is not None:
    meshes |= {s.mesh for s in flatten(out_shardings, is_leaf=lambda s: isinstance(s, NamedSharding))[0]
               if isinstance(s, NamedSharding)}
  if len(meshes) != 1:
    raise ValueError(f"jit with shardings needs every sharding on one mesh, got {len(meshes)} meshes"
                     + (" (give in_shardings, or sharded arguments)" if not meshes else ""))
  return meshes.pop()


def sharded_jit(f: Callable, in_shardings: Any = None, out_shardings: Any = None) -> Callable:
  """f on sharded inputs, computing where the blocks are (see the module docstring). Every argument is
  first laid out by its sharding (its in_sharding, else its own, else replicated), as device_put would;
  the partitioned call is then compiled once per input structure (tgfn/sharding/compiled.py)."""
  def partitioned(*args: Any) -> Any:  # on arguments laid out by `laid_out`: their blocks are the inputs
    leaves, in_tree = flatten(args)
    mesh = _mesh_of([x.sharding for x in leaves], out_shardings)
    holders = [Array(placeholder(x.shape, x.dtype, None)) for x in leaves]
    inputs = {h.uop: (_layout(x.sharding.spec, x.ndim), [b.uop for b in x.blocks]) for h, x in zip(holders, leaves)}
    outs, out_tree = flatten_outputs(f(*unflatten(in_tree, holders)), fn_name(f))
    # custom-rule calls (tanh, exp, ...) inlined: elementwise, their blocks are computed where they lie
    results = partition(inline_calls([o.uop for o in outs]), inputs, mesh)
    targets = _shardings(out_shardings, unflatten(out_tree, outs), "out_shardings") \
      if out_shardings is not None else [None] * len(outs)
    final = []
    for o, (lay, blocks), target in zip(outs, results, targets):
      want = _layout(target.spec, o.ndim) if target is not None else lay
      if target is not None: target.check(o.shape)
      blocks = _Partitioner(mesh).reshard(blocks, lay, want)
      placed = [place(Array(b), dev) for b, dev in zip(blocks, mesh.device_names)]  # a constant's too
      final.append(ShardedArray(placed, NamedSharding(mesh, _spec(want)), o.shape))
    return unflatten(out_tree, final)

  def laid_out(args: tuple) -> tuple:
    """The arguments as sharded arrays on one mesh."""
    leaves, in_tree = flatten(args)
    arrays = [as_array(x) for x in leaves]
    wanted = _shardings(tuple(in_shardings) if isinstance(in_shardings, list) else in_shardings, args, "in_shardings") \
      if in_shardings is not None else [None] * len(arrays)
    given = [w or sharding_of(x) for w, x in zip(wanted, arrays)]
    mesh = _mesh_of(given, out_shardings)
    shardings = [s or NamedSharding(mesh, PartitionSpec()) for s in given]
    return unflatten(in_tree, [x if sharding_of(x) == s else shard(x, s) for x, s in zip(arrays, shardings)])

  compiled = CompiledMap(partitioned, f, "jit", label="sharded")

  @functools.wraps(f)
  def call(*args: Any) -> Any: return compiled(laid_out(args))
  call.lower = lambda *args: Lowered(compiled.graph(laid_out(args)))  # as jit(f).lower: the kernels, not run
  return call
