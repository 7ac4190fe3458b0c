"""Per-call time of `x * 2 + 1` on 16 float32 values, eager and jitted, result ready after each call.

This measures dispatch overhead -- the cost of running an operation and getting its result -- not
arithmetic: 16 multiply-adds take nanoseconds.

  eager     tgfn (x * 2 + 1).block_until_ready(); jax the same; numpy and torch x * 2 + 1;
            tinygrad (x * 2 + 1).realize()
  jitted    tgfn.jit(f)(x).block_until_ready(), the result dropped (tgfn then recycles the previous
            result's buffer, which nobody holds) and, as a variant, with each result still referenced
            when the next call starts (a fresh output buffer per call, as JAX always allocates);
            jax.jit(f)(x).block_until_ready(); tinygrad TinyJit(f)(x) with .realize() inside.
            NumPy and PyTorch eager have no jit: their eager figure is the one to compare with.

Method: one process; after warm-up calls (which compile), interleaved rounds (every framework in turn,
up to --calls calls or --round-seconds per round), each call timed on its own with perf_counter_ns,
samples pooled, MEDIAN reported. Project targets: eager no slower than JAX eager; jitted <= 0.5 x JAX.

Run: python bench/tiny_call.py [--quick] [--frameworks tgfn,numpy] [--rounds 5] [--calls 3000]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import numpy as np

from common import Report, bench_parser, interleave, machine_info

N = 16


def tgfn_calls(tgfn, x_np):
  import tgfn.numpy as tnp
  x = tnp.array(x_np)
  x.block_until_ready()
  f, kept = tgfn.jit(lambda x: x * 2 + 1), [None]

  def call_kept():
    kept[0] = f(x).block_until_ready()
    return kept[0]
  return {"eager": lambda: (x * 2 + 1).block_until_ready(), "jit": lambda: f(x).block_until_ready(),
          "jit, result kept": call_kept}


def jax_calls(jax, x_np):
  x = jax.numpy.asarray(x_np)
  f = jax.jit(lambda x: x * 2 + 1)
  return {"eager": lambda: (x * 2 + 1).block_until_ready(), "jit": lambda: f(x).block_until_ready()}


def tinygrad_calls(tinygrad, x_np):
  from tinygrad import Tensor, TinyJit
  x = Tensor(x_np.copy()).realize()
  f = TinyJit(lambda x: (x * 2 + 1).realize())
  return {"eager": lambda: (x * 2 + 1).realize(), "jit": lambda: f(x)}


def torch_calls(torch, x_np):
  x = torch.from_numpy(x_np.copy())
  return {"eager": lambda: x * 2 + 1}


def numpy_calls(np_, x_np):
  x = x_np.copy()
  return {"eager": lambda: x * 2 + 1}


SETUPS = {"tgfn": tgfn_calls, "jax": jax_calls, "numpy": numpy_calls, "torch": torch_calls, "tinygrad": tinygrad_calls}


def as_numpy(r): return np.asarray(r.numpy() if hasattr(r, "numpy") else r)


def main():
  ap = bench_parser(__doc__)
  ap.add_argument("--calls", type=int, default=3000, help="timed calls per framework per round (at most)")
  args = ap.parse_args()
  if args.quick: args.rounds, args.calls, args.round_seconds = 2, 200, 0.1
  rep = Report(args)
  print("tiny_call: x * 2 + 1 on 16 float32 values, eager and jitted, result ready after each call")
  print(machine_info())
  x_np = np.arange(N, dtype=np.float32)
  want = x_np * 2 + 1
  eager, jitted = rep.row("eager `x*2+1` on 16 floats, µs", "µs"), rep.row("jitted `x*2+1`, result ready, µs", "µs")
  calls = {}
  for fw, setup in SETUPS.items():
    mod, desc = rep.load(fw)
    if mod is None:
      eager.skip(fw, desc), jitted.skip(fw, desc)
      continue
    try:
      for kind, fn in setup(mod, x_np).items():
        got = as_numpy(fn())
        if not np.array_equal(got.reshape(-1), want): raise ValueError(f"{kind} gave {got}, expected {want}")
        calls[(fw, kind)] = fn
    except Exception as e:
      eager.skip(fw, repr(e)[:200]), jitted.skip(fw, repr(e)[:200])
    if fw in ("numpy", "torch"): jitted.not_applicable(fw, "no jit (its eager figure is the one to compare)")
  times = interleave(calls, args.rounds, args.calls, args.round_seconds, warmup=2 if args.quick else 200)
  for (fw, kind), t in times.items():
    (eager if kind == "eager" else jitted).add_timing(fw, kind, t)
  rep.finish()


if __name__ == "__main__":
  main()
