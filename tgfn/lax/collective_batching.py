"""The batching rule of COLLECTIVE nodes: under `vmap(f, axis_name=name)` a collective over `name` is
array math along the batch axis (every member is a row of the batched value); a collective over another
axis stays a collective, of the batched value, for the transform that binds that axis.

This is also the reference the per-device lowering of shard_map and pmap is tested against."""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

import tgfn.numpy as tnp
from tgfn.array import Array
from tgfn.lax.collectives import Collective
from tgfn.uop.ops import Ops, UOp

_batching: list[Optional[str]] = [None]  # the axis name of the vmap whose graph is being batched


@contextlib.contextmanager
def batching_axis(name: Optional[str]) -> Iterator[None]:
  _batching.append(name)
  try:
    yield
  finally:
    _batching.pop()


def over_batch_axis(node: UOp) -> bool:
  """Whether `node` is a collective over the axis being batched (it must be rewritten even when its
  operand is not batched: psum of a value shared by every member is size times that value)."""
  return node.op is Ops.COLLECTIVE and _batching[-1] is not None and _batching[-1] in node.arg.axes


def _lead(x: Array, batched: bool, size: int) -> Array:
  return x if batched else x._reshape((1,) + x.shape)._broadcast_to((size,) + x.shape)


def _every_member(x: Array, size: int) -> Array:
  """One value, the same for each of `size` members: the batch axis in front."""
  return x._reshape((1,) + x.shape)._broadcast_to((size,) + x.shape)


def _split(x: Array, dim: int, size: int) -> Array:
  """Axis `dim` of x cut into (size, dim // size)."""
  return x._reshape(x.shape[:dim] + (size, x.shape[dim] // size) + x.shape[dim + 1:])


def _merge(x: Array, dim: int) -> Array:
  """Axes dim and dim + 1 of x as one."""
  return x._reshape(x.shape[:dim] + (x.shape[dim] * x.shape[dim + 1],) + x.shape[dim + 2:])


def _along_batch(spec: Collective, x: Array) -> Array:
  """The collective over the batch axis of x (the members are x's rows)."""
  n, kind = spec.size, spec.kind
  if kind == "psum": return _every_member(x.sum(0), n)
  if kind == "pmax": return _every_member(x.max(0), n)
  if kind == "pmin": return _every_member(x.min(0), n)
  if kind == "all_gather":  # every member: the rows concatenated along the axis
    axis = spec.params[0]
    return _every_member(_merge(tnp.moveaxis(x, 0, axis), axis), n)
  if kind == "psum_scatter":  # member i: block i of the sum
    dim = spec.params[0]
    return tnp.moveaxis(_split(x.sum(0), dim, n), dim, 0)
  if kind == "all_to_all":  # member i: block i (along split) of every row, concatenated along concat
    split, concat = spec.params
    blocks = _split(x, split + 1, n)                     # (source j, ..., block i at split + 1, ...)
    blocks = tnp.moveaxis(blocks, split + 1, 0)          # (i, j, ...rest, with split's chunk in place)
    return _merge(tnp.moveaxis(blocks, 1, concat + 1), concat + 1)
  if kind == "ppermute":
    source_of = {d: s for s, d in spec.params}
    zero = tnp.zeros_like(x[0])
    return tnp.stack([x[source_of[i]] if i in source_of else zero for i in range(n)])
  raise NotImplementedError(f"no batching rule for the collective {kind}")


def _shifted(spec: Collective, size: int) -> Collective:
  """The same collective of a value with a batch axis in front."""
  params = spec.params if spec.kind in ("psum", "pmax", "pmin", "ppermute") else tuple(p + 1 for p in spec.params)
  return Collective(spec.kind, spec.axes, spec.size, params, (size,) + spec.shape)


def collective_batch(y: UOp, srcs: Sequence[tuple[Array, bool]], size: int) -> Array:
  spec = y.arg
  if not over_batch_axis(y):
    (x, batched), = srcs
    return Array(UOp(Ops.COLLECTIVE, y.dtype, (_lead(x, batched, size).uop,), _shifted(spec, size)))
  if spec.axes != (_batching[-1],):
    raise NotImplementedError(f"a collective over the axes {spec.axes} under vmap(axis_name={_batching[-1]!r}): "
                              "vmap batches collectives over its own axis alone")
  if spec.size != size: raise AssertionError(f"axis size {spec.size} but vmap batches {size}")
  if spec.kind == "axis_index": return tnp.arange(size, dtype=y.dtype)
  (x, batched), = srcs
  return _along_batch(spec, _lead(x, batched, size))
