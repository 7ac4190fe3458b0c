"""Per-call time of a tiny jitted function: `x * 2 + 1` on 16 float32 values.

This measures dispatch overhead -- the cost of calling a compiled function and getting its result --
not arithmetic: 16 multiply-adds take nanoseconds. Every call returns a result that is ready to use:

  tgfn       tgfn.jit(f)(x).block_until_ready(), the result dropped (as in a loop that only needs the
             latest value; tgfn then recycles the previous result's buffer, which nobody holds)
  tgfn, kept the same with each result still referenced when the next call starts (no recycling; a
             fresh output buffer per call, as JAX does), to show the dispatch cost without that trick
  jax        jax.jit(f)(x).block_until_ready()                  (CPU backend)
  tinygrad   TinyJit(f)(x) with .realize() inside              (CPU device; DEV=CPU or CPU=1, detected)
  torch      x * 2 + 1, EAGER (torch.compile takes far too long to warm up for a 16-element function)
  numpy      x * 2 + 1, eager

Method: everything runs in this one process, side by side. After a warm-up (which compiles), the
frameworks are timed in interleaved rounds (tgfn, jax, tinygrad, torch, numpy, then again ...), each
call timed on its own with time.perf_counter_ns; the samples of all rounds are pooled and the MEDIAN
per call is reported with p10/p90 and the number of calls. Interleaving spreads any slow period of a
shared machine over all frameworks instead of penalising one.

Target (from the project's issue): tgfn's tiny-call dispatch should take at most half of JAX's
(tgfn median / jax median <= 0.5).

Run: python bench/jit_dispatch.py [--rounds 5] [--calls 3000]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import gc

import numpy as np

from common import Timing, import_peer, machine_info, print_table, skipped, time_calls

N = 16


def setup_tgfn(x_np):
  tgfn, desc = import_peer("tgfn")
  if tgfn is None: return None, desc
  import tgfn.numpy as tnp
  f = tgfn.jit(lambda x: x * 2 + 1)
  x = tnp.array(x_np)
  x.block_until_ready()
  return (lambda: f(x).block_until_ready()), desc


def setup_tgfn_kept(x_np):
  """The same, but each result is still referenced when the next call starts (as when a caller keeps
  it): tgfn cannot recycle the previous result's buffer and allocates a fresh one, as JAX always does."""
  tgfn, desc = import_peer("tgfn")
  if tgfn is None: return None, desc
  import tgfn.numpy as tnp
  f = tgfn.jit(lambda x: x * 2 + 1)
  x = tnp.array(x_np)
  x.block_until_ready()
  kept = [None]

  def call():
    kept[0] = f(x).block_until_ready()
    return kept[0]
  return call, desc + ", previous result kept"


def setup_jax(x_np):
  jax, desc = import_peer("jax")
  if jax is None: return None, desc
  import jax.numpy as jnp
  f = jax.jit(lambda x: x * 2 + 1)
  x = jnp.asarray(x_np)
  return (lambda: f(x).block_until_ready()), desc


def setup_tinygrad(x_np):
  tinygrad, desc = import_peer("tinygrad")
  if tinygrad is None: return None, desc
  from tinygrad import Tensor, TinyJit

  @TinyJit
  def f(x): return (x * 2 + 1).realize()
  x = Tensor(x_np).realize()
  return (lambda: f(x)), desc


def setup_torch(x_np):
  torch, desc = import_peer("torch")
  if torch is None: return None, desc
  x = torch.from_numpy(x_np.copy())
  return (lambda: x * 2 + 1), desc + ", eager"


def setup_numpy(x_np):
  x = x_np.copy()
  return (lambda: x * 2 + 1), import_peer("numpy")[1] + ", eager"


def as_numpy(r):
  if hasattr(r, "numpy"): return np.asarray(r.numpy())
  return np.asarray(r)


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (samples are pooled)")
  ap.add_argument("--calls", type=int, default=3000, help="timed calls per framework per round (at most)")
  ap.add_argument("--round-seconds", type=float, default=1.0, help="time cap per framework per round")
  args = ap.parse_args()

  print("jit_dispatch: per-call time of jit(lambda x: x * 2 + 1) on 16 float32 values, result ready each call")
  print(machine_info())
  x_np = np.arange(N, dtype=np.float32)
  want = x_np * 2 + 1

  labels = {"tgfn": "tgfn (jit)", "tgfn-kept": "tgfn (jit, result kept)", "jax": "jax (jit)", "tinygrad": "tinygrad (TinyJit)",
            "torch": "torch (eager)", "numpy": "numpy (eager)"}
  setups = {"tgfn": setup_tgfn, "tgfn-kept": setup_tgfn_kept, "jax": setup_jax, "tinygrad": setup_tinygrad, "torch": setup_torch,
            "numpy": setup_numpy}
  calls, results = {}, {}
  for name, setup in setups.items():
    try:
      fn, desc = setup(x_np)
    except Exception as e:  # a peer that imports but fails to run: skip it, say why
      fn, desc = None, f"{type(e).__name__}: {e}"
    if fn is None:
      skipped(name, desc)
      results[name] = desc
      continue
    got = as_numpy(fn())
    if not np.array_equal(got.reshape(-1), want):
      skipped(name, f"wrong result {got}")
      results[name] = "wrong result"
      continue
    print(f"  {name}: {desc}")
    calls[name] = fn
    results[name] = Timing([])

  for name, fn in calls.items(): time_calls(fn, reps=0, warmup=200)  # compile + warm caches
  for r in range(args.rounds):
    for name, fn in calls.items():
      gc.collect()
      results[name] = results[name].merge(time_calls(fn, reps=args.calls, warmup=20, max_seconds=args.round_seconds))

  print_table(f"median per call, microseconds ({args.rounds} interleaved rounds pooled)",
              [(labels[k], v) for k, v in results.items()], unit="us")
  j = results.get("jax")
  if isinstance(j, Timing) and j.n and any(isinstance(results.get(k), Timing) for k in ("tgfn", "tgfn-kept")):
    print("\ntarget (project issue): tgfn tiny-call dispatch <= 0.5 x JAX's.")
    for k in ("tgfn", "tgfn-kept"):
      t = results.get(k)
      if not isinstance(t, Timing) or not t.n: continue
      ratio = t.median / j.median
      print(f"  {labels[k]:<24} / jax = {t.median / 1e3:.2f} us / {j.median / 1e3:.2f} us = {ratio:.2f} -> "
            f"{'MET' if ratio <= 0.5 else 'NOT met'}")
  else:
    print("\ntarget (project issue): tgfn tiny-call dispatch <= 0.5 x JAX's: cannot check (jax or tgfn missing)")


if __name__ == "__main__":
  main()
