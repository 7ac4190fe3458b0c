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

import datetime  # noqa: E402
import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Optional, Union  # noqa: E402

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


def time_calls(fn: Callable[[], Any], reps: int, warmup: int = 3, max_seconds: Optional[float] = None,
               min_reps: int = 3) -> Timing:
  """Call `fn()` `warmup` times untimed, then up to `reps` times, timing each call on its own. With
  `max_seconds`, stop early once that much time has been spent timing (but after at least `min_reps`
  calls): the Timing says how many calls the median is over."""
  for _ in range(warmup): fn()
  samples: list[int] = []
  clock = time.perf_counter_ns
  deadline = None if max_seconds is None else clock() + int(max_seconds * 1e9)
  for i in range(reps):
    t0 = clock()
    fn()
    samples.append(clock() - t0)
    if deadline is not None and i + 1 >= min_reps and clock() > deadline: break
  return Timing(samples)


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
