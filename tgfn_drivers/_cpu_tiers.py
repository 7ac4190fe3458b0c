"""Tiered compilation for the CPU device (TGFN_TIERED_COMPILE=1; off by default): in a large batch that is not in
the disk cache, the units that compile at -O1 or -O2 (tgfn_drivers/cpu.py) are first built at QUICK_OPT, so the
first call comes sooner, and rebuilt at their own flags on a background thread; each kernel switches to the
optimized build when it is ready, and only the optimized build goes to the disk cache. Simple units compile at
QUICK_OPT anyway (cpu.SIMPLE_OPT), once.

Off by default because it trades total work for latency (measured on the 2-core machine, docs/jit.md, before simple
units were built at -Og): the jitted MLP step's cold first call 1.03 -> 0.86 s, but the main job (a 0.3 s
training run) paid the quick builds' slower steps and the second compile: 2.7-3.1 -> 3.5-4.0 s in all. It suits
interactive work, where the first result matters and the process lives on.

Both builds come from the same C source under the same float flags (no reassociation, -ffp-contract=off), so a
kernel's results are bit-identical before and after the switch.

The rebuild runs one compiler process at a time, at a lower CPU priority, so it takes spare cycles from
the steps that follow rather than slowing them. The interpreter waits for pending rebuilds at exit (the
disk cache then holds the optimized units, and the next process starts warm). `wait()` blocks until every
pending rebuild is swapped in: benchmarks call it before timing.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Optional

from tgfn.device import warn_once
from tgfn.helpers import settings

# gcc's -Og and two passes (why each: SIMPLE_OPT in cpu.py, which is this list)
QUICK_OPT = ["-Og", "-fexpensive-optimizations", "-fmove-loop-invariants"]
QUICK_MARK = "/* tgfn: quick build, replaced by the optimized one */\n"
# a batch smaller than this compiles once, at the usual flags: a small batch compiles quickly anyway, and
# building it twice would only add work (most eager ops and small jitted functions)
TIERED_MIN_CHARS = 40_000
BACKGROUND_NICENESS = 10

_lock = threading.Lock()
_executor: Optional[ThreadPoolExecutor] = None
_pending: list[Future] = []


def enabled() -> bool:
  return settings.TGFN_TIERED_COMPILE


def quick_source(src: str) -> str:
  """The source of a unit's quick build: its own text (and so its own disk cache key) and flags."""
  return QUICK_MARK + src


def is_quick(src: str) -> bool: return src.startswith(QUICK_MARK)


def upgrade_later(build: Callable[[], Any], install: Callable[[Any], None]) -> None:
  """Run `build` (the optimized compile) on the background thread, then `install` its result."""
  global _executor
  with _lock:
    if _executor is None: _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tgfn-tier-up")
    _pending[:] = [f for f in _pending if not f.done()]
    _pending.append(_executor.submit(_run, build, install))


def _run(build: Callable[[], Any], install: Callable[[Any], None]) -> None:
  try:
    install(build())
  except BaseException as e:  # said now, and raised again by wait(): the kernels keep running their quick build
    warn_once("tier-up", f"the optimized rebuild of a quick-built kernel unit failed, its kernels keep the quick "
                         f"build: {e}")
    raise


def wait() -> None:
  """Block until every optimized rebuild started so far is compiled and swapped in; re-raise a failure."""
  with _lock: pending = list(_pending)
  for future in pending: future.result()


def pending() -> int:
  """How many rebuilds are still to finish."""
  with _lock: return sum(not f.done() for f in _pending)


def lower_priority(group: int) -> None:
  """Make a background compiler's process group yield the CPU to the program's own work (the whole group:
  a process it forks later inherits the priority, one it forked already is in the group)."""
  try:
    os.setpriority(os.PRIO_PGRP, group, BACKGROUND_NICENESS)
  except (AttributeError, OSError):  # no setpriority (not POSIX), or the process has already exited
    pass
