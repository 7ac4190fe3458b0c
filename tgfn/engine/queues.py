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
from concurrent.futures import Future
from typing import Callable, Optional, Sequence

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


def run_on_queues(steps: Sequence[tuple[str, Callable[[], None], Sequence[int], Sequence[int]]]) -> None:
  """Run (device, work, slots read, slots written) steps, each on its device's queue, waiting for the
  producers of what it reads on other devices; returns when all are done, raising the first error."""
  producer: dict[int, tuple[str, Future]] = {}
  futures: list[Future] = []
  for device, work, reads, writes in steps:
    waits = [f for s in reads if (p := producer.get(s)) is not None and (f := p[1]) and p[0] != device]
    future = submit(device, work, waits)
    for s in writes: producer[s] = (device, future)
    futures.append(future)
  error: Optional[BaseException] = None
  for f in futures:
    try:
      f.result()
    except BaseException as e:  # noqa: BLE001  (wait for all: none may still write a buffer after we return)
      error = error or e
  if error is not None: raise error
