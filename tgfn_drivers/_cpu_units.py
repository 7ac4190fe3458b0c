"""How the CPU driver cuts a batch (a jitted function's kernels) into C units and compiles them while codegen
goes on, each in a compiler process of its own (`CompileJob`).

A compiler process costs ~35 ms of CPU for a one-kernel unit (gcc 12 here: cc1's start and its first function's
backend set-up, then the assembler and the linker) and about 1.2 ms per 1,000 characters of tgfn's simple
code after that, so units are not made small: 40 K characters (UNIT_CHARS) take ~80-100 ms. But the first unit
closes at FIRST_UNIT_CHARS and each next one at twice the size of the one before, up to UNIT_CHARS, so that a
core starts compiling early in codegen instead of idling until 40 K characters are there. What is left when
codegen ends is split over the compiler processes (pieces of TAIL_CHARS or more), so that they finish together
instead of one long unit running alone. A unit holds kernels of one optimization level (the mark their source
starts with).

Once codegen got faster than the compilers (the MLP step: ~130 ms of codegen against ~0.4 CPU-s of gcc on 2
cores), a process's fixed cost mattered more than an early start: its 166 K characters in 4 units (FIRST_UNIT_CHARS
and TAIL_CHARS 20 K) instead of 6 (8 K and 10 K) took 0.92-0.97x the time for its cold first call (medians of
14 alternating fresh processes, twice).

Unit boundaries depend only on the sources and their order, never on timing: a warm process cuts the same
units and finds them in the disk cache.

Compiler processes are started and reaped on the calling thread, between kernels as codegen yields them
(`CompileJob`): a helper thread would wait for the interpreter lock, which codegen holds, at every step of
starting or reaping a process. While codegen runs, at most `jobs - 1` compile (it keeps a core to itself: the
last units wait for it); once it is done, every unit left (up to twice `jobs`).

A compile that is stopped takes its processes with it. The compiler runs in a session (a process group) of
its own under a small sh wrapper (WATCHED_COMPILE): an exception in the caller (KeyboardInterrupt, a timeout,
a failed batch) kills the whole group, the driver and what it started (cc1, as, ld; killing gcc alone left
those running as orphans), and a caller that dies outright (SIGKILL included) closes the writing end of
a pipe (`Lifeline`) that the wrapper watches: it reads end-of-file and kills its group. (PR_SET_PDEATHSIG
was not enough: it reaches only the direct child, not cc1; it fires when the *thread* that started the child
ends, as the tier-up thread may; and it needs a preexec_fn, which makes every start a full fork.)
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from tgfn.helpers import settings
from tgfn_drivers._cpu_tiers import lower_priority

FIRST_UNIT_CHARS = 20_000
UNIT_CHARS = 40_000
TAIL_CHARS = 20_000
# no unit holds more (one kernel larger than this is a unit of its own), whatever TGFN_COMPILE_JOBS says: a
# compiler process's time and memory stay bounded (~0.5 s and a few hundred MB at tgfn's ~1.2 ms per 1,000)
MAX_UNIT_CHARS = 400_000
FINAL_JOBS_PER_JOB = 2


def unit_chars(started: int) -> int:
  """The size at which the next unit closes, after `started` units."""
  return min(UNIT_CHARS, FIRST_UNIT_CHARS << min(started, 16))


def compile_jobs() -> int:
  """Compiler processes a batch may run at once: TGFN_COMPILE_JOBS, else one more than the CPUs this process
  may use. A compiler process is not busy all its life (starting, writing and linking its output), and codegen
  leaves gaps between kernels: with one process more, those gaps are filled and the last units are smaller, so
  they finish closer together (the MLP step's first call, empty cache, 2 CPUs: 0.414 -> 0.383 s, medians of
  8 alternating fresh processes; 4 processes ran as 3). With 1, a batch is one C unit per optimization level,
  compiled once codegen is done."""
  if (value := settings.TGFN_COMPILE_JOBS).strip():
    if not value.strip().isdigit() or int(value) < 1:
      raise ValueError(f"TGFN_COMPILE_JOBS must be a whole number of processes, 1 or more, got {value!r}")
    return int(value)
  return 1 + (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


# sh: $1 the source file, then the compiler's argv. The compiler runs in the background so that a watcher
# beside it can kill the group (`kill -KILL 0`) when the lifeline reads end-of-file; fd {fd} is the lifeline.
WATCHED_COMPILE = ('src=$1; shift; "$@" < "$src" & compiler=$!; (read _ <&{fd}; kill -KILL 0) & watcher=$!; '
                   'wait $compiler; status=$?; kill $watcher 2>/dev/null; exit $status')


class Lifeline:
  """A pipe whose writing end only this process holds (never written, never passed to a child): its reading
  end, which each compile's wrapper watches, reads end-of-file once this process has ended, however it ended.
  A forked child gets a pipe of its own, so that the parent's end does not outlive the parent in it."""
  read_fd, write_fd = os.pipe()

  @classmethod
  def renew(cls) -> None:
    os.close(cls.read_fd)
    os.close(cls.write_fd)
    cls.read_fd, cls.write_fd = os.pipe()


if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=Lifeline.renew)


def _balanced(kernels: list[tuple[str, str]], pieces: int) -> list[list[tuple[str, str]]]:
  """`kernels` cut, in order, into at most `pieces` runs of about equal source size."""
  total, out, size = sum(len(src) for _, src in kernels), [[]], 0
  for kernel in kernels:  # a piece ends before the kernel that lies mostly past its share
    if out[-1] and size + len(kernel[1]) / 2 > total * len(out) / pieces: out.append([])
    out[-1].append(kernel)
    size += len(kernel[1])
  return out


class CompileJob:
  """One C compiler process building a shared object at `out` from `src`.

  The source is a file beside the output (the compiler's standard input) and its messages go to another, so
  starting the process and waiting for it are each one system call: no pipe to feed or drain, and no helper
  thread. A thread that starts or waits for a process beside codegen (which holds the interpreter lock) waits
  for the lock at every step: starting gcc that way took 37 ms instead of 1, and the MLP step's first unit
  compiled in 130 ms instead of 45."""

  def __init__(self, cc: list[str], flags: list[str], link: list[str], src: str, out: Path, background: bool):
    self.src, self.out, self.name = src, out, " ".join(cc)
    self.source_file, self.log_file = out.with_suffix(".c"), out.with_suffix(".log")
    # the compiler's own temporary files go to our folder too, so a killed run leaves them where they are swept
    env = {**os.environ, "TMPDIR": str(out.parent)}
    try:
      self.source_file.write_text(src)
      # read as standard input (from the file, not a pipe): the binary names no source file, so the same
      # source builds the same bytes
      with open(self.log_file, "wb") as log:
        wrapper = ["sh", "-c", WATCHED_COMPILE.format(fd=Lifeline.read_fd), "tgfn-cc", str(self.source_file)]
        self.proc = subprocess.Popen([*wrapper, *cc, *flags, "-x", "c", "-", *link, "-o", str(out)],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                     pass_fds=(Lifeline.read_fd,), start_new_session=True)
    except OSError as e:
      self._remove_files()
      raise RuntimeError(f"could not run the C compiler {self.name!r} ({e}); set CC= to a working C compiler") from e
    if background: lower_priority(self.proc.pid)  # (the wrapper leads its session: its pid is the group's id)

  def done(self) -> bool:
    """Whether the process has exited (its result is ready)."""
    return self.proc.poll() is not None

  def result(self) -> bytes:
    """Wait for the compiler; the shared object, or RuntimeError with what the compiler said."""
    try:
      self._wait()
      said = self.log_file.read_bytes().decode(errors="replace") if self.log_file.is_file() else ""
      if self.proc.returncode != 0:
        raise RuntimeError(f"C compilation failed ({self.name}):\n{said}\n--- source ---\n{self.src}")
      binary = self.out.read_bytes() if self.out.is_file() else b""
    finally:
      self._remove_files()
    if not binary:
      said = said.strip()[:500]
      raise RuntimeError(f"the C compiler {self.name!r} exited successfully but wrote no shared object (expected a "
                         f"kernel .so at -o {self.out}); is CC a C compiler?" + (f" It printed: {said}" if said else ""))
    return binary

  def cancel(self) -> None:
    """Stop the compiler and every process it started (a batch that failed elsewhere no longer needs them)
    and remove its files."""
    if not self.done():
      try:  # (not reaped yet, so the group's id is not reused)
        os.killpg(self.proc.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    self.proc.wait()
    self._remove_files()

  def _wait(self) -> None:
    """Wait for the compiler; interrupted (KeyboardInterrupt, a timeout's exception), stop it first."""
    try:
      self.proc.wait()
    except BaseException:
      self.cancel()
      raise

  def _remove_files(self) -> None:
    for path in (self.out, self.source_file, self.log_file): path.unlink(missing_ok=True)


def wait_for_any(jobs: Sequence[CompileJob]) -> None:
  """Block until at least one of `jobs` has exited: on Linux in one select over process file descriptors,
  elsewhere by polling every millisecond."""
  if any(job.done() for job in jobs): return
  fds = []
  try:
    fds = [os.pidfd_open(job.proc.pid) for job in jobs]
    select.select(fds, [], [])
  except (AttributeError, OSError):  # no pidfd_open (not Linux 5.3+): poll
    while not any(job.done() for job in jobs): time.sleep(1e-3)
  finally:
    for fd in fds: os.close(fd)


@dataclass
class Unit:
  names: list[str]
  source: str                   # what is compiled (a tiered batch's quick build: its quick source)
  optimized: Optional[str]      # a quick-built unit's own source, to rebuild optimized; else None
  job: Any = None               # its CompileJob while compiling
  binary: Optional[bytes] = None


class UnitCompiler:
  """The units of one batch: each found on disk or queued, and compiled `jobs` at a time as `pump` and
  `finish` are called. `compiler` is the driver's (cached, store, start); `quick(src)`: the quick source
  a tiered batch builds first, or None."""

  def __init__(self, compiler: Any, jobs: int, quick: Any):
    self.compiler, self.jobs, self.quick = compiler, jobs, quick
    self.units: list[Unit] = []
    self.queue: deque[Unit] = deque()
    self.running: list[Unit] = []

  def add(self, kernels: list[tuple[str, str]]) -> None:
    """A unit of `kernels`: its binary from disk (a warm process reads its units here), else queued."""
    src = "".join(src for _, src in kernels)
    unit = Unit([name for name, _ in kernels], src, None, binary=self.compiler.cached(src))
    if unit.binary is None and (quick := self.quick(src)) is not None: unit.source, unit.optimized = quick, src
    self.units.append(unit)
    if unit.binary is None: self.queue.append(unit)

  def pump(self, limit: int) -> None:
    """Reap the compilers that are done; start queued units while fewer than `limit` run."""
    for unit in [u for u in self.running if u.job.done()]: self._reap(unit)
    while self.queue and len(self.running) < limit:
      unit = self.queue.popleft()
      unit.job = self.compiler.start(unit.source)
      self.running.append(unit)

  def finish(self) -> list[Unit]:
    """Compile what is left; every unit with its binary. Codegen is over, so a unit no longer waits for a core:
    every one left starts now (at most FINAL_JOBS_PER_JOB x jobs processes, bounding memory) and the system
    shares the cores among them. They finish together instead of a queued one running alone at the end, with
    the other cores idle (the MLP step's first call, empty cache, 2 CPUs: 0.95x the time, medians of 16 and
    10 alternating fresh processes)."""
    while self.queue or self.running:
      self.pump(FINAL_JOBS_PER_JOB * self.jobs)
      if self.running: wait_for_any([u.job for u in self.running])
    return self.units

  def cancel(self) -> None:
    """Stop every compiler still running (the batch failed)."""
    for unit in self.running: unit.job.cancel()
    self.running.clear()

  def _reap(self, unit: Unit) -> None:
    self.running.remove(unit)
    try:
      unit.binary = unit.job.result()
    except RuntimeError as e:  # the compiler's message may name no function (an error outside one): say which
      raise RuntimeError(f"compiling the C unit of kernel(s) {', '.join(unit.names)}: {e}") from e
    if unit.optimized is None: self.compiler.store(unit.source, unit.binary)  # (a quick build is not kept)


def compile_units(kernels: Iterable[tuple[str, str]], compiler: Any, level: Callable[[str], str],
                  quick: Callable[[str, int], Optional[str]]) -> tuple[list[Unit], list[str]]:
  """The units of `kernels` (distinct function names; may be a generator doing codegen), each compiled,
  and the kernels' names in the order given. `level(src)`: a kernel's optimization level; `quick(src,
  batch_chars)`: the quick source of a unit of a tiered batch of `batch_chars` characters so far, or None."""
  jobs, batch_chars = compile_jobs(), 0
  units = UnitCompiler(compiler, jobs, lambda src: quick(src, batch_chars))
  pending: dict[str, list[tuple[str, str]]] = {}  # by level, in the order levels first appear
  sizes: dict[str, int] = {}
  order = []
  try:
    for name, src in kernels:
      order.append(name)
      key = level(src)
      pending.setdefault(key, []).append((name, src))
      sizes[key] = sizes.get(key, 0) + len(src)
      batch_chars += len(src)
      if jobs > 1 and sizes[key] >= unit_chars(len(units.units)):
        units.add(pending[key])
        pending[key], sizes[key] = [], 0
      units.pump(jobs - 1)
    for key, rest in pending.items():
      if rest:  # pieces no smaller than TAIL_CHARS, nor than the largest kernel (which one piece holds anyway)
        largest = max(len(src) for _, src in rest)
        pieces = max(-(-sizes[key] // MAX_UNIT_CHARS), min(jobs, sizes[key] // max(TAIL_CHARS, largest)))
        for piece in _balanced(rest, pieces): units.add(piece)
    return units.finish(), order
  except BaseException:
    units.cancel()
    raise
