"""The MLP training step data-parallel: on 1 device, on 2 devices of one process, and over 2 MPI processes.

The step is bench/mlp_step.py's (ReLU MLP 784-512-512-10, softmax cross-entropy, batch 256, SGD lr
0.01, float32), written data-parallel: each member computes the gradient of the mean loss on its block
of the batch, `lax.pmean` over the "batch" axis makes it the whole batch's gradient, and each member
applies the update (its copy of the new parameters is taken from the first device: out_axes=None).

  tgfn    pmap(step, "batch", in_axes=(None, 0, 0), out_axes=None) over ["CPU"] (1 member, the whole
          batch) and over ["CPU", "CPU:1"] (TGFN_CPU_DEVICES=2: 2 members of 128); a plain jit of the
          same step on one device is a variant of the 1-device row. The speed-up is 1-device median /
          2-device median. Time in collectives: the copies between the devices (tgfn/engine/queues.py
          CollectiveTimers: the pmean's exchange of the gradients, plus the parameters' broadcast and the
          batch's scatter that pmap's in_axes call for), per step, as a share of the step's time.
  jax     jax.pmap of the same step over 1 and 2 host devices (XLA_FLAGS=
          --xla_force_host_platform_device_count=2), lax.pmean of the gradients.
  MPI     the script starts `mpirun -n 2 --allow-run-as-root --oversubscribe python
          bench/distributed_step.py --mpi`: each process one device and half the batch, the pmean
          spanning the processes (one MPI allreduce per gradient); reported: rank 0's median step and
          its time inside the MPI calls (waiting for the other process included).

Correctness first: one step of every variant is compared with a float64 NumPy step (1e-4 relative).
Timing: warm-up steps (the first compiles), then interleaved rounds, each step timed on its own with its
result ready, samples pooled, MEDIAN reported. The machine has 2 cores: 2 devices (or 2 processes) share
them with each kernel's own worker threads, so the speed-up says what overlapping the devices buys here.

Run: python bench/distributed_step.py [--quick] [--frameworks tgfn,jax] [--no-mpi]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# two CPU devices for tgfn and two host devices for JAX: read when each is imported
if "--mpi" not in sys.argv: os.environ["TGFN_CPU_DEVICES"] = "2"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()

import numpy as np  # noqa: E402

from common import Report, bench_parser, interleave, machine_info, time_calls  # noqa: E402
from mlp_step import BATCH, LR, make_problem, numpy_step, jax_loss, tgfn_loss  # noqa: E402

MPI_ROWS = "data-parallel MLP step, 2 MPI processes x 1 device, ms"


def tgfn_parts():
  import tgfn
  import tgfn.numpy as tnp
  from tgfn import lax

  def step(p, x, y):
    g = lax.pmean(tgfn.grad(tgfn_loss)(p, x, y), "batch")
    return {k: p[k] - LR * g[k] for k in p}

  def single(p, x, y):
    g = tgfn.grad(tgfn_loss)(p, x, y)
    return {k: p[k] - LR * g[k] for k in p}
  return tgfn, tnp, step, single


def tgfn_calls(P, X, Y):
  """{variant: one step with its result ready} for tgfn; the 2-device one records its copy time."""
  tgfn, tnp, step, single = tgfn_parts()
  from tgfn.engine.queues import CollectiveTimers
  p = {k: tnp.array(v) for k, v in P.items()}
  calls, shares = {}, []
  for n in (1, 2):
    mapped = tgfn.pmap(step, "batch", in_axes=(None, 0, 0), out_axes=None, devices=["CPU", "CPU:1"][:n])
    xs, ys = tnp.array(X.reshape(n, BATCH // n, -1)), tnp.array(Y.reshape(n, BATCH // n, -1))

    def call(mapped=mapped, xs=xs, ys=ys, n=n):
      copies, start = CollectiveTimers.copies, time.perf_counter()
      out = mapped(p, xs, ys)
      for v in out.values(): v.block_until_ready()
      if n == 2: shares.append((CollectiveTimers.copies - copies) / (time.perf_counter() - start))
      return out
    calls[f"{n} device"] = call
  jitted = tgfn.jit(single)
  x, y = tnp.array(X), tnp.array(Y)

  def call_jit():
    out = jitted(p, x, y)
    for v in out.values(): v.block_until_ready()
    return out
  calls["jit"] = call_jit
  return calls, shares


def jax_calls(jax, P, X, Y):
  import jax.numpy as jnp
  devices = jax.devices("cpu")
  if len(devices) < 2: raise RuntimeError(f"JAX sees {len(devices)} CPU device(s), not 2 (XLA_FLAGS came too late)")

  def step(p, x, y):
    g = jax.lax.pmean(jax.grad(jax_loss)(p, x, y), "batch")
    return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

  p = {k: jnp.asarray(v) for k, v in P.items()}
  calls = {}
  for n in (1, 2):
    mapped = jax.pmap(step, "batch", in_axes=(None, 0, 0), devices=devices[:n])
    xs, ys = jnp.asarray(X.reshape(n, BATCH // n, -1)), jnp.asarray(Y.reshape(n, BATCH // n, -1))
    calls[f"{n} device"] = lambda mapped=mapped, xs=xs, ys=ys: jax.block_until_ready(
      jax.tree_util.tree_map(lambda a: a[0], mapped(p, xs, ys)))
  return calls


def check(got, want, what):
  for k in want:
    err = float(np.abs(np.asarray(got[k], np.float64) - want[k]).max() / (np.abs(want[k]).max() + 1e-30))
    if err > 1e-4: raise ValueError(f"{what}: parameter {k} differs from the float64 NumPy step by {err:.2e} (relative)")


def as_numpy(params): return {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in params.items()}


def mpi_main(args) -> None:
  """Under mpirun: this process's half of the batch on its one device; rank 0 writes the rows."""
  tgfn, tnp, step, _ = tgfn_parts()
  from tgfn.engine.queues import CollectiveTimers
  tgfn.distributed.initialize()
  me, count = tgfn.process_index(), tgfn.process_count()
  P, X, Y = make_problem()
  want = {k: v.astype(np.float64) for k, v in numpy_step({k: v.astype(np.float64) for k, v in P.items()},
                                                          X.astype(np.float64), Y.astype(np.float64))[0].items()}
  part = slice(me * BATCH // count, (me + 1) * BATCH // count)
  p = {k: tnp.array(v) for k, v in P.items()}
  xs, ys = tnp.array(X[part][None]), tnp.array(Y[part][None])
  mapped = tgfn.pmap(step, "batch", in_axes=(None, 0, 0), out_axes=None)
  check(as_numpy(mapped(p, xs, ys)), want, f"process {me}: pmap over {count} processes")
  mpi, wall = [], []

  def call():
    before, start = CollectiveTimers.mpi, time.perf_counter()
    for v in mapped(p, xs, ys).values(): v.block_until_ready()
    mpi.append(CollectiveTimers.mpi - before)
    wall.append(time.perf_counter() - start)
  steps = 10 if args.quick else 20 * args.rounds
  timing = time_calls(call, steps, warmup=2)
  if me == 0 and args.json:
    share = statistics.median(m / w for m, w in zip(mpi[2:], wall[2:]))
    json.dump({"median_ms": timing.median / 1e6, "p10_ms": timing.p10 / 1e6, "p90_ms": timing.p90 / 1e6,
               "n": timing.n, "mpi_ms": statistics.median(mpi[2:]) * 1e3, "mpi_share": share}, open(args.json, "w"))


def run_mpi(args, row) -> None:
  """Start the --mpi run under mpirun and add its figures to `row` (or why it was skipped)."""
  if shutil.which("mpirun") is None: return row.skip("tgfn", "mpirun not found (apt-get install openmpi-bin)")
  with tempfile.TemporaryDirectory(prefix="bench-mpi-") as tmp:
    out = os.path.join(tmp, "mpi.json")
    cmd = ["mpirun", "-n", "2", "--allow-run-as-root", "--oversubscribe", sys.executable, os.path.abspath(__file__),
           "--mpi", "--json", out, "--rounds", str(args.rounds)] + (["--quick"] if args.quick else [])
    env = {k: v for k, v in os.environ.items() if k != "TGFN_CPU_DEVICES"}  # one device per process
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0 or not os.path.exists(out):
      return row.skip("tgfn", f"mpirun failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-300:]}")
    r = json.load(open(out))
  row.add("tgfn", "pmap over 2 processes", r["median_ms"], r["p10_ms"], r["p90_ms"], r["n"])
  row.add("tgfn", "% in MPI", 100 * r["mpi_share"])
  print(f"  MPI: {r['median_ms']:.2f} ms/step, {r['mpi_ms']:.2f} ms in MPI calls ({100 * r['mpi_share']:.0f}%)")


def main():
  ap = bench_parser(__doc__, rounds=5, round_seconds=1.0)
  ap.add_argument("--mpi", action="store_true", help="(internal) this process is one of mpirun's")
  ap.add_argument("--no-mpi", action="store_true", help="skip the 2-process run")
  args = ap.parse_args()
  if args.quick: args.rounds, args.round_seconds = 2, 0.2
  if args.mpi: return mpi_main(args)
  rep = Report(args)
  print("distributed_step: the MLP step data-parallel on 1 and 2 devices, and over 2 MPI processes")
  print(machine_info())
  P, X, Y = make_problem()
  want = {k: v.astype(np.float64) for k, v in numpy_step({k: v.astype(np.float64) for k, v in P.items()},
                                                          X.astype(np.float64), Y.astype(np.float64))[0].items()}
  one = rep.row("data-parallel MLP step, 1 device (pmap), ms", "ms")
  two = rep.row("data-parallel MLP step, 2 devices of 1 process (pmap + pmean), ms", "ms")
  mpi = rep.row(MPI_ROWS, "ms")
  calls, shares = {}, []
  for fw in ("tgfn", "jax"):
    mod, desc = rep.load(fw)
    if mod is None:
      for row in (one, two, mpi): row.skip(fw, desc)
      continue
    try:
      if fw == "tgfn": made, shares = tgfn_calls(P, X, Y)
      else: made = jax_calls(mod, P, X, Y)
      for kind, fn in made.items():
        check(as_numpy(fn()), want, f"{fw} {kind}")
        calls[(fw, kind)] = fn
    except Exception as e:
      for row in (one, two): row.skip(fw, repr(e)[:200])
  for fw in ("numpy", "torch", "tinygrad"):
    for row in (one, two, mpi): row.not_applicable(fw, "no data-parallel step measured")
  mpi.not_applicable("jax", "not measured (jax.distributed over MPI)")
  times = interleave(calls, args.rounds, 50, args.round_seconds, warmup=2)
  for kind, row, label in (("1 device", one, "pmap"), ("jit", one, "jit, no pmap"), ("2 device", two, "pmap")):
    for fw in ("tgfn", "jax"):
      if (fw, kind) in times: row.add_timing(fw, label, times[(fw, kind)])
  for fw in ("tgfn", "jax"):
    a, b = times.get((fw, "1 device")), times.get((fw, "2 device"))
    if a is None or b is None or isinstance(a, str) or isinstance(b, str) or not a.n or not b.n: continue
    two.add(fw, "speed-up", a.median / b.median)
    if fw == "tgfn" and len(shares) > 2: two.add(fw, "% in copies between devices", 100 * statistics.median(shares[2:]))
  if rep.wants("tgfn") and not args.no_mpi: run_mpi(args, mpi)
  elif args.no_mpi: mpi.skip("tgfn", "--no-mpi")
  rep.finish()


if __name__ == "__main__":
  main()
