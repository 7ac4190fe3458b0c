"""Seconds to the first result of the jitted MLP step (bench/mlp_step.py), empty vs warm disk cache.

A new process pays for tracing, compiling and running the step once before the first result. Each
measurement runs in its own fresh subprocess, with the framework already imported and the parameters
and batch already created; the clock covers only the first call of the jitted step, result ready:

  tgfn      tgfn.jit(step, donate_argnums=0), kernels cached under TGFN_CACHE_DIR
  jax       jax.jit(step, donate_argnums=0), persistent compilation cache in jax_compilation_cache_dir
            (every entry cached: min compile time 0 s, min entry size 0)
  tinygrad  TinyJit step (its first call runs eagerly and compiles every kernel); CACHEDB=<dir>/cache.db

"empty" uses a new, empty cache folder; "warm" runs again on the folder the empty run just filled. Per
round: for each framework, one empty then one warm run; --rounds rounds interleave the frameworks;
MEDIAN reported. NumPy and PyTorch eager compile nothing (dash); torch.compile's first call takes 10-20
s and is not measured here.

tgfn-<backend> (with --backends CPU,LLVM,OPENCL): the tgfn step with DEV=<backend>, a column each; the clock
stops when the device has run the kernels (its driver's synchronize), and OpenCL's PoCL kernel cache
(POCL_CACHE_DIR) lives in the same folder, so "empty" is empty for it too.

Run: python bench/first_call.py [--quick] [--rounds 7] [--frameworks tgfn,jax,tinygrad] [--backends CPU,LLVM,OPENCL]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import json
import os
import sys
import tempfile
import time

from common import Report, Timing, bench_parser, import_peer, jax_persistent_cache, machine_info, worker_result


def cache_env(fw: str, folder: str) -> dict:
  env = dict(os.environ)
  if fw.startswith("tgfn"): env["TGFN_CACHE_DIR"] = folder
  if fw.startswith("tgfn-"): env["DEV"] = fw.split("-", 1)[1].upper()  # a --backends column
  if fw == "tgfn-opencl": env["POCL_CACHE_DIR"] = os.path.join(folder, "pocl")  # PoCL's own kernel cache, emptied too
  if fw == "tinygrad": env["CACHEDB"] = os.path.join(folder, "cache.db")
  return env


def worker(fw: str, folder: str) -> None:
  """Subprocess body: import, build, then time the first step; one JSON line out."""
  mod, desc = import_peer("tgfn" if fw.startswith("tgfn") else fw)
  if mod is None:
    print(json.dumps({"skip": desc}))
    return
  if fw == "jax": jax_persistent_cache(mod, folder)
  from mlp_step import RUNNERS, make_problem
  runner = RUNNERS["tgfn" if fw.startswith("tgfn") else fw](*make_problem())
  t0 = time.perf_counter_ns()
  runner.step()
  if fw == "tinygrad": runner.loss.realize()
  if fw.startswith("tgfn-"):  # an asynchronous device: wait for the kernels, not only their launch
    import importlib
    sync = getattr(importlib.import_module(f"tgfn_drivers.{fw.split('-', 1)[1]}"), "synchronize", None)
    if sync is not None: sync()
  print(json.dumps({"ns": time.perf_counter_ns() - t0, "loss": runner.last_loss()}))


def measure(fw: str, folder: str) -> dict:
  return worker_result([sys.executable, __file__, "--worker", fw, "--cache", folder], cache_env(fw, folder), 600)


def main():
  # 7 rounds: one cold process varies by +-10% on a shared 2-core machine (JAX's own cold figure ranged 0.35-0.48 s
  # across runs), and the median of 3 moved the tgfn / JAX ratio by as much; 15 rounds read 0.97x where runs of 3
  # had read 0.84-1.00x
  ap = bench_parser(__doc__, rounds=7)
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  ap.add_argument("--cache")
  args = ap.parse_args()
  if args.worker: return worker(args.worker, args.cache)
  if args.quick: args.rounds = 1
  rep = Report(args)
  print("first_call: first call of the jitted 784-512-512-10 MLP SGD step (batch 256), fresh process each")
  print(machine_info())
  rows = {"empty": rep.row("first call of the jitted MLP step, empty disk cache, s", "s"),
          "warm": rep.row("the same with a warm disk cache, s", "s")}
  for row in rows.values():
    row.not_applicable("numpy", "eager, compiles nothing")
    row.not_applicable("torch", "eager compiles nothing; torch.compile not measured (10-20 s)")
  fws = [fw for fw in ("tgfn", *rep.backends, "jax", "tinygrad") if rep.wants(fw)]
  for fw in ("tgfn", "jax", "tinygrad"):
    if fw not in fws:
      for row in rows.values(): row.skip(fw, "not selected (--frameworks)")
  samples = {(fw, k): [] for fw in fws for k in rows}
  with tempfile.TemporaryDirectory(prefix="bench-first-call-") as top:
    for r in range(args.rounds):
      for fw in list(fws):
        folder = os.path.join(top, f"{fw}-{r}")
        os.makedirs(folder)
        for kind in rows:
          res = measure(fw, folder)
          if "skip" in res:
            print(f"  {fw} ({kind}): skipped: {res['skip']}")
            for row in rows.values(): row.skip(fw, res["skip"])
            fws.remove(fw)
            break
          samples[(fw, kind)].append(res["ns"])
          print(f"  round {r + 1} {fw:<9} {kind:<6} cache: {res['ns'] / 1e9:.3f} s (loss {res['loss']:.5f})")
  for (fw, kind), s in samples.items():
    if s and fw in fws: rows[kind].add_timing(fw, "jit", Timing(s))
  rep.finish()


if __name__ == "__main__":
  main()
