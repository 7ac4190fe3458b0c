"""Per-example gradients of a 784-128-128-10 tanh MLP, batch 128: jit(vmap(grad(loss))), ms per call.

The loss of ONE example: softmax cross-entropy of the MLP's logits against a one-hot label. Its gradient
with respect to every parameter, for each of the 128 examples of the batch (outputs: 128 copies of the
parameter shapes, ~13 MiB):

  tgfn      tgfn.jit(tgfn.vmap(tgfn.grad(loss), in_axes=(None, 0, 0)))
  jax       jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
  torch     torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0)), eager
  numpy     hand-written batched backward with einsum outer products (what vmap should produce)
  tinygrad  has no vmap: skipped

Each result is checked against the float64 NumPy version first (max |diff| <= 1e-4 x max |ref| per
parameter). Timing: warm-up calls (compile), then --rounds interleaved rounds of --round-seconds, each
call timed on its own with every output ready; samples pooled; MEDIAN reported.

Run: python bench/per_example_grads.py [--quick] [--rounds 5] [--round-seconds 1]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import numpy as np

from common import Report, bench_parser, interleave, machine_info

SIZES = (784, 128, 128, 10)
BATCH = 128
KEYS = ("w1", "b1", "w2", "b2", "w3", "b3")


def make_problem(seed: int = 0):
  rng = np.random.default_rng(seed)
  p = {}
  for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
    p[f"w{i}"] = (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
    p[f"b{i}"] = (0.1 * rng.standard_normal(b)).astype(np.float32)
  x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
  y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
  return p, x, y


def numpy_grads(p, x, y):
  """Per-example gradients, batched by hand, in the dtype of the inputs."""
  h1 = np.tanh(x @ p["w1"] + p["b1"])
  h2 = np.tanh(h1 @ p["w2"] + p["b2"])
  logits = h2 @ p["w3"] + p["b3"]
  e = np.exp(logits - logits.max(axis=1, keepdims=True))
  d3 = e / e.sum(axis=1, keepdims=True) - y  # d loss_n / d logits_n
  d2 = (d3 @ p["w3"].T) * (1 - h2 * h2)
  d1 = (d2 @ p["w2"].T) * (1 - h1 * h1)
  outer = lambda a, b: np.einsum("ni,nj->nij", a, b)  # noqa: E731
  return {"w1": outer(x, d1), "b1": d1, "w2": outer(h1, d2), "b2": d2, "w3": outer(h2, d3), "b3": d3}


def loss_of(xp, tanh, log_softmax):
  """The one-example loss written once for every array library."""
  def loss(p, x, y):
    h = tanh(x @ p["w1"] + p["b1"])
    h = tanh(h @ p["w2"] + p["b2"])
    return -(y * log_softmax(h @ p["w3"] + p["b3"])).sum()
  return loss


def setup(fw, mod, P, X, Y):
  """A zero-argument call returning the per-example gradients (ready) as a dict of arrays."""
  if fw == "numpy": return lambda: numpy_grads(P, X, Y)
  if fw == "tgfn":
    import tgfn.numpy as tnp
    from tgfn.nn import functional as F
    f = mod.jit(mod.vmap(mod.grad(loss_of(tnp, tnp.tanh, F.log_softmax)), in_axes=(None, 0, 0)))
    p, x, y = {k: tnp.array(v) for k, v in P.items()}, tnp.array(X), tnp.array(Y)

    def call():
      g = f(p, x, y)
      for v in g.values(): v.block_until_ready()
      return g
    return call
  if fw == "jax":
    jnp = mod.numpy
    f = mod.jit(mod.vmap(mod.grad(loss_of(jnp, jnp.tanh, mod.nn.log_softmax)), in_axes=(None, 0, 0)))
    p, x, y = {k: jnp.asarray(v) for k, v in P.items()}, jnp.asarray(X), jnp.asarray(Y)
    return lambda: mod.block_until_ready(f(p, x, y))
  torch = mod
  f = torch.func.vmap(torch.func.grad(loss_of(torch, torch.tanh, lambda z: torch.log_softmax(z, -1))), in_dims=(None, 0, 0))
  p, x, y = {k: torch.from_numpy(v.copy()) for k, v in P.items()}, torch.from_numpy(X), torch.from_numpy(Y)
  return lambda: f(p, x, y)


def main():
  ap = bench_parser(__doc__)
  args = ap.parse_args()
  if args.quick: args.rounds, args.round_seconds = 1, 0.1
  rep = Report(args)
  print(f"per_example_grads: jit(vmap(grad)) of a {'-'.join(map(str, SIZES))} tanh MLP, batch {BATCH}, float32")
  print(machine_info())
  row = rep.row(f"per-example grads `jit(vmap(grad))`, {'-'.join(map(str, SIZES))}, batch {BATCH}, ms", "ms")
  P, X, Y = make_problem()
  ref = numpy_grads({k: v.astype(np.float64) for k, v in P.items()}, X.astype(np.float64), Y.astype(np.float64))
  calls, labels = {}, {"tgfn": "jit(vmap(grad))", "jax": "jit(vmap(grad))", "torch": "torch.func", "numpy": "einsum"}
  for fw in ("tgfn", "jax", "numpy", "torch"):
    mod, desc = rep.load(fw)
    if mod is None:
      row.skip(fw, desc)
      continue
    try:
      fn = setup(fw, mod, P, X, Y)
      got = fn()
      err = max(float(np.abs(np.asarray(got[k], np.float64) - ref[k]).max() / np.abs(ref[k]).max()) for k in KEYS)
      if err > 1e-4: raise ValueError(f"per-example gradients differ from float64 NumPy by {err:.1e} (relative)")
      print(f"  {fw}: matches float64 NumPy (max rel. err {err:.1e})")
      calls[fw] = fn
    except Exception as e:
      row.skip(fw, repr(e)[:200])
  row.not_applicable("tinygrad", "no vmap")
  for fw, t in interleave(calls, args.rounds, 1000, args.round_seconds, warmup=1 if args.quick else 3).items():
    row.add_timing(fw, labels[fw], t)
  rep.finish()


if __name__ == "__main__":
  main()
