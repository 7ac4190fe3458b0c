"""The cross-process step of a collective: an MPI allreduce or allgather (tgfn/distributed.py) as a HOST
node (tgfn/ops/host.py), so it is one item of the schedule, run when its operand is computed, and a
graph holding it can be realized, or jitted, like any other.

Derivatives (grad of a whole multi-process pmap, which differentiates its unrolled graph): every process
differentiates its own result, and the derivative is that of the sum of the processes' results, as for
the members of one process. So the transpose of a sum allreduce is a sum allreduce of the cotangents;
of a max/min allreduce, that sum shared among the processes holding the extremum; of an allgather, the
sum allreduce of the cotangents of which each process keeps its own block (a psum_scatter). Every
process runs the same backward pass, so their MPI calls pair up as the forward ones do."""
from __future__ import annotations

from typing import Any

import numpy as np

from tgfn.array import Array
from tgfn.dtype import dtypes
from tgfn.ops.host import HOST_FUNCTIONS, HostFunction, host_call, register


def _allreduce(x: Any, op: str) -> tuple:
  from tgfn.distributed import allreduce
  return (allreduce(x, op),)


def _extremum_share(x: Array, y: Array) -> Array:
  """Where this process holds the max/min, divided by how many processes do (ties share)."""
  hit = (x == y).astype(x.dtype)
  return hit / allreduce_processes(hit, "sum")


def _allreduce_jvp(inputs: list, outputs: list, tangents: list, op: str) -> list:
  if tangents[0] is None: return [None]
  t = tangents[0] if op == "sum" else tangents[0] * _extremum_share(inputs[0], outputs[0])
  return [allreduce_processes(t, "sum")]


def _allreduce_vjp(inputs: list, outputs: list, cts: list, op: str) -> list:
  total = allreduce_processes(cts[0], "sum")
  return [total if op == "sum" else total * _extremum_share(inputs[0], outputs[0])]


register(HostFunction("mpi_allreduce", (0,), _allreduce, lambda cores, op: [()], _allreduce_jvp, _allreduce_vjp,
                     any_dtype=True))


def _allgather_jvp(inputs: list, outputs: list, tangents: list) -> list:
  return [None if tangents[0] is None else host_call(_allgather_function(tangents[0].ndim), [tangents[0]])[0]]


def _allgather_vjp(inputs: list, outputs: list, cts: list) -> list:
  from tgfn.distributed import process_index
  n = inputs[0].shape[0]
  return [allreduce_processes(cts[0], "sum")[process_index() * n:(process_index() + 1) * n]]


def _allgather_function(ndim: int) -> str:
  """The allgather of values of rank `ndim` (a host function's core rank is fixed: one per rank)."""
  name = f"mpi_allgather_{ndim}"
  if name not in HOST_FUNCTIONS:
    from tgfn.distributed import allgather, process_count
    def gather_core(x: Any) -> tuple:  # along the core's first axis, after any batch axes vmap put in front
      front = np.moveaxis(x, x.ndim - ndim, 0)
      return (np.moveaxis(allgather(np.ascontiguousarray(front)), 0, x.ndim - ndim),)
    register(HostFunction(name, (ndim,), gather_core,
                          lambda cores: [(process_count() * cores[0][0],) + tuple(cores[0][1:])], _allgather_jvp,
                          _allgather_vjp, any_dtype=True))
  return name


def allreduce_processes(x: Array, op: str) -> Array:
  """x combined elementwise (op: sum, max, min) over all processes, in x's dtype. A bfloat16 value is held
  on the host as its bits, which MPI would add as integers: it is reduced as float32 (exact for max and
  min; a sum rounded once), as tgfn.distributed.allreduce does for float16."""
  carrier = dtypes.float32 if x.dtype is dtypes.bfloat16 else x.dtype
  return host_call("mpi_allreduce", [x.astype(carrier)], op=op)[0].astype(x.dtype)


def allgather_processes(x: Array, axis: int) -> Array:
  """Every process's x concatenated along `axis`, in process order."""
  import tgfn.numpy as tnp
  if x.ndim == 0: raise ValueError("allgather across processes needs an operand with at least one dimension")
  front = tnp.moveaxis(x, axis, 0)
  return tnp.moveaxis(host_call(_allgather_function(x.ndim), [front])[0], 0, axis)
