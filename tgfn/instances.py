"""Device objects, as JAX's `jax.devices()` returns them: one per device instance of every process.

A device's `name` is the canonical name arrays carry ("CPU", "CPU:1"); `id` numbers the devices of all
processes (process p's local device i is p * local count + i); `process_index` says which process owns
it. `tgfn.devices()` lists every device of the job, `tgfn.local_devices()` those of this process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tgfn.device import Device, instance_count


@dataclass(frozen=True)
class DeviceInstance:
  id: int
  platform: str        # "cpu"
  local_id: int        # instance number within its process
  process_index: int
  name: str            # the canonical name on its own process: "CPU", "CPU:1"

  @property
  def is_local(self) -> bool:
    from tgfn.distributed import process_index
    return self.process_index == process_index()

  def __str__(self) -> str: return self.name if self.is_local else f"{self.name}@process{self.process_index}"
  def __repr__(self) -> str: return f"{type(self).__name__}(id={self.id}, name={self.name!r}, process={self.process_index})"


def _name(backend: str, i: int) -> str: return backend if i == 0 else f"{backend}:{i}"


def devices(backend: Optional[str] = None) -> list[DeviceInstance]:
  """Every device of `backend` (default: the default device's backend) in every process of the job."""
  from tgfn.distributed import process_count
  base = Device.backend(Device.canonicalize(backend or Device.DEFAULT))
  n = instance_count(base)
  return [DeviceInstance(p * n + i, base.lower(), i, p, _name(base, i)) for p in range(process_count()) for i in range(n)]


def local_devices(backend: Optional[str] = None) -> list[DeviceInstance]:
  """The devices of `backend` this process owns (the ones its arrays can live on)."""
  from tgfn.distributed import process_index
  return [d for d in devices(backend) if d.process_index == process_index()]


def local_device_count(backend: Optional[str] = None) -> int: return len(local_devices(backend))
def device_count(backend: Optional[str] = None) -> int: return len(devices(backend))
