"""Ordinary research programs, written once against JAX's API (bench/programs/), on JAX and on tgfn.

Each program module builds its training step from the framework module it is given (`jax` or `tgfn`):
the port is the import. Per program and framework, in fresh subprocesses:

  first step, empty cache   seconds from building the parameters (in the framework) to the first step's loss,
                            with an empty compile cache (tgfn: TGFN_CACHE_DIR; JAX: its persistent
                            compilation cache, every entry cached)
  first step, warm cache    the same in a new process on the folder the empty run filled
  median step               after 3 untimed steps, the median of --steps timed steps (loss ready)
  kernels per step          tgfn: kernel launches in one step after warm-up (a loop body's kernels count each trip)
  kernels compiled, source  tgfn: kernels compiled in the process and the characters of their C source

Programs: transformer (2 layers, d 64, context 64, batch 32), vae (8x8 digits, a PRNG split per step),
neural_ode (RK4 in lax.scan, vmap over initial states, grad through the scan), convnet (two 3x3 convolutions
and a max pool on the digits), gpt (6 layers, d 384, context 256, batch 8; not in the default list: minutes).

Run: python bench/real_programs.py [--programs transformer,vae,neural_ode,convnet] [--frameworks tgfn,jax]
                                   [--rounds 1] [--steps 20] [--timeout 900]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time

from common import Report, Timing, bench_parser, import_peer, jax_persistent_cache, machine_info, worker_result

PROGRAMS = ("transformer", "vae", "neural_ode", "convnet")
ALL_PROGRAMS = PROGRAMS + ("gpt",)
WARMUP_STEPS = 3


def ready(loss) -> float:
  return float(loss)  # a host copy waits for the computation (JAX's dispatch is asynchronous)


def tgfn_counters():
  from tgfn.engine.realize import Counters
  return Counters


def worker(fw: str, name: str, folder: str, steps: int) -> None:
  """Subprocess body: import, then build and run the program; one JSON line out."""
  mod, desc = import_peer(fw)
  if mod is None:
    print(json.dumps({"skip": desc}))
    return
  if fw == "jax": jax_persistent_cache(mod, folder)
  program = importlib.import_module(f"programs.{name}").build(mod)
  first_batch = program.batch(0)
  t0 = time.perf_counter_ns()
  state = program.init()
  state, loss = program.step(state, first_batch)
  first_loss = ready(loss)
  out = {"first_ns": time.perf_counter_ns() - t0, "loss": first_loss}
  if steps:
    for i in range(1, 1 + WARMUP_STEPS): state, loss = program.step(state, program.batch(i)); ready(loss)
    if fw == "tgfn": mod.wait_for_optimized_kernels()
    counters = tgfn_counters() if fw == "tgfn" else None
    launched = counters.kernels_launched if counters else 0
    samples = []
    for i in range(steps):
      batch = program.batch(i)
      t = time.perf_counter_ns()
      state, loss = program.step(state, batch)
      ready(loss)
      samples.append(time.perf_counter_ns() - t)
    out.update(step_ns=samples, last_loss=ready(loss))
    if counters:
      out.update(kernels_per_step=(counters.kernels_launched - launched) / steps,
                 kernels_compiled=counters.kernels_compiled, source_chars=counters.source_chars)
  print(json.dumps(out))


def measure(fw: str, name: str, folder: str, steps: int, timeout: float) -> dict:
  env = dict(os.environ, TGFN_CACHE_DIR=folder)
  cmd = [sys.executable, __file__, "--worker", fw, "--program", name, "--cache", folder, "--steps", str(steps)]
  return worker_result(cmd, env, timeout)


def main():
  ap = bench_parser(__doc__, rounds=1)
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  ap.add_argument("--program", help=argparse.SUPPRESS)
  ap.add_argument("--cache", help=argparse.SUPPRESS)
  ap.add_argument("--programs", default=",".join(PROGRAMS), help=f"some of {','.join(ALL_PROGRAMS)}")
  ap.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
  ap.add_argument("--timeout", type=float, default=900, help="seconds one framework's process may take")
  args = ap.parse_args()
  if args.worker: return worker(args.worker, args.program, args.cache, args.steps)
  if args.quick: args.rounds, args.steps = 1, 5
  rep = Report(args)
  print("real_programs: research programs written against JAX's API, the same source on each framework")
  print(machine_info())
  fws = [fw for fw in ("tgfn", "jax") if rep.wants(fw)]
  with tempfile.TemporaryDirectory(prefix="bench-programs-") as top:
    for name in args.programs.split(","):
      rows = {"cold": rep.row(f"{name}: first step, empty cache, s", "s"),
              "warm": rep.row(f"{name}: first step, warm cache, s", "s"),
              "step": rep.row(f"{name}: median step, ms", "ms")}
      kernels = rep.row(f"{name}: kernels per step", "kernels")
      source = rep.row(f"{name}: generated source compiled, K characters", "K chars")
      for row in (*rows.values(), kernels, source):
        for fw in ("numpy", "torch", "tinygrad"): row.not_applicable(fw, "written against JAX's API")
      samples = {(fw, k): [] for fw in fws for k in rows}
      for r in range(args.rounds):
        for fw in fws:
          folder = os.path.join(top, f"{name}-{fw}-{r}")
          os.makedirs(folder)
          cold = measure(fw, name, folder, args.steps, args.timeout)
          warm = measure(fw, name, folder, 0, args.timeout) if "skip" not in cold else cold
          if "skip" in cold:
            print(f"  {name} {fw}: skipped: {cold['skip']}")
            for row in (*rows.values(), kernels, source): row.skip(fw, cold["skip"])
            continue
          samples[(fw, "cold")].append(cold["first_ns"])
          samples[(fw, "warm")].append(warm.get("first_ns", cold["first_ns"]))
          samples[(fw, "step")].extend(cold["step_ns"])
          print(f"  round {r + 1} {name:<12} {fw:<5} first {cold['first_ns'] / 1e9:7.2f} s, warm "
                f"{warm.get('first_ns', float('nan')) / 1e9:6.2f} s, step "
                f"{statistics.median(cold['step_ns']) / 1e6:8.3f} ms, loss {cold['loss']:.4f} -> {cold['last_loss']:.4f}")
          if "kernels_per_step" in cold:
            kernels.add(fw, "per step", cold["kernels_per_step"])
            source.add(fw, "compiled", cold["source_chars"] / 1e3)
            print(f"      {cold['kernels_per_step']:.0f} kernels per step; {cold['kernels_compiled']} compiled, "
                  f"{cold['source_chars'] / 1e3:.0f} K characters of source")
      for (fw, kind), s in samples.items():
        if s: rows[kind].add_timing(fw, "jit", Timing(s))
      for row in (kernels, source): row.not_applicable("jax", "XLA's kernels are not counted")
  rep.finish()


if __name__ == "__main__":
  main()
