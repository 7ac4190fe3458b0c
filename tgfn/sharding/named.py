"""`NamedSharding(mesh, spec)` and arrays laid out by one: each device of the mesh holds its block.

A sharded array is an `Array` (so every operation accepts it) whose blocks live on the mesh's devices:
`x.addressable_shards` lists them, `x.sharding` says how they were cut. Used by ordinary eager code it
reads as the whole array, gathered on the mesh's first device; `jit(f, in_shardings=, out_shardings=)`
(tgfn/sharding/partition.py) instead computes on the blocks where they are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from tgfn.array import Array, as_array
from tgfn.sharding.mesh import Mesh, PartitionSpec


@dataclass(frozen=True)
class NamedSharding:
  mesh: Mesh
  spec: PartitionSpec = PartitionSpec()

  def __post_init__(self) -> None:
    if not isinstance(self.spec, PartitionSpec):
      raise TypeError(f"NamedSharding needs a PartitionSpec, got {type(self.spec).__name__}")
    used = [n for dim in range(len(self.spec)) for n in self.spec.names(dim)]
    self.mesh.check_names(used, f"NamedSharding spec {self.spec}")
    if len(set(used)) != len(used): raise ValueError(f"NamedSharding spec {self.spec} uses a mesh axis twice")

  @property
  def device_set(self) -> set[str]: return set(self.mesh.device_names)

  def counts(self, ndim: int) -> tuple[int, ...]:
    """How many blocks each of `ndim` dimensions is cut into."""
    return tuple(math.prod(self.mesh.shape[n] for n in self.spec.names(k)) for k in range(ndim))

  def shard_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
    self.check(shape)
    return tuple(n // c for n, c in zip(shape, self.counts(len(shape))))

  def check(self, shape: tuple[int, ...]) -> None:
    if len(self.spec) > len(shape):
      raise ValueError(f"sharding {self.spec} has more entries than the array has dimensions {shape}")
    for k, (n, c) in enumerate(zip(shape, self.counts(len(shape)))):
      if n % c: raise ValueError(f"sharding {self.spec}: dimension {k} of shape {shape} ({n}) is not divisible by {c} devices")

  def is_replicated(self) -> bool: return all(not self.spec.names(k) for k in range(len(self.spec)))

  def __repr__(self) -> str: return f"NamedSharding(mesh={self.mesh.shape}, spec={self.spec})"


@dataclass(frozen=True)
class SingleDeviceSharding:
  device: str

  @property
  def device_set(self) -> set[str]: return {self.device}
  def is_replicated(self) -> bool: return True


@dataclass(frozen=True)
class Shard:
  device: str
  index: tuple[slice, ...]   # where this block sits in the whole array
  data: Array


def block_index(sharding: NamedSharding, shape: tuple[int, ...], d: int) -> tuple[slice, ...]:
  """The slices of device d's block (row-major device d of the mesh)."""
  index = []
  for k, n in enumerate(shape):
    pos, count = sharding.mesh.index_along(d, sharding.spec.names(k))
    index.append(slice(pos * (n // count), (pos + 1) * (n // count)))
  return tuple(index)


class ShardedArray(Array):
  """An Array whose value is held as one block per device of a NamedSharding's mesh."""

  def __init__(self, blocks: list[Array], sharding: NamedSharding, shape: tuple[int, ...]):
    from tgfn.transforms.shard_map import assemble
    self._blocks, self._sharding = blocks, sharding
    super().__init__(assemble(blocks, sharding.spec, sharding.mesh).uop)
    if self.uop.shape != tuple(shape): raise AssertionError(f"blocks assemble to {self.uop.shape}, not {shape}")

  @property
  def sharding(self) -> NamedSharding: return self._sharding

  @property
  def addressable_shards(self) -> list[Shard]:
    mesh = self._sharding.mesh
    return [Shard(dev, block_index(self._sharding, self.shape, d), b) for d, (dev, b) in
            enumerate(zip(mesh.device_names, self._blocks))]

  @property
  def blocks(self) -> list[Array]: return self._blocks

  def realize(self) -> ShardedArray:
    Array.realize_all(self._blocks)
    return self

  def block_until_ready(self) -> ShardedArray: return self.realize()


def place(x: Array, device: str) -> Array:
  """x as a block on `device`: copied there when it lives elsewhere, and placed there when it has no device
  yet (a constant's value). A block left without a device would be realized on the default device, and a
  compiled sharded call would bind it there: its device's computation would then read a block committed
  to another device. (A traced value of no device yet, a traced Python scalar, gets one where it is bound.)"""
  from tgfn.array import device_put
  from tgfn.transforms.spmd import to_device
  from tgfn.transforms.trace import is_traced
  if x.uop.device is None and not is_traced(x.uop): return device_put(x, device)
  return to_device(x, device)


def shard(x: Any, sharding: NamedSharding) -> ShardedArray:
  """x laid out by `sharding`: device d of the mesh gets its block (a view of x copied or placed there)."""
  x = as_array(x)
  sharding.check(x.shape)
  blocks = []
  for d, dev in enumerate(sharding.mesh.device_names):
    index = block_index(sharding, x.shape, d)
    part = x[index] if any(s.stop - s.start != n for s, n in zip(index, x.shape)) else x
    blocks.append(place(part, dev))
  return ShardedArray(blocks, sharding, x.shape)


def sharding_of(x: Array) -> Optional[NamedSharding]:
  return x.sharding if isinstance(x, ShardedArray) else None
