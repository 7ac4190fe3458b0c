"""One SGD training step of a small conv net on the 8x8 digits, ms per step, per framework.

The net (NCHW, PyTorch layouts): conv 1->8 3x3 pad 1, ReLU; conv 8->16 3x3 stride 2 pad 1, ReLU
(16 x 4 x 4); flatten; linear 256->10; softmax cross-entropy on one-hot labels (batch mean). SGD, lr
0.05, batch 64 (the first 64 training digits of tgfn.nn.datasets.digits(), the same batch every step).

  tgfn      tgfn.jit(step, donate_argnums=0) with tgfn.nn.functional.conv2d
  jax       jax.jit(step, donate_argnums=0) with lax.conv_general_dilated
  torch     eager, F.conv2d, autograd.grad + in-place update
  tinygrad  TinyJit over Tensor.conv2d + Tensor.gradient + assign
  numpy     hand-written im2col (sliding_window_view + einsum) forward and backward

Correctness first: 3 steps from the same parameters; parameters and the loss after them are compared
with a float64 NumPy run (1e-4 relative). Timing: warm-up steps, then --rounds interleaved rounds of
--round-seconds; each step timed on its own with parameters and loss ready; MEDIAN reported.

Run: python bench/conv_step.py [--quick] [--rounds 5] [--round-seconds 1]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from common import Report, bench_parser, error_text, interleave, machine_info

BATCH, LR = 64, 0.05
KEYS = ("c1", "d1", "c2", "d2", "w", "b")  # conv weights c*, conv biases d*, linear w, b
STRIDES = {"c1": 1, "c2": 2}


def make_problem(seed: int = 0):
  from tgfn.nn import datasets
  xtr, ytr, _, _ = datasets.digits()
  x = np.asarray(xtr, np.float32)[:BATCH].reshape(BATCH, 1, 8, 8)
  y = np.eye(10, dtype=np.float32)[np.asarray(ytr)[:BATCH]]
  rng = np.random.default_rng(seed)
  u = lambda shape, fan_in: rng.uniform(-1, 1, shape).astype(np.float32) / np.float32(np.sqrt(fan_in))  # noqa: E731
  p = {"c1": u((8, 1, 3, 3), 9), "d1": u((8,), 9), "c2": u((16, 8, 3, 3), 72), "d2": u((16,), 72),
       "w": u((256, 10), 256), "b": u((10,), 256)}
  return p, x, y


# ------------------------------------------------------------------------------------ numpy, by hand

def conv_fwd(x, w, b, s):
  win = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))[:, :, ::s, ::s]
  return np.einsum("nchwkl,ockl->nohw", win, w, optimize=True) + b[:, None, None], win


def conv_bwd(dy, win, w, x_shape, s):
  dw = np.einsum("nohw,nchwkl->ockl", dy, win, optimize=True)
  dwin = np.einsum("nohw,ockl->nchwkl", dy, w, optimize=True)
  n, c, h, wd = x_shape
  dxp = np.zeros((n, c, h + 2, wd + 2), dy.dtype)
  oh, ow = dy.shape[2:]
  for k in range(3):
    for m in range(3): dxp[:, :, k:k + s * oh:s, m:m + s * ow:s] += dwin[..., k, m]
  return dxp[:, :, 1:-1, 1:-1], dw, dy.sum((0, 2, 3))


def numpy_step(p, x, y):
  z1, win1 = conv_fwd(x, p["c1"], p["d1"], 1)
  h1 = np.maximum(z1, 0)
  z2, win2 = conv_fwd(h1, p["c2"], p["d2"], 2)
  h2 = np.maximum(z2, 0)
  f = h2.reshape(len(x), -1)
  logits = f @ p["w"] + p["b"]
  e = np.exp(logits - logits.max(1, keepdims=True))
  sm = e / e.sum(1, keepdims=True)
  loss = -(y * np.log(sm)).sum() / len(x)
  dl = (sm - y) / len(x)
  g = {"w": f.T @ dl, "b": dl.sum(0)}
  dz2 = (dl @ p["w"].T).reshape(h2.shape) * (z2 > 0)
  dh1, g["c2"], g["d2"] = conv_bwd(dz2, win2, p["c2"], h1.shape, 2)
  _, g["c1"], g["d1"] = conv_bwd(dh1 * (z1 > 0), win1, p["c1"], x.shape, 1)
  return {k: p[k] - p[k].dtype.type(LR) * g[k] for k in p}, loss


# ------------------------------------------------------------------------------------- the frameworks

def loss_fn(conv, relu, log_softmax):
  def loss(p, x, y):
    h = relu(conv(x, p["c1"], p["d1"], 1))
    h = relu(conv(h, p["c2"], p["d2"], 2))
    logits = h.reshape(x.shape[0], -1) @ p["w"] + p["b"]
    return -(y * log_softmax(logits)).sum() / x.shape[0]
  return loss


def make_runner(fw, mod, P, X, Y):
  """(step: () -> None, state: () -> (params as float64 NumPy, loss)) for one framework."""
  box = {}
  if fw == "numpy":
    box["p"] = dict(P)
    def step(): box["p"], box["loss"] = numpy_step(box["p"], X, Y)
    return step, lambda: ({k: v.astype(np.float64) for k, v in box["p"].items()}, float(box["loss"]))
  if fw in ("tgfn", "jax"):
    if fw == "tgfn":
      import tgfn.numpy as xp
      from tgfn.nn import functional as F
      conv = lambda x, w, b, s: F.conv2d(x, w, b, stride=s, padding=1)  # noqa: E731
      loss, ready = loss_fn(conv, F.relu, F.log_softmax), lambda t: [v.block_until_ready() for v in t]  # noqa: E731
    else:
      xp, lax = mod.numpy, mod.lax
      def conv(x, w, b, s):
        return lax.conv_general_dilated(x, w, (s, s), [(1, 1), (1, 1)], dimension_numbers=("NCHW", "OIHW", "NCHW")) + b[:, None, None]
      loss, ready = loss_fn(conv, mod.nn.relu, mod.nn.log_softmax), mod.block_until_ready

    def sgd(p, x, y):
      value, g = mod.value_and_grad(loss)(p, x, y)
      return {k: p[k] - LR * g[k] for k in p}, value
    jstep = mod.jit(sgd, donate_argnums=0)
    box["p"], x, y = {k: xp.array(v) for k, v in P.items()}, xp.array(X), xp.array(Y)

    def step():
      box["p"], box["loss"] = jstep(box["p"], x, y)
      ready([*box["p"].values(), box["loss"]])
    return step, lambda: ({k: np.asarray(v, np.float64) for k, v in box["p"].items()}, float(box["loss"]))
  if fw == "torch":
    torch, F = mod, mod.nn.functional
    p = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in P.items()}
    loss = loss_fn(lambda x, w, b, s: F.conv2d(x, w, b, stride=s, padding=1), torch.relu,
                   lambda z: torch.log_softmax(z, -1))
    x, y, plist = torch.from_numpy(X), torch.from_numpy(Y), [p[k] for k in KEYS]

    def step():
      box["loss"] = loss(p, x, y)
      with torch.no_grad():
        for t, g in zip(plist, torch.autograd.grad(box["loss"], plist)): t.sub_(LR * g)
    return step, lambda: ({k: v.detach().numpy().astype(np.float64) for k, v in p.items()}, float(box["loss"].detach()))
  from tinygrad import Tensor, TinyJit
  p = {k: Tensor(v.copy()).realize() for k, v in P.items()}
  x, y, plist = Tensor(X.copy()).realize(), Tensor(Y.copy()).realize(), [p[k] for k in KEYS]
  loss = loss_fn(lambda x, w, b, s: x.conv2d(w, b, stride=s, padding=1), Tensor.relu, lambda z: z.log_softmax(-1))

  @TinyJit
  def jstep(x, y):
    value = loss(p, x, y)
    for t, g in zip(plist, value.gradient(*plist)): t.assign(t.detach() - LR * g)
    Tensor.realize(value, *plist)
    return value

  def step(): box["loss"] = jstep(x, y)
  return step, lambda: ({k: v.numpy().astype(np.float64) for k, v in p.items()}, float(box["loss"].item()))


def main():
  ap = bench_parser(__doc__)
  args = ap.parse_args()
  if args.quick: args.rounds, args.round_seconds = 1, 0.1
  rep = Report(args)
  print(f"conv_step: SGD step of conv(1->8) conv(8->16, stride 2) linear(256->10) on 8x8 digits, batch {BATCH}")
  print(machine_info())
  row = rep.row(f"conv-net SGD step on the 8x8 digits, batch {BATCH}, ms", "ms")
  P, X, Y = make_problem()
  ref_p = {k: v.astype(np.float64) for k, v in P.items()}
  for _ in range(3): ref_p, _ = numpy_step(ref_p, X.astype(np.float64), Y.astype(np.float64))
  _, ref_loss = numpy_step(ref_p, X.astype(np.float64), Y.astype(np.float64))
  calls = {}
  for fw in ("tgfn", "jax", "numpy", "torch", "tinygrad"):
    mod, desc = rep.load(fw)
    if mod is None:
      row.skip(fw, desc)
      continue
    try:
      step, state = make_runner(fw, mod, P, X, Y)
      for _ in range(3): step()
      params, _ = state()
      step()
      perr = max(float(np.abs(params[k] - ref_p[k]).max() / np.abs(ref_p[k]).max()) for k in KEYS)
      lerr = abs(state()[1] - ref_loss) / abs(ref_loss)
      if max(perr, lerr) > 1e-4: raise ValueError(f"differs from float64 NumPy: params {perr:.1e}, loss {lerr:.1e}")
      print(f"  {fw}: matches float64 NumPy after 3 steps (params {perr:.1e}, loss {lerr:.1e})")
      calls[fw] = step
    except Exception as e:
      print(f"  {fw}: skipped: {error_text(e)}")
      row.skip(fw, error_text(e))
  labels = {"tgfn": "jit", "jax": "jit", "numpy": "im2col by hand", "torch": "eager", "tinygrad": "TinyJit"}
  for fw, t in interleave(calls, args.rounds, 1000, args.round_seconds, warmup=1 if args.quick else 3).items():
    row.add_timing(fw, labels[fw], t)
  rep.finish()


if __name__ == "__main__":
  main()
