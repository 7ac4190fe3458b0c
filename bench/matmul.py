"""float32 matmul C = A @ B of square matrices, GFLOP/s (2 n³ flops per product), per framework.

  tgfn      tgfn.jit(lambda a, b: a @ b)(a, b).block_until_ready()
  jax       jax.jit(lambda a, b: a @ b)(a, b).block_until_ready()          (XLA CPU: Eigen / oneDNN)
  numpy     a @ b                                                          (OpenBLAS)
  torch     a @ b, eager                                                   (MKL / oneDNN)
  tinygrad  TinyJit(lambda a, b: (a @ b).realize()), DEV=CPU               (its default opts, no BEAM)

tgfn (BEAM=2), a variant in the tgfn cell for the --beam-sizes (1024 and 2048 by default): the same jitted
product, compiled with BEAM=2 set so its kernels are chosen by timed search (tgfn/codegen/search.py).
The first run of the script searches (progress on stderr; on the 2-core machine under load: 25-50 s for 1024², 2.5-4 min
for 2048², whose candidates take 0.2-0.5 s a run); the winner is cached on disk, so
later runs time only the kernels. With BEAM set in the environment the primary tgfn figure is searched too.

Each framework's result is checked against a float64 NumPy product first (max |diff| <= 1e-4 x max
|ref|). Timing: one warm-up call (compiles), then --rounds interleaved rounds of up to --round-seconds
each (at least one call per round; a slow framework's 2048² product takes seconds), samples pooled,
MEDIAN reported; GFLOP/s = 2 n³ / median. Threads: each framework uses its own default (tgfn: one).

tgfn-<backend> (with --backends CPU,LLVM,OPENCL): the tgfn product on each other backend, a column each.

Run: python bench/matmul.py [--quick] [--sizes 1024,2048] [--rounds 3] [--round-seconds 2] [--beam 2]
     [--backends CPU,LLVM,OPENCL]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)


import numpy as np

from common import Report, bench_parser, interleave, machine_info, on_backend, run_on


def products(fw, mod, a, b):
  """A zero-argument function computing the product with its result ready."""
  if fw.startswith("tgfn"):  # tgfn, or tgfn-<backend> (made under on_backend)
    import tgfn.numpy as tnp
    ta, tb, f = tnp.array(a), tnp.array(b), mod.jit(lambda x, y: x @ y)
    return lambda: f(ta, tb).block_until_ready()
  if fw == "jax":
    ja, jb, f = mod.numpy.asarray(a), mod.numpy.asarray(b), mod.jit(lambda x, y: x @ y)
    return lambda: f(ja, jb).block_until_ready()
  if fw == "numpy": return lambda: a @ b
  if fw == "torch":
    ta, tb = mod.from_numpy(a.copy()), mod.from_numpy(b.copy())
    return lambda: ta @ tb
  from tinygrad import Tensor, TinyJit
  ta, tb = Tensor(a.copy()).realize(), Tensor(b.copy()).realize()
  f = TinyJit(lambda x, y: (x @ y).realize())
  return lambda: f(ta, tb)


def searched_product(tgfn, a, b, width):
  """The tgfn product compiled with BEAM=width: the search runs in the first, compiling call."""
  with tgfn.Context(BEAM=width):
    fn = products("tgfn", tgfn, a, b)
    fn()
  return fn


def main():
  ap = bench_parser(__doc__, rounds=3, round_seconds=2.0)
  ap.add_argument("--sizes", default="1024,2048")
  ap.add_argument("--beam", type=int, default=2, help="tgfn's BEAM width for the variant (0: none)")
  ap.add_argument("--beam-sizes", default="1024,2048", help="the sizes that get a BEAM variant")
  args = ap.parse_args()
  if args.quick: args.sizes, args.beam_sizes, args.rounds, args.round_seconds = "128", "128", 2, 0.1
  rep = Report(args)
  print("matmul: float32 square A @ B, GFLOP/s")
  print(machine_info())
  mods = {fw: rep.load(fw) for fw in ("tgfn", *rep.backends, "jax", "numpy", "torch", "tinygrad")}
  rng = np.random.default_rng(0)
  for n in map(int, args.sizes.split(",")):
    row = rep.row(f"matmul {n}², GFLOP/s", "GFLOP/s", higher_is_better=True)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    calls = {}
    for fw, (mod, desc) in mods.items():
      if mod is None:
        row.skip(fw, desc)
        continue
      try:
        with on_backend(rep.backend(fw)): fn = run_on(rep.backend(fw), products(fw, mod, a, b))
        out = fn()  # also the first, compiling call
        got = np.asarray(out.numpy() if hasattr(out, "numpy") else out, np.float64)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        if err > 1e-4: raise ValueError(f"result differs from the float64 product by {err:.2e} (relative)")
        calls[fw] = fn
      except Exception as e:
        row.skip(fw, repr(e)[:200])
    searched = f"BEAM={args.beam}"
    if "tgfn" in calls and args.beam and str(n) in args.beam_sizes.split(","):
      try:
        fn = searched_product(mods["tgfn"][0], a, b, args.beam)
        err = np.abs(np.asarray(fn().numpy(), np.float64) - ref).max() / np.abs(ref).max()
        if err > 1e-4: raise ValueError(f"result differs from the float64 product by {err:.2e} (relative)")
        calls[searched] = fn
      except Exception as e:
        print(f"  n={n}: tgfn {searched} failed: {e!r:.200}")
    print(f"  n={n}: checked against float64; timing {', '.join(calls)}")
    for fw, t in interleave(calls, args.rounds, 1000, args.round_seconds, warmup=1).items():
      if fw == searched:  # a variant in tgfn's cell, after its primary (heuristic) figure
        if "tgfn" in row.cells: row.add_timing("tgfn", searched, t, amount=2 * n ** 3 / 1e9)
      else: row.add_timing(fw, "jit" if fw.startswith(("tgfn", "jax", "tinygrad")) else "eager", t, amount=2 * n ** 3 / 1e9)
  rep.finish()


if __name__ == "__main__":
  main()
