"""Peak resident memory (VmHWM) of a whole process that runs 50 steps of bench/mlp_step.py's MLP.

One fresh subprocess per framework: import it, create the parameters and batch, run --steps SGD steps
of the 784-512-512-10 MLP (batch 256) with mlp_step's runner (tgfn and JAX jitted with donation,
tinygrad TinyJit, PyTorch eager, NumPy hand-written), then report the process's VmHWM from
/proc/self/status: the peak RSS since the process started, imports and compilers included (VmHWM
belongs to the new process image, unlike ru_maxrss, which carries the parent's peak across exec).
tgfn compiles kernels in child C-compiler processes, which are not counted; nor are JAX's or
tinygrad's (tinygrad's clang runs as a child too, XLA compiles in-process).

Run: python bench/mlp_peak_rss.py [--quick] [--steps 50] [--frameworks ...]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import json
import subprocess
import sys

from common import Report, bench_parser, import_peer, machine_info


def vm_kib(field: str) -> int:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"): return int(line.split()[1])
  raise RuntimeError(f"no {field} in /proc/self/status")


def worker(fw: str, steps: int) -> None:
  mod, desc = import_peer(fw)
  if mod is None:
    print(json.dumps({"skip": desc}))
    return
  from mlp_step import RUNNERS, make_problem
  runner = RUNNERS[fw](*make_problem())
  for _ in range(steps): runner.step()
  loss = runner.last_loss()
  print(json.dumps({"hwm_kib": vm_kib("VmHWM"), "rss_kib": vm_kib("VmRSS"), "loss": loss, "label": runner.label}))


def main():
  ap = bench_parser(__doc__)
  ap.add_argument("--steps", type=int, default=50)
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args.worker, args.steps)
  if args.quick: args.steps = 2
  rep = Report(args)
  print(f"mlp_peak_rss: peak RSS of a process running {args.steps} MLP steps, one subprocess per framework")
  print(machine_info())
  row = rep.row(f"peak RSS of a process running {args.steps} MLP steps, MiB", "MiB")
  for fw in ("tgfn", "jax", "numpy", "torch", "tinygrad"):
    if not rep.wants(fw):
      row.skip(fw, "not selected (--frameworks)")
      continue
    out = subprocess.run([sys.executable, __file__, "--worker", fw, "--steps", str(args.steps)],
                         capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    res = json.loads(lines[-1]) if lines and not out.returncode else \
        {"skip": f"worker failed (rc {out.returncode}): {(out.stderr.strip().splitlines() or ['?'])[-1][:200]}"}
    if "skip" in res:
      print(f"  {fw}: skipped: {res['skip']}")
      row.skip(fw, res["skip"])
      continue
    print(f"  {res['label']:<32} peak {res['hwm_kib'] / 1024:.1f} MiB, at the end {res['rss_kib'] / 1024:.1f} MiB, "
          f"loss {res['loss']:.5f}")
    row.add(fw, res["label"].split(" ", 1)[1].strip("()"), res["hwm_kib"] / 1024)
  rep.finish()


if __name__ == "__main__":
  main()
