"""BEAM=n: choose a kernel's opt list by timing real runs instead of trusting the heuristic.

The search starts from the heuristic's opt list (tgfn/codegen/heuristic.py) and its neighbours: the list
with one opt left out, or with one UPCAST or UNROLL by another amount (another register tile shape, a
deeper unroll, a BLOCK of another length). Each round extends every member of the beam by one opt -- UPCAST
or UNROLL by an amount that divides the axis (or an UPCAST whose ragged last tile wastes little), VECTOR at
the renderer's width, THREAD, SWAP of two output loops, BLOCK of an output loop into 2 to 8 blocks -- on
every axis where it fits, compiles the candidates (at most MAX_CANDIDATES a round), and runs each on
scratch buffers of the kernel's shapes filled with random data (never the caller's buffers: a kernel may
write in place). A candidate whose output differs from the heuristic's on the same inputs (beyond the float
policy's reordering, exactly for integers) is dropped, so the search can make a kernel slower to find but
never wrong. The n fastest (median of a few runs) form the next beam; the search stops when a round
finds nothing faster. The winner is timed once more against the heuristic, interleaved, and kept only if
it is still faster by CONFIRM_GAIN (a draw keeps the heuristic).

Winners are cached on disk (`<cache dir>/beam/`) per kernel AST, device, machine identity (the compiler's
cache key: compiler, flags and the instruction set -march=native means) and beam width, so a second run
with the same BEAM times nothing. Entries carry a hash of their payload; a corrupt one is rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional

import numpy as np

from tgfn.codegen.opts import VECTOR_DTYPES, Opt, OptError, OptOps, apply_opt, apply_opts, kernel_axes
from tgfn.codegen.heuristic import RAGGED_WASTE
from tgfn.codegen.pipeline import default_opts, optimize, takes_opts
from tgfn.codegen.policy import strict_float
from tgfn.device import Buffer, Compiled, Device, cache_dir, warn_once, write_atomic
from tgfn.dtype import DType, dtypes
from tgfn.helpers import settings
from tgfn.tools.process_replay import canonical_ast
from tgfn.uop.ops import AxisType, Ops, UOp, toposort

if TYPE_CHECKING:
  from tgfn.schedule.kernelize import LoweredKernel

SEARCH_VERSION = 6           # part of the cache key: bump it when the search or the action space changes
MAX_CANDIDATES = 30          # candidates compiled and timed per round
MAX_ROUNDS = 8
MIN_GAIN = 0.01              # a round must beat the best time by this fraction to go on
# the winner replaces the heuristic only when it is this much faster, timed against it alternately
# CONFIRM_ROUNDS times: winners confirmed by any margin read at or below the heuristic inside a jitted
# 1024^2 product (177-195 against 178-184 GFLOP/s in three benchmark runs), a draw won by noise
CONFIRM_GAIN, CONFIRM_ROUNDS = 0.03, 5
UPCAST_AMOUNTS = (2, 3, 4, 6, 8)
UNROLL_AMOUNTS = (2, 4, 8)
BLOCK_COUNTS = (2, 4, 6, 8)  # an output loop cut into this many blocks (BLOCK, a ragged last one allowed)
_MAGIC = b"TGFNBEAM1"


class SearchCounters:
  """Running totals, for tests: searches done, cache hits, and candidate kernel runs (checks and timings)."""
  searches = 0
  cache_hits = 0
  runs = 0


# a width set for one compile (tgfn.jit(f, beam=n)), over BEAM=
_width_override: ContextVar[Optional[int]] = ContextVar("beam_width", default=None)


def beam_width() -> int:
  """The beam width, 0 (the default) when the search is off: `beam=` of the jitted function being
  compiled, else BEAM=n (read at each compile)."""
  if (width := _width_override.get()) is not None: return width
  text = settings.BEAM.strip() or "0"
  if not text.isdigit(): raise ValueError(f"BEAM= must be a beam width, a whole number >= 0 (0: off); got {text!r}")
  return int(text)


@contextmanager
def beam(width: Optional[int]) -> Iterator[None]:
  """Compile with beam width `width` inside the block (None: as BEAM= says)."""
  if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 0):
    raise ValueError(f"beam must be a beam width, a whole number >= 0 (0: off); got {width!r}")
  token = _width_override.set(width)
  try:
    yield
  finally:
    _width_override.reset(token)


def searched_opts(kernel: LoweredKernel, ast: UOp, device: str) -> list[Opt]:
  """The opt list for `ast` (`kernel` after the scalar passes) on `device` under BEAM: read from the disk
  cache, else searched and cached. The heuristic's list where there is nothing to search: BEAM off, a
  renderer without opts (the PYTHON reference), NOOPT=1, an empty kernel, or addresses that depend on
  loaded data (random inputs could send them out of bounds)."""
  dev = Device[device]
  heuristic = default_opts(ast, dev.renderer)
  width = beam_width()
  if not width or not takes_opts(dev.renderer) or not _searchable(ast, kernel): return heuristic
  key = cache_key(ast, device, width)
  if (hit := _read_entry(key, ast)) is not None:
    SearchCounters.cache_hits += 1
    return hit
  opts = _Search(kernel, ast, dev, heuristic, width).run()
  _write_entry(key, opts)
  return opts


def machine_identity(device: str) -> str:
  """What a timing depends on besides the kernel: the compiler's cache key (for the CPU driver: the
  compiler, its flags and the instruction set -march=native selects)."""
  return getattr(Device[device].compiler, "cachekey", "")


def cache_key(ast: UOp, device: str, width: int) -> str:
  parts = (f"v{SEARCH_VERSION}", device, machine_identity(device), f"strict:{strict_float()}", f"beam:{width}",
           canonical_ast(ast))
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _searchable(ast: UOp, kernel: LoweredKernel) -> bool:
  nodes = toposort([ast])
  if any(u.op is Ops.RANGE and u.size == 0 for u in nodes) or any(0 in b.shape for b in kernel.buffers): return False
  # the candidates are checked on the first output with buffers only: a kernel storing several outputs, or
  # taking scalar parameters (eager Python scalars; jitted kernels have none), keeps the heuristic's opts
  if kernel.n_outputs > 1 or kernel.params: return False
  # an index or gate computed from loaded values: random data could address memory out of bounds
  addresses = [x for u in nodes if u.op in (Ops.LOAD, Ops.STORE) for x in (u.src[1:] if u.op is Ops.LOAD else u.src[1:2])]
  return not any(s.op is Ops.LOAD for s in toposort(addresses))


# ---------------------------------------------------------------------------------------- disk cache

def _entry_path(key: str) -> Path:
  return cache_dir() / "beam" / key[:2] / key


def _read_entry(key: str, ast: UOp) -> Optional[list[Opt]]:
  """The cached opt list, or None: missing, unreadable, corrupt (payload hash), or not applicable."""
  try:
    blob = _entry_path(key).read_bytes()
  except OSError:
    return None
  head, digest, payload = blob[:len(_MAGIC)], blob[len(_MAGIC):len(_MAGIC) + 32], blob[len(_MAGIC) + 32:]
  if head != _MAGIC or hashlib.sha256(payload).digest() != digest: return None
  try:
    opts = [Opt(OptOps[op], int(axis), int(amount)) for op, axis, amount in json.loads(payload)["opts"]]
    apply_opts(ast, opts)
  except (ValueError, KeyError, TypeError, OptError):
    return None
  return opts


def _write_entry(key: str, opts: list[Opt]) -> None:
  payload = json.dumps({"opts": [[o.op.name, o.axis, o.amount] for o in opts]}).encode()
  try:
    path = _entry_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, _MAGIC + hashlib.sha256(payload).digest() + payload)
  except OSError as e:
    warn_once("beam-cache", f"cannot write the BEAM search cache ({e}); searched kernels are remembered in this "
                            f"process only. Set TGFN_CACHE_DIR to a writable folder to keep them.")


# -------------------------------------------------------------------------------------------- search

def _random_values(dtype: DType, size: int, rng: np.random.Generator) -> np.ndarray:
  if dtype is dtypes.bfloat16:  # its uint16 bits: the top half of a float32
    return (rng.standard_normal(size).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
  if dtype is dtypes.bool: return rng.integers(0, 2, size).astype(np.bool_)
  if dtype.is_float: return rng.standard_normal(size).astype(dtype.np)
  return rng.integers(0 if dtype.np.kind == "u" else -50, 51, size).astype(dtype.np)


def _as_float(values: np.ndarray, dtype: DType) -> np.ndarray:
  if dtype is dtypes.bfloat16: return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
  return values.astype(np.float64)


def outputs_match(got: np.ndarray, want: np.ndarray, dtype: DType) -> bool:
  """Whether a candidate's output `got` equals the heuristic's `want`: exactly for integers and bools;
  for floats within what the float policy's reorderings (blocked and vector partial sums, FMA) change --
  a few roundings of the output dtype, plus 1e-4 (1e-12 in float64) of the largest magnitude for sums
  accumulated in another order. NaN and infinities must sit in the same places."""
  if not dtype.is_float: return bool(np.array_equal(got, want))
  g, w = _as_float(got, dtype), _as_float(want, dtype)
  finite = np.isfinite(w)
  scale = float(np.abs(w[finite]).max()) if finite.any() else 0.0
  eps = 2.0 ** -7 if dtype is dtypes.bfloat16 else float(np.finfo(dtype.np).eps)
  atol = (1e-12 if dtype is dtypes.float64 else 1e-4) * scale
  return bool(np.allclose(g, w, rtol=4 * eps, atol=atol, equal_nan=True))


def clearly_faster(candidate: list[float], heuristic: list[float]) -> bool:
  """Whether the candidate's median time beats the heuristic's by CONFIRM_GAIN."""
  return statistics.median(candidate) < (1 - CONFIRM_GAIN) * statistics.median(heuristic)


def _fmt(seconds: float) -> str:
  return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


class _Search:
  def __init__(self, kernel: LoweredKernel, ast: UOp, dev: Compiled, heuristic: list[Opt], width: int):
    self.kernel, self.ast, self.dev, self.heuristic, self.width = kernel, ast, dev, heuristic, width
    rng = np.random.default_rng(0)
    self.dtypes = [b.dtype for b in kernel.buffers]
    self.buffers = [Buffer(dev.name, int(np.prod(b.shape)), b.dtype) for b in kernel.buffers]
    self.first_out = _random_values(self.dtypes[0], self.buffers[0].size, rng)
    for buf, dtype in zip(self.buffers[1:], self.dtypes[1:]): buf.copyin(_random_values(dtype, buf.size, rng))
    self.args = [b.arg for b in self.buffers]
    self.vector_width = self.dev.renderer.vector_bytes // max(d.itemsize for d in self.dtypes)
    self.reference: Optional[np.ndarray] = None  # the heuristic's output
    self.heuristic_time: Optional[float] = None
    self.seen: set[tuple[Opt, ...]] = set()
    self.shuffle = random.Random(0)
    self.start = time.perf_counter()

  def run(self) -> list[Opt]:
    SearchCounters.searches += 1
    heuristic = self._evaluate([self.heuristic])
    if not heuristic: return self.heuristic  # the heuristic's kernel would not build: nothing to compare with
    # timed again: the first kernel a search runs was measured up to 1.9x slower than the same kernel later
    # (first touches of the scratch buffers, waking the worker threads), which made every candidate look better
    heuristic = self._evaluate([self.heuristic]) or heuristic
    self.heuristic_time = heuristic[0][0]
    beam = sorted(heuristic + self._evaluate(self._neighbours(self.heuristic)), key=lambda r: r[0])[:self.width]
    best, rounds = beam[0][0], 0
    for rounds in range(1, MAX_ROUNDS + 1):
      results = self._evaluate(self._extensions([opts for _, opts in beam]))
      beam = sorted(beam + results, key=lambda r: r[0])[:self.width]
      self._progress(rounds, beam[0], final=False)
      if beam[0][0] > best * (1 - MIN_GAIN): break
      best = beam[0][0]
    winner = beam[0]
    if winner[1] != self.heuristic and not self._confirm(winner[1]): winner = (self.heuristic_time, self.heuristic)
    self._progress(rounds, winner, final=True)
    return winner[1]

  def _neighbours(self, opts: list[Opt]) -> list[list[Opt]]:
    """`opts` with one opt left out, or with one UPCAST or UNROLL by another amount: the heuristic's choices
    varied one at a time (a 4x24 tile for its 6x16, ...); at most MAX_CANDIDATES of them."""
    out = [opts[:i] + opts[i + 1:] for i in range(len(opts))]
    for i, o in enumerate(opts):
      amounts = UPCAST_AMOUNTS if o.op is OptOps.UPCAST else UNROLL_AMOUNTS if o.op is OptOps.UNROLL else ()
      # a block of rows half or twice as long, or two thirds or three halves as long as the heuristic's
      if o.op is OptOps.BLOCK: amounts = tuple(a for a in (o.amount // 2, -(-2 * o.amount // 3), -(-3 * o.amount // 2), 2 * o.amount) if a >= 2)
      out += [opts[:i] + [Opt(o.op, o.axis, a)] + opts[i + 1:] for a in amounts if a != o.amount]
    fresh = []
    for cand in out:
      if tuple(cand) in self.seen: continue
      self.seen.add(tuple(cand))
      try:
        apply_opts(self.ast, cand)
      except OptError:
        continue
      fresh.append(cand)
    self.shuffle.shuffle(fresh)
    return fresh[:MAX_CANDIDATES]

  def _extensions(self, members: list[list[Opt]]) -> list[list[Opt]]:
    """Each member extended by each opt that fits, not tried before; at most MAX_CANDIDATES of them."""
    out = []
    for opts in members:
      applied = self.ast
      for o in opts: applied = apply_opt(applied, o)
      for opt in self._actions(applied):
        cand = opts + [opt]
        if tuple(cand) in self.seen: continue
        try:
          apply_opt(applied, opt)
        except OptError:
          continue
        self.seen.add(tuple(cand))
        out.append(cand)
    self.shuffle.shuffle(out)
    return out[:MAX_CANDIDATES]

  def _actions(self, ast: UOp) -> list[Opt]:
    acts = []
    for i, axis in enumerate(kernel_axes(ast)):
      reduce = axis.kind is AxisType.REDUCE
      amounts = UNROLL_AMOUNTS if reduce else UPCAST_AMOUNTS
      # an output tile may also not divide its axis (the last element repeats) where that wastes little
      acts += [Opt(OptOps.UNROLL if reduce else OptOps.UPCAST, i, a) for a in amounts
               if axis.size % a == 0 or (not reduce and axis.size >= a and -axis.size % a <= RAGGED_WASTE * axis.size)]
      # lanes of a reduction are partial sums: a reordering STRICT_FLOAT=1 forbids
      if self.vector_width > 1 and all(d in VECTOR_DTYPES for d in self.dtypes) and not (reduce and strict_float()):
        acts.append(Opt(OptOps.VECTOR, i, self.vector_width))
      if not reduce: acts.append(Opt(OptOps.THREAD, i))
      if axis.kind in (AxisType.GLOBAL, AxisType.THREAD):
        acts += [Opt(OptOps.BLOCK, i, a) for a in sorted({-(-axis.size // b) for b in BLOCK_COUNTS})
                 if 2 <= a < axis.size and -axis.size % a <= RAGGED_WASTE * axis.size]
    # the nesting of the output loops (which operand stays in cache while the other streams)
    outs = [i for i, axis in enumerate(kernel_axes(ast)) if axis.kind is AxisType.GLOBAL]
    acts += [Opt(OptOps.SWAP, a, b) for a in outs for b in outs if a < b]
    return acts

  def _evaluate(self, candidates: list[list[Opt]]) -> list[tuple[float, list[Opt]]]:
    """(median time, opts) of each candidate that builds and computes what the heuristic's kernel does."""
    self.seen.update(tuple(c) for c in candidates)
    sources = []
    for opts in candidates:
      try:
        linear = optimize(self.ast, opts)
      except OptError:
        continue
      sources.append((opts, self.dev.renderer.render(self.kernel.name, linear, self.dtypes)))
    # the C compiler runs in its own process: compile the round in parallel
    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as pool:
      binaries = list(pool.map(lambda s: self._compile(*s), sources))
    results = []
    best = self.heuristic_time
    for (opts, _), binary in zip(sources, binaries):
      if binary is None: continue
      program = self.dev.runtime(self.kernel.name, binary)
      if (first := self._correct(program, opts)) is None: continue
      # a candidate whose checking run alone took 3x the best time is timed by that run (a 2048^2 matmul
      # without its tile runs for seconds)
      t = first if best is not None and first > 3 * best else self._time(program, best)
      best = t if best is None else min(best, t)
      if settings.DEBUG >= 2: print(f"  BEAM {self.kernel.name}: {_fmt(t):>12} {opts}", file=sys.stderr)
      results.append((t, opts))
    return results

  def _compile(self, opts: list[Opt], src: str) -> Optional[bytes]:
    try:
      return self.dev.compiler.compile(src)
    except RuntimeError as e:  # a candidate the C compiler rejects is dropped, not fatal: say so once
      warn_once("beam-compile", f"BEAM: a candidate {opts} for kernel {self.kernel.name} did not compile; "
                                f"skipped ({str(e).splitlines()[0]})")
      return None

  def _correct(self, program: Callable[..., None], opts: list[Opt]) -> Optional[float]:
    """The time of one run of `program` if its output matches the heuristic's, else None."""
    self.buffers[0].copyin(self.first_out)
    t0 = time.perf_counter()
    program(*self.args)
    elapsed = time.perf_counter() - t0
    SearchCounters.runs += 1
    out = self.buffers[0].numpy()
    if self.reference is None:
      self.reference = out
      return elapsed
    if outputs_match(out, self.reference, self.dtypes[0]): return elapsed
    if settings.DEBUG >= 2: print(f"  BEAM {self.kernel.name}: {opts} differs from the heuristic's output: dropped", file=sys.stderr)
    return None

  def _time(self, program: Callable[..., None], best: Optional[float], min_runs: int = 3) -> float:
    """Median of at least `min_runs` runs (up to 10 while under 2 ms in all); a candidate far slower
    than the best so far gets one run."""
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_runs or (len(samples) < 10 and time.perf_counter() - start < 2e-3):
      t0 = time.perf_counter()
      program(*self.args)
      samples.append(time.perf_counter() - t0)
      SearchCounters.runs += 1
      if best is not None and samples[0] > 3 * best: break
    return statistics.median(samples)

  def _confirm(self, opts: list[Opt]) -> bool:
    """Time the winner and the heuristic alternately: timings drift on a shared machine, and a winner
    that was merely lucky must not replace the heuristic."""
    programs = []
    for candidate in (opts, self.heuristic):
      src = self.dev.renderer.render(self.kernel.name, optimize(self.ast, candidate), self.dtypes)
      programs.append(self.dev.runtime(self.kernel.name, self.dev.compiler.compile(src)))
    times: list[list[float]] = [[], []]
    for _ in range(CONFIRM_ROUNDS):
      for i, program in enumerate(programs): times[i].append(self._time(program, None))
    return clearly_faster(times[0], times[1])

  def _progress(self, rnd: int, best: tuple[float, list[Opt]], final: bool) -> None:
    """One line per kernel on stderr (rewritten in place on a terminal)."""
    t, opts = best
    line = (f"BEAM={self.width} {self.kernel.name}: round {rnd}{' (done)' if final else ''}, {len(self.seen)} tried in "
            f"{time.perf_counter() - self.start:.1f} s, best {_fmt(t)} vs heuristic {_fmt(self.heuristic_time)} "
            f"({self.heuristic_time / max(t, 1e-12):.2f}x) {opts}")
    # a search of a long kernel takes minutes: off a terminal, each round gets a line once it takes a while
    tty = sys.stderr.isatty()
    if final: print(("\r\033[K" if tty else "") + line, file=sys.stderr, flush=True)
    elif tty: print("\r\033[K" + line, end="", file=sys.stderr, flush=True)
    elif time.perf_counter() - self.start > 10: print(line, file=sys.stderr, flush=True)

