"""One queue and one worker thread per device instance, so the kernels of a realization that spans
several devices (the per-device copies of a shard_map, a sharded array's shards) run concurrently.

A queue runs its work in submission order; work that reads a value another device produces first waits
for it. Realizations submit in dependency order, so every wait is for work submitted earlier: there is
no cycle, hence no deadlock. Kernels release the GIL (ctypes), so the workers run in parallel; the CPU
worker pool (tgfn_drivers/_cpu_threads.py) serves one launch at a time and runs a concurrent launch
inline on its caller's thread.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any, Callable, Optional, Sequence

from tgfn.engine.call import BufferView
from tgfn.helpers import settings
from tgfn.viz import debug

_queues: dict[str, queue.SimpleQueue] = {}
_lock = threading.Lock()


def _worker(q: queue.SimpleQueue) -> None:
  while True:
    future, waits, work = q.get()
    try:
      for w in waits: w.result()  # raises the producer's error: this work cannot run without its input
      work()
      future.set_result(None)
    except BaseException as e:  # noqa: BLE001  (handed to the caller through the future)
      future.set_exception(e)


def _queue(device: str) -> queue.SimpleQueue:
  with _lock:
    if (q := _queues.get(device)) is None:
      q = _queues[device] = queue.SimpleQueue()
      threading.Thread(target=_worker, args=(q,), name=f"tgfn-queue-{device}", daemon=True).start()
    return q


def submit(device: str, work: Callable[[], None], waits: Sequence[Future] = ()) -> Future:
  """Run `work` on `device`'s queue after everything submitted to it before, and after `waits`."""
  future: Future = Future()
  _queue(device).put((future, tuple(waits), work))
  return future


class CollectiveTimers:
  """Seconds spent moving collectives' values, summed over calls (read, or reset to 0.0, by benchmarks):
  `copies`, the copies between devices of a replayed multi-device graph (a compiled pmap or shard_map: its
  collectives' values and its inputs' blocks); `mpi`, the cross-process MPI calls, waiting included."""
  copies = 0.0
  mpi = 0.0
  _lock = threading.Lock()

  @classmethod
  def reset(cls) -> None: cls.copies = cls.mpi = 0.0

  @classmethod
  def add(cls, kind: str, seconds: float) -> None:
    with cls._lock: setattr(cls, kind, getattr(cls, kind) + seconds)  # (the device threads add concurrently)


def run_on_queues(steps: Sequence[tuple[str, Callable[[], None], Sequence[int], Sequence[int]]]) -> None:
  """Run (device, work, storage read, storage written) steps, each on its device's queue; returns when all
  are done, raising the first error. A step waits for the work of other devices that last wrote what it
  reads (read after write), and that read or wrote what it writes since (a storage reused later)."""
  producer: dict[int, tuple[str, Future]] = {}
  readers: dict[int, list[tuple[str, Future]]] = {}
  futures: list[Future] = []
  for device, work, reads, writes in steps:
    before = [producer[s] for s in reads if s in producer]
    before += [r for s in writes for r in readers.get(s, []) + ([producer[s]] if s in producer else [])]
    future = submit(device, work, list({id(f): f for d, f in before if d != device}.values()))
    for s in reads: readers.setdefault(s, []).append((device, future))
    for s in writes:
      producer[s] = (device, future)
      readers.pop(s, None)
    futures.append(future)
  error: Optional[BaseException] = None
  for f in futures:
    try:
      f.result()
    except BaseException as e:  # noqa: BLE001  (wait for all: none may still write a buffer after we return)
      error = error or e
  if error is not None: raise error


def _storage(buffer: Any) -> int:
  """Which memory a slot's buffer uses, for ordering the steps: slots that share a buffer, or hold views of
  one block (the plan puts intermediates of other sizes into free blocks as views), are one storage."""
  while isinstance(buffer, BufferView): buffer = buffer.base
  return id(buffer)


def replay_on_queues(graph: Any, inputs: Sequence[Any]) -> list[Any]:
  """Replay a CompiledGraph (tgfn/engine/jit.py) whose steps span several devices, each step on its device's
  queue; its intermediates share buffers, so steps are ordered by the buffers they touch. Returns the
  output buffers."""
  from tgfn.device import Buffer
  buffers: list[Any] = list(inputs) + [None] * (len(graph.slots) - graph.n_inputs)
  for s, buf in graph.fixed.items(): buffers[s] = buf
  for s in dict.fromkeys(graph.output_slots):
    if buffers[s] is None:
      info = graph.slots[s]
      buffers[s] = Buffer(info.device, info.size, info.dtype)
  args = [b.arg if b is not None and b.size else None for b in buffers]

  def work(step: Any) -> Callable[[], None]:
    if step.kernel is not None: return lambda: step.kernel.program(*[args[s] for s in step.slots])
    if step.call is not None: return lambda: step.call([buffers[s] for s in step.slots])

    def copy() -> None:
      start = time.perf_counter()
      buffers[step.slots[0]].copy_from(buffers[step.slots[1]])
      CollectiveTimers.add("copies", time.perf_counter() - start)
    return copy

  from tgfn.engine.realize import Counters
  start = time.perf_counter()
  storage = [_storage(b) for b in buffers]
  launched = [step for step in graph.steps if step.kernel is None or graph.slots[step.slots[0]].size]
  run_on_queues([(graph.slots[step.slots[0]].device, work(step), [storage[s] for s in step.inputs],
                  [storage[s] for s in step.outputs]) for step in launched])
  Counters.kernels_launched += len(launched)
  if settings.DEBUG >= 1:  # (the steps ran, and reported, on the devices' queue threads)
    copies = sum(1 for step in launched if step.kernel is None and step.call is None)
    debug.print_call(f"jit call of {graph.name}", Counter(kernel=len(graph.kernels), copy=copies),
                     time.perf_counter() - start)
  return [buffers[s] for s in graph.output_slots]
