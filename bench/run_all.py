"""Run every benchmark workload, each in its own process, and write the tables to docs/performance.md.

  python bench/run_all.py                 # the full suite (~15 min on 2 busy cores)
  python bench/run_all.py --quick         # few repetitions: proves every script runs (figures rough)
  python bench/run_all.py --only matmul,tiny_call --frameworks tgfn,numpy --out /tmp/perf.md

Each workload script (bench/<name>.py) runs its installed peers side by side in one process and
writes its rows as JSON (--json); this script collects them into one summary table (a column per
framework), a table of tgfn's ratio to each peer, the project's targets checked against the figures,
and every figure's spread, each workload's load average and why a peer was skipped.
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (FRAMEWORKS, PAUSE_BETWEEN_FRAMEWORKS, REPO_ROOT, Row, detail_lines, fmt_num, machine_info,
                    markdown_tables, numpy_blas, version_of)

BENCH = Path(__file__).resolve().parent
# in the order of the table; the extras (conv net, fusions) last
WORKLOADS = ("matmul", "mlp_step", "digits_train", "first_call", "tiny_call", "per_example_grads", "mlp_peak_rss",
             "conv_step", "fusions", "distributed_step", "real_programs")

# (row name prefix, what the project asks, peer ("best" = the best peer), factor[, tgfn's variant]): tgfn / peer
# must be >= factor for higher-is-better rows, <= factor otherwise; tgfn's primary figure unless a variant is named
TARGETS = (
  ("matmul 1024²", "heuristic >= 0.8 x the best peer", "best", 0.8),
  ("matmul 1024²", "with BEAM >= 1.0 x the best peer", "best", 1.0, "BEAM=2"),
  ("matmul 2048²", "heuristic >= 0.8 x the best peer", "best", 0.8),
  ("matmul 2048²", "with BEAM >= 1.0 x the best peer", "best", 1.0, "BEAM=2"),
  ("MLP ", "faster than JAX with donation", "jax", 1.0),
  ("the main job", "no slower than JAX + optax", "jax", 1.0),
  ("first call of the jitted", "no slower than JAX cold", "jax", 1.0),
  ("the same with a warm", "<= 0.25 x JAX warm", "jax", 0.25),
  ("eager `x*2+1`", "no slower than JAX eager", "jax", 1.0),
  ("jitted `x*2+1`", "<= 0.5 x JAX", "jax", 0.5),
  ("per-example grads", "no slower than the best peer", "best", 1.0),
  ("peak RSS", "<= 1.1 x NumPy hand-written", "numpy", 1.1),
  # the research programs of bench/programs/ (bench/real_programs.py), written once against JAX's API
  *((f"{program}: {row}", what, "jax", factor) for program in ("transformer", "vae", "neural_ode", "convnet")
    for row, what, factor in (("first step, empty", "no slower than JAX cold", 1.0),
                              ("first step, warm", "<= 0.25 x JAX (JAX's own persistent cache)", 0.25),
                              ("median step", "no slower than JAX", 1.0))),
)


def target_lines(rows: list[Row]) -> list[str]:
  out = ["| work | target | tgfn | peer | tgfn ÷ peer | met |", "|---|---|---:|---:|---:|---|"]
  for prefix, what, peer, factor, *variant in TARGETS:
    row = next((r for r in rows if r.work.startswith(prefix)), None)
    if row is None: continue
    mine = row.primary("tgfn") if not variant else row.variant("tgfn", variant[0])
    peers = {fw: row.primary(fw) for fw in FRAMEWORKS if fw != "tgfn" and row.primary(fw) is not None}
    if peer == "best" and peers:
      peer = (max if row.higher_is_better else min)(peers, key=peers.get)
    theirs = peers.get(peer)
    if mine is None or theirs is None:
      out.append(f"| {row.work} | {what} | — | — | — | cannot tell (tgfn or {peer} missing) |")
      continue
    ratio = mine / theirs
    met = ratio >= factor if row.higher_is_better else ratio <= factor
    out.append(f"| {row.work} | {what} | {fmt_num(mine)} | {fmt_num(theirs)} ({peer}) | {fmt_num(ratio)} | "
               f"{'yes' if met else '**no**'} |")
  return out


def run_workload(name: str, args: argparse.Namespace) -> dict:
  """Run bench/<name>.py in its own process (output shown live); its rows and how the run went."""
  with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
    out = Path(tmp) / "rows.json"
    cmd = [sys.executable, str(BENCH / f"{name}.py"), "--frameworks", args.frameworks, "--json", str(out)]
    if args.quick: cmd.append("--quick")
    print(f"\n===== {name}: {' '.join(cmd[1:])}", flush=True)
    load_before, t0 = os.getloadavg()[0], time.perf_counter()
    try:
      rc = subprocess.run(cmd, timeout=args.timeout, cwd=REPO_ROOT).returncode
    except subprocess.TimeoutExpired:
      rc = "timeout"
    res = {"name": name, "rc": rc, "seconds": time.perf_counter() - t0, "load": (load_before, os.getloadavg()[0])}
    res["rows"] = [Row.from_dict(r) for r in json.loads(out.read_text())["rows"]] if out.exists() else []
    return res


def method_lines(args: argparse.Namespace, started: str) -> list[str]:
  peers = ", ".join(f"{d} {version_of(d)}" for d in ("jax", "jaxlib", "optax", "torch", "tinygrad"))
  return [
    "## Method", "",
    f"- Machine and start: {started}.",
    f"- Versions: tgfn {version_of('tgfn')} at commit {git_commit()}; numpy {version_of('numpy')} (BLAS: "
    f"{numpy_blas()}); {peers} ('?' = not installed: its column says skipped).",
    f"- Every workload is its own script in `bench/`, run in its own process by `python bench/run_all.py"
    f"{' --quick' if args.quick else ''}`. Inside it, all installed frameworks run side by side: after "
    "warm-up calls (which compile), interleaved rounds — every framework in turn, each for a time budget "
    f"per round, at least one call, after a {PAUSE_BETWEEN_FRAMEWORKS} s pause (the previous framework's "
    "BLAS threads spin on for ~0.1 s after a call and would slow the next one) — each call timed on its own "
    "with `time.perf_counter_ns` with its result ready (`block_until_ready`, `.realize()`, or eager). "
    "Samples are pooled over rounds and the **median** is reported (p10–p90 and the number of calls in the "
    "details). Throughputs are work / median time. "
    "Before timing, each framework's result is checked against a float64 NumPy computation.",
    "- The first-call rows run each measurement in a fresh process (an empty `TGFN_CACHE_DIR` / "
    "`jax_compilation_cache_dir` / tinygrad `CACHEDB`, then again on the filled one); peak RSS is each "
    "framework's own process's VmHWM.",
    "- Environment: `bench/common.py` removes `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` before NumPy is "
    "loaded (they select slower kernels in a current OpenBLAS); tinygrad runs on its CPU device with "
    "`DEV=CPU` (it needs `clang`: `apt-get install -y clang`); JAX with `JAX_PLATFORMS=cpu`; each framework "
    "with its default thread count (tgfn: its worker pool, one thread per core unless CPU_THREADS is set).",
    "- Install the peers with `pip install -e '.[bench]'` (jax, jaxlib, torch 2.13.0 CPU, tinygrad; optax "
    "optional). A peer that is missing or fails is skipped with its reason; no number is ever made up.",
    "- The machine is shared: the load average at the start and end of each workload is listed below. "
    "Medians resist short disturbances, not a machine that is busy throughout; compare ratios within one "
    "run rather than absolute figures between runs.",
  ]


# everything from this line on in the report is written by hand (notes, analyses): a new run keeps it
NOTES_MARK = "<!-- hand-written notes: bench/run_all.py keeps everything below this line -->"


def kept_notes(path: Path) -> list[str]:
  """The hand-written part of an earlier report at `path`, from NOTES_MARK on (none if there is no mark)."""
  text = path.read_text() if path.exists() else ""
  return text[text.index(NOTES_MARK):].splitlines() if NOTES_MARK in text else []


def write_report(args: argparse.Namespace, started: str, seconds: float, results: list[dict], planned: int) -> None:
  rows = [r for res in results for r in res["rows"]]
  progress = "" if len(results) == planned else f"IN PROGRESS: {len(results)} of {planned} workloads done. "
  lines = ["# Performance", "",
           f"Written by `python bench/run_all.py{' --quick' if args.quick else ''}` ({seconds:.0f} s). {progress}"
           f"{'QUICK MODE: few repetitions, rough figures. ' if args.quick else ''}"
           "fp32, CPU, medians. Figures are per framework's primary variant; variants in parentheses.", "",
           *markdown_tables(rows), "", "## Targets (from the performance issue)", "", *target_lines(rows), "",
           *method_lines(args, started), "", "## Details", ""]
  for res in results:
    ok = "ok" if res["rc"] == 0 else f"**failed (exit {res['rc']})**"
    lines.append(f"### `bench/{res['name']}.py` — {ok}, {res['seconds']:.0f} s, load average "
                 f"{res['load'][0]:.2f} → {res['load'][1]:.2f}")
    lines += ["", *detail_lines(res["rows"]), ""]
  lines += kept_notes(Path(args.out))
  Path(args.out).parent.mkdir(parents=True, exist_ok=True)
  Path(args.out).write_text("\n".join(lines))


def git_commit() -> str:
  try:
    out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    # the report itself is rewritten as workloads finish: its own changes are not the code's
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":(exclude)docs/performance.md"], capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
  except OSError:
    return "?"


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true", help="few repetitions per workload")
  ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
  ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
  ap.add_argument("--out", default=str(REPO_ROOT / "docs" / "performance.md"))
  ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per workload")
  args = ap.parse_args()
  names = [n.strip() for n in args.only.split(",") if n.strip()]
  unknown = set(names) - set(WORKLOADS)
  if unknown: raise SystemExit(f"--only: unknown workloads {sorted(unknown)}; expected some of {', '.join(WORKLOADS)}")
  started, t0 = machine_info(), time.perf_counter()
  results = []
  for n in names:  # the file is rewritten after every workload, so an interrupted run still leaves tables
    results.append(run_workload(n, args))
    write_report(args, started, time.perf_counter() - t0, results, len(names))
  print(f"\nwrote {args.out}")
  failed = [res["name"] for res in results if res["rc"] != 0]
  if failed: raise SystemExit(f"failed workloads: {', '.join(failed)}")


if __name__ == "__main__":
  main()
