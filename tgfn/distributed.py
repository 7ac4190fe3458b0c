"""Multi-process runs over MPI: `initialize()` joins the job `mpirun` started; then `process_index()` and
`process_count()` say where this process stands, and the collectives of a `pmap` span the processes
(member i of process p is member p * local devices + i of the axis): each process combines its own
devices' values, then one MPI allreduce or allgather combines the processes (tgfn/transforms/spmd.py).

Every cross-process call first checks that all processes bring the same operation, shape and dtype (a
mismatch is a ValueError on every process), and waits at most TGFN_MPI_TIMEOUT seconds (default 300)
for the others: a process that died or went elsewhere is a TimeoutError, never a hang. MPI comes from
mpi4py (`pip install tgfn[distributed]`) over a system MPI such as Open MPI.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from tgfn.engine.queues import CollectiveTimers
from tgfn.helpers import settings

_state: dict[str, Any] = {"index": 0, "count": 1, "comm": None}


def process_index() -> int:
  """This process's rank in the job (0 when not distributed)."""
  return _state["index"]


def process_count() -> int:
  """How many processes the job has (1 when not distributed)."""
  return _state["count"]


def is_initialized() -> bool: return _state["comm"] is not None


def initialize() -> None:
  """Join the MPI job this process was started in (by mpirun); a single process without mpirun is a
  job of one. Idempotent."""
  if is_initialized(): return
  try:
    from mpi4py import MPI
  except ImportError as e:
    raise ImportError("tgfn.distributed.initialize() needs mpi4py over an MPI library: apt-get install "
                      "openmpi-bin libopenmpi-dev, then pip install 'tgfn[distributed]' (or pip install mpi4py)") from e
  comm = MPI.COMM_WORLD
  _state.update(index=comm.Get_rank(), count=comm.Get_size(), comm=comm)


def _timeout() -> float: return settings.TGFN_MPI_TIMEOUT


def _wait(request: Any, what: str) -> None:
  """Wait for a non-blocking MPI request, at most TGFN_MPI_TIMEOUT seconds."""
  deadline, pause = time.monotonic() + _timeout(), 1e-5
  while not request.Test():
    if time.monotonic() > deadline:
      raise TimeoutError(f"process {process_index()}: {what} waited {_timeout():.0f} s for the other processes of "
                         f"the job ({process_count()}); one may have died or taken another path (TGFN_MPI_TIMEOUT)")
    time.sleep(pause)
    pause = min(pause * 2, 1e-3)  # (a step waits for each allreduce: a long nap would be its latency)


_KINDS = {"sum": 1, "max": 2, "min": 3, "allgather": 4}
_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
           "float64", "complex64", "complex128"]
_MAX_DIMS = 8


def _check_same(kind: str, x: np.ndarray) -> None:
  """Every process must bring the same operation, dtype and shape: compare them all, on all processes."""
  from mpi4py import MPI
  if x.ndim > _MAX_DIMS: raise ValueError(f"cross-process collectives take at most {_MAX_DIMS} dimensions, got {x.shape}")
  mine = np.zeros(3 + _MAX_DIMS, np.int64)
  mine[:3] = (_KINDS[kind], _DTYPES.index(x.dtype.name) if x.dtype.name in _DTYPES else -1, x.ndim)
  mine[3:3 + x.ndim] = x.shape
  everyone = np.zeros((process_count(), mine.size), np.int64)
  _wait(_state["comm"].Iallgather([mine, MPI.INT64_T], [everyone, MPI.INT64_T]), f"checking a {kind}")
  if (everyone != mine).any():
    def describe(row: np.ndarray) -> str:
      kind_name = {v: k for k, v in _KINDS.items()}.get(int(row[0]), "?")
      dtype_name = _DTYPES[int(row[1])] if 0 <= int(row[1]) < len(_DTYPES) else "?"
      return f"{kind_name} of {dtype_name} {tuple(int(n) for n in row[3:3 + int(row[2])])}"
    listing = "; ".join(f"process {p}: {describe(row)}" for p, row in enumerate(everyone))
    raise ValueError(f"the processes disagree on a cross-process collective ({listing}); every process must run "
                     "the same program on values of the same shape and dtype")


def allreduce(x: np.ndarray, op: str) -> np.ndarray:
  """The elementwise sum, max or min of x over all processes (the same on each), in x's dtype."""
  x = np.ascontiguousarray(x)
  if process_count() == 1: return x.copy()
  start = time.perf_counter()
  _check_same(op, x)
  out = _mpi_allreduce(x, op)
  CollectiveTimers.add("mpi", time.perf_counter() - start)
  return out


def _mpi_allreduce(x: np.ndarray, op: str) -> np.ndarray:
  """MPI has no 16-bit floats, so float16 is reduced as float32 (exact for max and min; a sum rounded
  once), and reduces bools only logically: their sum, as within one process, is their OR (the max of
  their bytes)."""
  from mpi4py import MPI
  if x.dtype == np.float16: return _mpi_allreduce(x.astype(np.float32), op).astype(np.float16)
  if x.dtype == np.bool_: return _mpi_allreduce(x.view(np.uint8), "max" if op == "sum" else op).view(np.bool_)
  out = np.empty_like(x)
  _wait(_state["comm"].Iallreduce(x, out, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]), f"an allreduce ({op})")
  return out


def allgather(x: np.ndarray) -> np.ndarray:
  """Every process's x, concatenated along axis 0 in process order."""
  x = np.ascontiguousarray(x)
  if process_count() == 1: return x.copy()
  start = time.perf_counter()
  _check_same("allgather", x)
  # float16, which MPI lacks, travels as its bits
  bits = x.view(np.uint16) if x.dtype == np.float16 else x
  out = np.empty((process_count(),) + x.shape, bits.dtype)
  _wait(_state["comm"].Iallgather(bits, out), "an allgather")
  CollectiveTimers.add("mpi", time.perf_counter() - start)
  out = out.view(x.dtype)
  return out.reshape((process_count() * x.shape[0],) + x.shape[1:]) if x.ndim else out
