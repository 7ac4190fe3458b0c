"""The cross-process step of a collective: an MPI allreduce or allgather (tgfn/distributed.py) as a HOST
node (tgfn/ops/host.py), so it is one item of the schedule, run when its operand is computed, and a
graph holding it can be realized, or jitted, like any other."""
from __future__ import annotations

from typing import Any

from tgfn.array import Array
from tgfn.ops.host import HOST_FUNCTIONS, HostFunction, host_call, register


def _no_derivative(*_: Any, **__: Any) -> list:
  raise NotImplementedError("derivatives through a collective that spans processes: differentiate inside the "
                            "pmap (per-device gradients), then combine them with lax.pmean or lax.psum")


def _allreduce(x: Any, op: str) -> tuple:
  from tgfn.distributed import allreduce
  return (allreduce(x, op),)


register(HostFunction("mpi_allreduce", (0,), _allreduce, lambda cores, op: [()], _no_derivative))


def _allgather_function(ndim: int) -> str:
  """The allgather of values of rank `ndim` (a host function's core rank is fixed: one per rank)."""
  name = f"mpi_allgather_{ndim}"
  if name not in HOST_FUNCTIONS:
    from tgfn.distributed import allgather, process_count
    register(HostFunction(name, (ndim,), lambda x: (allgather(x),),
                          lambda cores: [(process_count() * cores[0][0],) + tuple(cores[0][1:])], _no_derivative))
  return name


def _as_float(x: Array) -> Array:
  return x if x.dtype.is_float else x.astype("float64")  # (host nodes carry floats; ints below 2**53 are exact)


def allreduce_processes(x: Array, op: str) -> Array:
  """x combined elementwise (op: sum, max, min) over all processes."""
  return host_call("mpi_allreduce", [_as_float(x)], op=op)[0].astype(x.dtype)


def allgather_processes(x: Array, axis: int) -> Array:
  """Every process's x concatenated along `axis`, in process order."""
  import tgfn.numpy as tnp
  if x.ndim == 0: raise ValueError("allgather across processes needs an operand with at least one dimension")
  front = tnp.moveaxis(_as_float(x), axis, 0)
  return tnp.moveaxis(host_call(_allgather_function(x.ndim), [front])[0], 0, axis).astype(x.dtype)
