"""`Mesh` and `PartitionSpec`, as in `jax.sharding`: an n-d grid of devices with named axes, and how each
dimension of an array is split over those axes."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from tgfn.device import Device


class PartitionSpec(tuple):
  """One entry per array dimension (missing trailing entries mean None): None (not split), a mesh axis
  name, or a tuple of names (split over their product, the first name outermost)."""
  def __new__(cls, *entries: Any) -> PartitionSpec:
    for e in entries:
      if not (e is None or isinstance(e, str) or (isinstance(e, tuple) and all(isinstance(n, str) for n in e))):
        raise TypeError(f"PartitionSpec entries are None, a mesh axis name or a tuple of names, got {e!r}")
    return super().__new__(cls, entries)

  def names(self, dim: int) -> tuple[str, ...]:
    """The mesh axes dimension `dim` is split over (none past the spec's length)."""
    e = self[dim] if dim < len(self) else None
    return () if e is None else (e,) if isinstance(e, str) else tuple(e)

  def __repr__(self) -> str: return f"PartitionSpec{tuple.__repr__(self) if len(self) != 1 else f'({self[0]!r})'}"


P = PartitionSpec


def _device_name(d: Any) -> str:
  return Device.canonicalize(d)


class Mesh:
  """`Mesh(devices, axis_names)`: `devices` an n-d array (nested lists or NumPy) of devices
  (`tgfn.devices()` entries or names like "CPU:1"), one axis name per dimension."""
  processes = 1  # a pmap's mesh after tgfn.distributed.initialize(): its one axis spans this many processes

  def __init__(self, devices: Any, axis_names: Sequence[str]):
    grid = np.array(devices, dtype=object)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if grid.ndim != len(names):
      raise ValueError(f"Mesh: {len(names)} axis names {names} for a device grid of {grid.ndim} dimensions {grid.shape}")
    if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
      raise ValueError(f"Mesh axis names must be distinct strings, got {names}")
    self.devices = grid
    self.axis_names = names
    self.device_names = [_device_name(d) for d in grid.reshape(-1)]  # row-major, canonical
    if len(set(self.device_names)) != len(self.device_names):
      raise ValueError(f"Mesh: a device appears twice in {self.device_names}")

  @property
  def shape(self) -> dict[str, int]: return dict(zip(self.axis_names, self.devices.shape))
  @property
  def axis_sizes(self) -> tuple[int, ...]: return tuple(self.devices.shape)
  @property
  def size(self) -> int: return math.prod(self.devices.shape)

  def coords(self, flat: int) -> tuple[int, ...]:
    return tuple(int(c) for c in np.unravel_index(flat, self.axis_sizes)) if self.axis_names else ()

  def index_along(self, flat: int, names: Sequence[str]) -> tuple[int, int]:
    """(position, count): where device `flat` sits along the named axes (row-major in the given order)."""
    c = dict(zip(self.axis_names, self.coords(flat)))
    pos, count = 0, 1
    for n in names:
      pos, count = pos * self.shape[n] + c[n], count * self.shape[n]
    return pos, count

  def group(self, flat: int, names: Sequence[str]) -> list[int]:
    """The devices that differ from device `flat` only along `names`, in row-major order over `names`."""
    c = dict(zip(self.axis_names, self.coords(flat)))
    members = []
    for pos in np.ndindex(*[self.shape[n] for n in names]):
      c.update(zip(names, pos))
      members.append(int(np.ravel_multi_index([c[n] for n in self.axis_names], self.axis_sizes)) if self.axis_names else 0)
    return members

  def check_names(self, names: Sequence[str], what: str) -> None:
    unknown = [n for n in names if n not in self.axis_names]
    if unknown: raise ValueError(f"{what} names mesh axes {unknown}, but the mesh has axes {self.axis_names}")

  def __eq__(self, other: Any) -> bool:
    return isinstance(other, Mesh) and (self.axis_names, self.axis_sizes, self.device_names) == \
      (other.axis_names, other.axis_sizes, other.device_names)
  def __hash__(self) -> int: return hash((self.axis_names, self.axis_sizes, tuple(self.device_names)))
  def __repr__(self) -> str: return f"Mesh({self.shape}, devices={self.device_names})"


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], devices: Optional[Sequence[Any]] = None) -> Mesh:
  """A mesh of the first prod(axis_shapes) devices (default: this process's devices)."""
  from tgfn.instances import local_devices
  pool = list(devices) if devices is not None else local_devices()
  need = math.prod(axis_shapes)
  if need > len(pool):
    raise ValueError(f"a mesh of shape {tuple(axis_shapes)} needs {need} devices, but only {len(pool)} are available "
                     "(set TGFN_CPU_DEVICES=n before starting for n CPU devices)")
  return Mesh(np.array(pool[:need], dtype=object).reshape(tuple(axis_shapes)), axis_names)
