"""Helpers shared by the benchmark scripts in bench/: environment, peers, timing, tables.

Import this module FIRST in every script (before numpy, tgfn or any peer): on import it removes
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE from the environment. Some machines set them so that old
OpenBLAS builds work; they make a current NumPy pick a slower kernel, which would make NumPy (and
anything else linked to OpenBLAS) look slower than it is. They must be gone before OpenBLAS is loaded,
i.e. before the first `import numpy`; subprocesses started by these scripts inherit the cleaned
environment.

Timing: `time_calls` runs a function `warmup` times untimed, then times each call separately with
`time.perf_counter_ns` and reports the MEDIAN per call, with the 10th and 90th percentiles and the
number of timed calls. Medians, not means: the machines these run on are shared, and a few calls
slowed down by another process should not move the figure.
"""
from __future__ import annotations

import os
import sys

OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if "numpy" in sys.modules:  # too late to change which kernel OpenBLAS picks
  print("bench/common.py: warning: numpy was imported before common; OPENBLAS_* may still be in effect",
        file=sys.stderr)
REMOVED_ENV = {k: os.environ.pop(k) for k in OPENBLAS_VARS if k in os.environ}

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator, Optional, Union  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path: sys.path.insert(0, str(REPO_ROOT))  # tgfn from this checkout


# ---------------------------------------------------------------------------------------------- timing

@dataclass
class Timing:
  """Per-call times in nanoseconds."""
  samples: list[int]

  @property
  def n(self) -> int: return len(self.samples)
  @property
  def median(self) -> float: return float(statistics.median(self.samples))
  def percentile(self, q: float) -> float:
    s = sorted(self.samples)
    if len(s) == 1: return float(s[0])
    pos = q / 100 * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
  @property
  def p10(self) -> float: return self.percentile(10)
  @property
  def p90(self) -> float: return self.percentile(90)

  def merge(self, other: Timing) -> Timing: return Timing(self.samples + other.samples)


def settle() -> None:
  """Before timing: let background compiles finish (tgfn's CPU device runs a large new batch from a quick
  build until the optimized one is ready: tgfn.wait_for_optimized_kernels)."""
  tgfn = sys.modules.get("tgfn")
  if tgfn is not None: tgfn.wait_for_optimized_kernels()


def time_calls(fn: Callable[[], Any], reps: int, warmup: int = 3, max_seconds: Optional[float] = None,
               min_reps: int = 3) -> Timing:
  """Call `fn()` `warmup` times untimed, then up to `reps` times, timing each call on its own. With
  `max_seconds`, stop early once that much time has been spent timing (but after at least `min_reps`
  calls): the Timing says how many calls the median is over."""
  for _ in range(warmup): fn()
  if warmup: settle()
  samples: list[int] = []
  clock = time.perf_counter_ns
  deadline = None if max_seconds is None else clock() + int(max_seconds * 1e9)
  for i in range(reps):
    t0 = clock()
    fn()
    samples.append(clock() - t0)
    if deadline is not None and i + 1 >= min_reps and clock() > deadline: break
  return Timing(samples)


# Idle time before each framework's turn in a round. A BLAS's worker threads keep spinning after a call
# returns, waiting for the next one: OpenBLAS's for ~0.1 s. On a 2-core machine they take a core from
# whoever runs next. Measured on a 2048^2 matmul, medians of 8 calls: tgfn right after NumPy's product
# 140 GFLOP/s, 160 after 50 ms idle, 190-204 after 200 ms (and after its own calls). Without the pause,
# the framework that follows NumPy (or torch) in the round order pays for it.
PAUSE_BETWEEN_FRAMEWORKS = 0.25


def interleave(calls: dict[str, Callable[[], Any]], rounds: int, reps: int, round_seconds: float,
               warmup: int = 1, pause: Optional[float] = None) -> dict[str, Union[Timing, str]]:
  """Time several frameworks side by side: `warmup` untimed calls each (compiles), then `rounds` rounds
  in which every framework in turn makes up to `reps` timed calls (at least 1, stopping once
  `round_seconds` are spent), after `pause` idle seconds (another framework's threads winding down; by
  default PAUSE_BETWEEN_FRAMEWORKS, none for rounds shorter than that: --quick runs, rough figures anyway).
  The samples of all rounds are pooled per framework. Interleaving spreads a slow period of a shared
  machine over all frameworks instead of penalising one. A framework that raises is dropped from later
  rounds; its entry is then the reason (a string)."""
  out: dict[str, Union[Timing, str]] = {}
  live = {}
  for name, fn in calls.items():
    try:
      for _ in range(warmup): fn()
      live[name], out[name] = fn, Timing([])
    except Exception as e:
      out[name] = error_text(e)
  settle()
  if pause is None: pause = PAUSE_BETWEEN_FRAMEWORKS if round_seconds > PAUSE_BETWEEN_FRAMEWORKS else 0.0
  for _ in range(rounds):
    for name, fn in list(live.items()):
      gc.collect()
      if pause and len(live) > 1: time.sleep(pause)
      try:
        out[name] = out[name].merge(time_calls(fn, reps, warmup=0, max_seconds=round_seconds, min_reps=1))
      except Exception as e:
        out[name] = error_text(e)
        del live[name]
  return out


def worker_result(cmd: list[str], env: dict, timeout: float) -> dict:
  """Run a script's measuring subprocess: the last JSON line it printed, or {"skip": why} when it failed or
  did not finish in `timeout` seconds."""
  try:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return {"skip": f"did not finish in {timeout:.0f} s"}
  lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
  if out.returncode or not lines:
    return {"skip": f"worker failed (rc {out.returncode}): {(out.stderr.strip().splitlines() or ['?'])[-1][:200]}"}
  return json.loads(lines[-1])


def jax_persistent_cache(jax: Any, folder: str) -> None:
  """JAX's persistent compilation cache in `folder`, every entry cached (no minimum compile time or size)."""
  for k, v in (("jax_compilation_cache_dir", folder), ("jax_persistent_cache_min_compile_time_secs", 0.0),
               ("jax_persistent_cache_min_entry_size_bytes", 0)):
    jax.config.update(k, v)


def error_text(e: BaseException) -> str:
  first = str(e).splitlines()[0][:200] if str(e) else ""
  return f"{type(e).__name__}: {first}"


# ----------------------------------------------------------------------------------------------- peers

def version_of(dist: str) -> str:
  try: return importlib.metadata.version(dist)
  except importlib.metadata.PackageNotFoundError: return "?"


def _tinygrad_cpu_env() -> str:
  """Make tinygrad's default device the CPU, the way its installed version wants it, BEFORE tinygrad
  is imported (it reads the environment at import). Newer tinygrad (DEV= era) refuses `CPU=1` with an
  assertion and wants `DEV=CPU`; older ones want `CPU=1` (0.10-ish) or `CLANG=1` (before that).
  Returns the setting used. `DEV=CPU` is also tgfn's own default device, so setting it changes nothing
  for tgfn."""
  spec = importlib.util.find_spec("tinygrad")
  locs = list(spec.submodule_search_locations or []) if spec else []
  src, has_cpu_runtime = "", False
  for loc in locs:
    p = Path(loc)
    if (p / "device.py").exists(): src += (p / "device.py").read_text(errors="replace")
    if (p / "helpers.py").exists(): src += (p / "helpers.py").read_text(errors="replace")
    has_cpu_runtime |= (p / "runtime" / "ops_cpu.py").exists()
  if "use DEV=" in src or '_DEV("DEV"' in src:
    for k in ("CPU", "CLANG", "LLVM"): os.environ.pop(k, None)  # would trip the deprecation assert
    os.environ["DEV"] = "CPU"
    return "DEV=CPU"
  if has_cpu_runtime:
    os.environ["CPU"] = "1"
    return "CPU=1"
  os.environ["CLANG"] = "1"
  return "CLANG=1"


def import_peer(name: str) -> tuple[Optional[Any], str]:
  """(module, description) for a peer framework, or (None, reason it is skipped). Never raises."""
  try:
    if name == "numpy":
      import numpy as np
      return np, f"numpy {np.__version__} (BLAS: {numpy_blas()})"
    if name == "jax":
      os.environ.setdefault("JAX_PLATFORMS", "cpu")
      import jax
      return jax, f"jax {jax.__version__} on {jax.devices()[0].platform}"
    if name == "tinygrad":
      if importlib.util.find_spec("tinygrad") is None: return None, "tinygrad is not installed (pip install tinygrad)"
      how = _tinygrad_cpu_env()
      import tinygrad
      from tinygrad import Device
      dev = Device.DEFAULT
      if not dev.upper().startswith(("CPU", "CLANG", "LLVM")):
        return None, f"tinygrad chose device {dev}, not the CPU, despite {how}"
      return tinygrad, f"tinygrad {version_of('tinygrad')} on {dev} ({how})"
    if name == "torch":
      import torch
      return torch, f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    if name == "tgfn":
      import tgfn
      return tgfn, f"tgfn {version_of('tgfn')} on {tgfn.Device.DEFAULT}"
    if name == "optax":
      import optax
      return optax, f"optax {optax.__version__}"
  except Exception as e:  # ImportError, or a broken install: skip it, say why
    return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
  return None, f"unknown peer {name!r}"


def _tgfn_backend(backend: str) -> tuple[Optional[Any], str]:
  """(tgfn, description) when tgfn can run on `backend` here, else (None, why not and what to install)."""
  mod, desc = import_peer("tgfn")
  if mod is None: return None, desc
  known = {b.name: b for b in mod.backends()}
  if backend not in known: return None, f"tgfn has no backend {backend} (it has {', '.join(known)})"
  if not known[backend].available: return None, f"{known[backend].reason}; install: {known[backend].install}"
  return mod, f"tgfn {version_of('tgfn')} on {backend}"


def numpy_blas() -> str:
  """Which BLAS NumPy runs, and which kernel it picked (threadpoolctl if installed)."""
  try:
    import numpy  # noqa: F401  (threadpoolctl sees only loaded libraries)
    from threadpoolctl import threadpool_info
    info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if info: return ", ".join(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}" for i in info)
  except ImportError:
    pass
  try:
    import numpy as np
    cfg = np.show_config(mode="dicts")
    blas = cfg.get("Build Dependencies", {}).get("blas", {})
    return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
  except Exception:
    return "?"


def skipped(name: str, reason: str) -> None:
  print(f"  {name}: skipped: {reason}")


# ------------------------------------------------------------------------------------------- reporting

def machine_info() -> str:
  load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
  cpu = platform.processor() or platform.machine()
  try:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
  except OSError:
    pass
  removed = ", ".join(REMOVED_ENV) if REMOVED_ENV else "none were set"
  return (f"date {datetime.datetime.now().isoformat(timespec='seconds')}; {os.cpu_count()} cores ({cpu}); "
          f"Python {platform.python_version()}; load average {load}; unset OPENBLAS_* vars: {removed}")


def fmt_time(ns: float, unit: str) -> str:
  scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
  v = ns / scale
  return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 10 else f"{v:.3f}"


def print_table(title: str, rows: list[tuple[str, Union[Timing, str]]], unit: str = "us",
                baseline: str = "tgfn") -> None:
  """One line per framework: median, p10, p90, timed calls, and `x tgfn` = this median / tgfn's
  median (above 1: slower than tgfn; below 1: faster). A row's name starts with its framework
  ("tgfn (jit)"); the baseline row is the one whose first word is `baseline`. A row whose value is a
  string was skipped, and the string says why."""
  base = next((t for name, t in rows if name.split(" ")[0] == baseline and isinstance(t, Timing) and t.n), None)
  print(f"\n{title}")
  head = f"  {'framework':<34} {'median ' + unit:>12} {'p10':>10} {'p90':>10} {'calls':>7} {'x ' + baseline:>9}"
  print(head)
  print("  " + "-" * (len(head) - 2))
  for name, t in rows:
    if isinstance(t, str):
      print(f"  {name:<34} skipped: {t}")
      continue
    ratio = f"{t.median / base.median:.3g}" if base else "n/a"
    print(f"  {name:<34} {fmt_time(t.median, unit):>12} {fmt_time(t.p10, unit):>10} {fmt_time(t.p90, unit):>10} "
          f"{t.n:>7} {ratio:>9}")
  print(f"  (x {baseline} = framework median / {baseline} median: above 1 means slower than {baseline})")


# --------------------------------------------------------------------- workload results (for run_all)

FRAMEWORKS = ("tgfn", "jax", "numpy", "torch", "tinygrad")  # the column order of every table
TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def bench_parser(doc: str, rounds: int = 5, round_seconds: float = 1.0) -> argparse.ArgumentParser:
  """The options every workload script shares (with its default rounds); a script adds its own."""
  ap = argparse.ArgumentParser(description=doc.splitlines()[0])
  ap.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds")
  ap.add_argument("--round-seconds", type=float, default=round_seconds,
                  help="time per framework per round (at least one call)")
  ap.add_argument("--quick", action="store_true", help="few repetitions: proves the script runs; rough figures")
  ap.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                  help=f"comma-separated subset of {','.join(FRAMEWORKS)} (others are skipped)")
  ap.add_argument("--json", help="also write the result rows to this file as JSON (bench/run_all.py reads it)")
  ap.add_argument("--backends", default="",
                  help="comma-separated tgfn backends, e.g. CPU,LLVM,OPENCL: each one other than the default device "
                       "(DEV=, the 'tgfn' column) gets a column of its own, tgfn-<backend>")
  return ap


# ---------------------------------------------------------------- tgfn on several backends (--backends)

def backend_columns(spec: str) -> dict[str, str]:
  """Column name -> tgfn backend, for the backends of `spec` ("CPU,LLVM,OPENCL") other than the default
  device (which is the "tgfn" column): {"tgfn-llvm": "LLVM", "tgfn-opencl": "OPENCL"}."""
  default = os.environ.get("DEV", "CPU").upper()
  names = [b.strip().upper() for b in spec.split(",") if b.strip()]
  return {f"tgfn-{b.lower()}": b for b in dict.fromkeys(names) if b != default}


@contextlib.contextmanager
def on_backend(backend: Optional[str]) -> Iterator[None]:
  """tgfn's default device is `backend` inside (None: unchanged): arrays made and functions run there."""
  if backend is None:
    yield
    return
  from tgfn.helpers import Context
  with Context(DEV=backend): yield


def run_on(backend: Optional[str], fn: Callable[[], Any]) -> Callable[[], Any]:
  """`fn` made to run with tgfn's default device `backend` (the switch costs a few microseconds), and
  to wait for that device's queued kernels (an asynchronous device's `synchronize`, as block_until_ready
  does, for workloads whose outputs are not all arrays)."""
  if backend is None: return fn
  from tgfn.device import Device
  synchronize = Device[backend].synchronize
  def call() -> Any:
    with on_backend(backend): out = fn()
    if synchronize is not None: synchronize()
    return out
  return call


def fmt_num(v: float) -> str:
  if v >= 1000: return f"{v:,.0f}"
  if v >= 100: return f"{v:.0f}"
  if v >= 10: return f"{v:.1f}"
  return f"{v:.2f}" if v >= 1 else f"{v:.3g}"


class Row:
  """One line of the summary table: a piece of work, its unit, and per framework one primary figure
  (its column) plus optional variants (shown in parentheses, e.g. torch.compile next to torch eager)."""

  def __init__(self, work: str, unit: str, higher_is_better: bool):
    self.work, self.unit, self.higher_is_better = work, unit, higher_is_better
    self.cells: dict[str, list[dict]] = {}
    self.skips: dict[str, str] = {}

  def add(self, fw: str, label: str, value: float, p10: Optional[float] = None, p90: Optional[float] = None,
          n: Optional[int] = None) -> None:
    """The first figure added for `fw` is its primary one; later ones are variants."""
    self.cells.setdefault(fw, []).append({"label": label, "value": value, "p10": p10, "p90": p90, "n": n})

  def add_timing(self, fw: str, label: str, t: Union[Timing, str], amount: Optional[float] = None) -> None:
    """A Timing in the row's unit: a time unit directly, else `amount` per second (FLOP/1e9 for GFLOP/s,
    bytes/1e9 for GB/s) -- the median throughput is amount / median time, and p10/p90 swap sides. A
    string is a skip reason."""
    if isinstance(t, str) or not t.n: return self.skip(fw, t if isinstance(t, str) else "no timed calls")
    if self.unit in TIME_UNITS:
      s = TIME_UNITS[self.unit]
      return self.add(fw, label, t.median / s, t.p10 / s, t.p90 / s, t.n)
    if amount is None: raise ValueError(f"Row {self.work!r}: unit {self.unit!r} is not a time; pass amount=")
    rate = lambda ns: amount / (ns / 1e9)  # noqa: E731
    self.add(fw, label, rate(t.median), rate(t.p90), rate(t.p10), t.n)

  def skip(self, fw: str, reason: str) -> None:
    if fw not in self.cells: self.skips.setdefault(fw, reason)

  def not_applicable(self, fw: str, why: str) -> None:
    """The framework has no such thing (NumPy has no jit): a dash in the table, not 'skipped'."""
    self.skip(fw, f"n/a: {why}")

  def primary(self, fw: str) -> Optional[float]:
    return self.cells[fw][0]["value"] if fw in self.cells else None

  def variant(self, fw: str, label: str) -> Optional[float]:
    """The figure of `fw`'s variant whose label is `label` (e.g. "BEAM=2"), or None."""
    return next((c["value"] for c in self.cells.get(fw, []) if c["label"] == label), None)

  def to_dict(self) -> dict: return dict(vars(self))

  @classmethod
  def from_dict(cls, d: dict) -> Row:
    r = cls(d["work"], d["unit"], d["higher_is_better"])
    r.cells, r.skips = d["cells"], d["skips"]
    return r


def cell_text(row: Row, fw: str) -> str:
  if fw not in row.cells: return "skipped" if not row.skips.get(fw, "n/a").startswith("n/a") else "—"
  first, *rest = row.cells[fw]
  # a variant whose label starts with "%" is a percentage ("13% of copy"); others read "label value"
  extra = "; ".join(f"{fmt_num(c['value'])}{c['label']}" if c["label"].startswith("%") else
                    f"{c['label']} {fmt_num(c['value'])}" for c in rest)
  return fmt_num(first["value"]) + (f" ({extra})" if extra else "")


def ratio_text(row: Row, peer: str) -> str:
  """tgfn's figure / the peer's, primary figures only."""
  a, b = row.primary("tgfn"), row.primary(peer)
  if a is None or b is None or b == 0: return "—"
  return f"{a / b:.2g}" if a / b < 10 else f"{a / b:.0f}"


def markdown_tables(rows: list[Row], frameworks: tuple[str, ...] = FRAMEWORKS) -> list[str]:
  """The summary table (figures per framework) and the ratio table (tgfn / each peer)."""
  peers = [f for f in frameworks if f != "tgfn"]
  out = ["| work | " + " | ".join(frameworks) + " |", "|---|" + "---:|" * len(frameworks)]
  for r in rows: out.append(f"| {r.work} | " + " | ".join(cell_text(r, f) for f in frameworks) + " |")
  out += ["", "tgfn ÷ peer, primary figures (GFLOP/s, GB/s: above 1 = tgfn faster; times and MiB: below 1 = "
          "tgfn faster / smaller):", "",
          "| work | better | " + " | ".join(f"tgfn ÷ {p}" for p in peers) + " |", "|---|---|" + "---:|" * len(peers)]
  for r in rows:
    out.append(f"| {r.work} | {'higher' if r.higher_is_better else 'lower'} | "
               + " | ".join(ratio_text(r, p) for p in peers) + " |")
  return out


def detail_lines(rows: list[Row]) -> list[str]:
  """Every figure with its spread (p10-p90 in the row's unit) and sample count; then why a peer was skipped."""
  out = []
  for r in rows:
    out.append(f"- **{r.work}**")
    for fw, cells in r.cells.items():
      for c in cells:
        spread = f", p10–p90 {fmt_num(c['p10'])}–{fmt_num(c['p90'])}" if c["p10"] is not None else ""
        n = f", n={c['n']}" if c["n"] is not None else ""
        out.append(f"  - {fw} ({c['label']}): {fmt_num(c['value'])} {r.unit}{spread}{n}")
    for fw, why in r.skips.items(): out.append(f"  - {fw}: skipped: {why}")
  return out


class Report:
  """The rows a workload script measured: printed as tables at the end, written as JSON with --json."""

  def __init__(self, args: argparse.Namespace):
    self.args, self.rows = args, []
    self.frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    unknown = set(self.frameworks) - set(FRAMEWORKS)
    if unknown: raise SystemExit(f"--frameworks: unknown {sorted(unknown)}; expected a subset of {FRAMEWORKS}")
    # tgfn on other backends: a column each, next to the tgfn one
    self.backends = backend_columns(getattr(args, "backends", "") or "") if self.wants("tgfn") else {}
    self.columns = FRAMEWORKS[:1] + tuple(self.backends) + FRAMEWORKS[1:]

  def wants(self, fw: str) -> bool: return fw in self.frameworks or fw in getattr(self, "backends", {})

  def backend(self, column: str) -> Optional[str]:
    """The tgfn backend of a column ("tgfn-llvm" -> "LLVM"), None for the others (the default device)."""
    return self.backends.get(column)

  def row(self, work: str, unit: str, higher_is_better: bool = False) -> Row:
    self.rows.append(Row(work, unit, higher_is_better))
    return self.rows[-1]

  def finish(self) -> None:
    print("\n" + "\n".join(markdown_tables(self.rows, self.columns)))
    print("\n" + "\n".join(detail_lines(self.rows)))
    if self.args.json:
      Path(self.args.json).write_text(json.dumps({"machine": machine_info(), "rows": [r.to_dict() for r in self.rows]}))

  def load(self, fw: str) -> tuple[Optional[Any], str]:
    """(module, description) of a framework this run includes, or (None, why not); prints either."""
    if not self.wants(fw): mod, desc = None, "not selected (--frameworks)"
    elif fw in self.backends: mod, desc = _tgfn_backend(self.backends[fw])
    else: mod, desc = import_peer(fw)
    if mod is None: skipped(fw, desc)
    else: print(f"  {fw}: {desc}")
    return mod, desc
