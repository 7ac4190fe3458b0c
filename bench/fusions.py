"""Row-wise softmax and layer norm of a large float32 matrix, GB/s, against the machine's copy bandwidth.

Both read the matrix and write one of the same size; a fully fused kernel streams it once each way, so
its GB/s = 2 x matrix bytes / time can approach the memory bandwidth, measured here in the same process
as a NumPy copy of --copy-mib MiB (np.copyto: GB/s = 2 x bytes / time, read + write). Unfused code reads
the matrix several times and lands well below. Matrix: --rows x --cols (8192 x 1024 = 32 MiB, larger
than the last-level caches of the machines this runs on).

  softmax    exp(x - max) / sum(exp(x - max)) over each row
             tgfn jit(nn.functional.softmax); jax jit(jax.nn.softmax); torch.softmax (eager);
             tinygrad TinyJit(x.softmax(-1)); numpy by hand (max, exp, sum, divide: unfused)
  layernorm  (x - mean) / sqrt(var + 1e-5) * gamma + beta over each row
             tgfn and jax: that formula under jit; torch F.layer_norm (eager); tinygrad
             TinyJit(x.layernorm() * gamma + beta); numpy the formula (unfused)

Each result is checked against float64 NumPy first (max |diff| <= 1e-4). Timing: warm-up calls, then
--rounds interleaved rounds of --round-seconds, MEDIAN reported.

Run: python bench/fusions.py [--quick] [--rows 8192] [--cols 1024]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import numpy as np

from common import Report, bench_parser, error_text, interleave, machine_info

EPS = 1e-5


def layernorm(xp, x, g, b):
  mean = x.mean(axis=-1, keepdims=True)
  d = x - mean
  return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + EPS) * g + b


def numpy_softmax(x):
  e = np.exp(x - x.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def ops(fw, mod, x, g, b):
  """{"softmax": call, "layernorm": call}, each returning its result ready."""
  if fw == "numpy": return {"softmax": lambda: numpy_softmax(x), "layernorm": lambda: layernorm(np, x, g, b)}
  if fw == "tgfn":
    import tgfn.numpy as tnp
    from tgfn.nn import functional as F
    tx, tg, tb = tnp.array(x), tnp.array(g), tnp.array(b)
    sm, ln = mod.jit(lambda x: F.softmax(x, axis=-1)), mod.jit(lambda x, g, b: layernorm(tnp, x, g, b))
    return {"softmax": lambda: sm(tx).block_until_ready(), "layernorm": lambda: ln(tx, tg, tb).block_until_ready()}
  if fw == "jax":
    jnp = mod.numpy
    jx, jg, jb = jnp.asarray(x), jnp.asarray(g), jnp.asarray(b)
    sm, ln = mod.jit(lambda x: mod.nn.softmax(x, axis=-1)), mod.jit(lambda x, g, b: layernorm(jnp, x, g, b))
    return {"softmax": lambda: sm(jx).block_until_ready(), "layernorm": lambda: ln(jx, jg, jb).block_until_ready()}
  if fw == "torch":
    tx, tg, tb = (mod.from_numpy(a.copy()) for a in (x, g, b))
    F = mod.nn.functional
    return {"softmax": lambda: mod.softmax(tx, -1), "layernorm": lambda: F.layer_norm(tx, tx.shape[-1:], tg, tb, EPS)}
  from tinygrad import Tensor, TinyJit
  tx, tg, tb = (Tensor(a.copy()).realize() for a in (x, g, b))
  sm, ln = TinyJit(lambda x: x.softmax(-1).realize()), TinyJit(lambda x, g, b: (x.layernorm(eps=EPS) * g + b).realize())
  return {"softmax": lambda: sm(tx), "layernorm": lambda: ln(tx, tg, tb)}


def main():
  ap = bench_parser(__doc__)
  ap.add_argument("--rows", type=int, default=8192)
  ap.add_argument("--cols", type=int, default=1024)
  ap.add_argument("--copy-mib", type=int, default=256)
  args = ap.parse_args()
  if args.quick: args.rows, args.cols, args.copy_mib, args.rounds, args.round_seconds = 256, 256, 16, 1, 0.1
  rep = Report(args)
  shape = f"{args.rows}x{args.cols}"
  print(f"fusions: row-wise softmax and layer norm of a {shape} float32 matrix, GB/s vs a NumPy copy")
  print(machine_info())
  rows = {"copy": rep.row(f"memory bandwidth: NumPy copy of {args.copy_mib} MiB, GB/s", "GB/s", True),
          "softmax": rep.row(f"softmax over rows, {shape}, GB/s", "GB/s", True),
          "layernorm": rep.row(f"layernorm over rows, {shape}, GB/s", "GB/s", True)}
  for fw in ("tgfn", "jax", "torch", "tinygrad"): rows["copy"].not_applicable(fw, "measured with NumPy only")
  rng = np.random.default_rng(0)
  x = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
  g, b = (rng.standard_normal(args.cols).astype(np.float32) for _ in range(2))
  x64 = x.astype(np.float64)
  want = {"softmax": numpy_softmax(x64), "layernorm": layernorm(np, x64, g.astype(np.float64), b.astype(np.float64))}
  src = np.ones(args.copy_mib * 2 ** 20 // 4, np.float32)
  dst = np.empty_like(src)
  calls = {("numpy", "copy"): lambda: np.copyto(dst, src)}
  for fw in ("tgfn", "jax", "numpy", "torch", "tinygrad"):
    mod, desc = rep.load(fw)
    if mod is None:
      for k in ("softmax", "layernorm"): rows[k].skip(fw, desc)
      continue
    for kind, fn in ops(fw, mod, x, g, b).items():
      try:
        got = fn()
        err = float(np.abs(np.asarray(got.numpy() if hasattr(got, "numpy") else got, np.float64) - want[kind]).max())
        if err > 1e-4: raise ValueError(f"differs from float64 NumPy by {err:.1e}")
        calls[(fw, kind)] = fn
      except Exception as e:
        print(f"  {fw} {kind}: skipped: {error_text(e)}")
        rows[kind].skip(fw, error_text(e))
  times = interleave(calls, args.rounds, 1000, args.round_seconds, warmup=1 if args.quick else 3)
  for (fw, kind), t in times.items():
    nbytes = 2 * (src.nbytes if kind == "copy" else x.nbytes)
    rows[kind].add_timing(fw, "fused" if fw != "numpy" else "unfused", t, amount=nbytes / 1e9)
  bw = rows["copy"].primary("numpy")
  if bw:
    for kind in ("softmax", "layernorm"):
      for fw, cells in rows[kind].cells.items(): rows[kind].add(fw, "% of copy", 100 * cells[0]["value"] / bw)
  rep.finish()


if __name__ == "__main__":
  main()
