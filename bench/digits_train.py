"""The main job (tgfn/train_digits.py) trained end to end by tgfn and its peers, side by side.

The same training for every framework: a 64-128-128-10 ReLU MLP, softmax cross-entropy on integer
labels (mean over the batch), Adam (lr 3e-3, b1 0.9, b2 0.999, eps 1e-8), batch 64, `--epochs` epochs
(20) of the 1438 training images of `tgfn.nn.datasets.digits()` (converted to NumPy for the peers), 22
steps per epoch (the last 30 samples of each shuffle are dropped, as in train_digits). Identical for
all:
  - initial weights: PyTorch's default Linear init, U(-1/sqrt(in), 1/sqrt(in)) for weights (out, in)
    and biases, drawn once with NumPy (seed `--seed`), so the final accuracies are comparable;
  - batch order: one np.random.default_rng(`--seed`) permutation per epoch, drawn once up front.

  tgfn            tgfn.jit(step) over nn.Sequential(nn.Linear...) + nn.optim.adam (as train_digits)
  jax             jax.jit(step), optax.adam if optax is installed, else a hand-written Adam
  torch (eager)   nn.Sequential + F.cross_entropy + torch.optim.Adam
  tinygrad        TinyJit over forward + backward + tinygrad.nn.optim.Adam, CPU device

Each step is timed on its own (time.perf_counter_ns; parameters/loss ready at the end); the batch is
moved to the framework before the clock starts. Reported: the first step (which compiles) on its own,
the MEDIAN of the other steps with p10/p90, steps/s = 1 / median, the time spent in each framework's
steps and batch conversions (first step included) and the final test accuracy on the 359 test images.
All frameworks train in this one process, interleaved step by step (step i of each in turn).

Run: python bench/digits_train.py [--quick] [--epochs 20] [--frameworks tgfn,jax,torch,tinygrad]
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import time

import numpy as np

from common import Report, Timing, bench_parser, error_text, fmt_time, import_peer, machine_info, skipped

SIZES = (64, 128, 128, 10)
BATCH = 64
LR = 3e-3
B1, B2, EPS = 0.9, 0.999, 1e-8


def load_data():
  """digits() as float32 / int32 NumPy arrays, images flattened to 64."""
  from tgfn.nn import datasets
  xtr, ytr, xte, yte = datasets.digits()
  return (np.asarray(xtr, np.float32).reshape(-1, 64), np.asarray(ytr, np.int32),
          np.asarray(xte, np.float32).reshape(-1, 64), np.asarray(yte, np.int32))


def init_params(seed: int):
  """[(weight (out, in), bias (out,))] per layer, PyTorch's default Linear init, float32."""
  rng = np.random.default_rng(seed)
  layers = []
  for a, b in zip(SIZES[:-1], SIZES[1:]):
    bound = 1.0 / np.sqrt(a)
    w = rng.uniform(-bound, bound, (b, a)).astype(np.float32)
    layers.append((w, rng.uniform(-bound, bound, b).astype(np.float32)))
  return layers


def batch_order(n: int, epochs: int, seed: int):
  """Index arrays, one per step, from one generator: a fresh permutation per epoch (as train_digits)."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(epochs):
    perm = rng.permutation(n)
    out += [perm[b * BATCH:(b + 1) * BATCH] for b in range(n // BATCH)]
  return out


# ---------------------------------------------------------------------------------------------- tgfn

class TgfnRunner:
  label = "tgfn (jit, nn.optim.adam)"

  def __init__(self, init, xte, yte):
    import tgfn
    import tgfn.numpy as tnp
    from tgfn import nn
    self.tnp = tnp
    layers = [nn.Linear(tnp.array(w), tnp.array(b)) for w, b in init]
    self.model = nn.Sequential([layers[0], nn.relu, layers[1], nn.relu, layers[2]])
    self.opt = nn.optim.adam(LR, B1, B2, EPS)
    self.state = self.opt.init(self.model)
    opt = self.opt

    def loss_fn(model, x, y): return nn.cross_entropy(model(x), y)

    @tgfn.jit
    def step(model, state, x, y):
      loss, grads = tgfn.value_and_grad(loss_fn)(model, x, y)
      updates, state = opt.update(grads, state, model)
      return nn.optim.apply_updates(model, updates), state, loss

    @tgfn.jit
    def accuracy(model, x, y): return (tnp.argmax(model(x), axis=-1) == y).mean()

    self.jstep, self.jacc = step, accuracy
    self.xte, self.yte = tnp.array(xte), tnp.array(yte)

  def put(self, x, y): return self.tnp.array(x), self.tnp.array(y)

  def step(self, x, y):
    self.model, self.state, self.loss = self.jstep(self.model, self.state, x, y)
    self.loss.block_until_ready()

  def accuracy(self): return float(self.jacc(self.model, self.xte, self.yte))
  def last_loss(self): return float(self.loss)


# ----------------------------------------------------------------------------------------------- jax

class JaxRunner:
  label = "jax (jit, hand-written Adam)"

  def __init__(self, init, xte, yte):
    import jax
    import jax.numpy as jnp
    optax, _ = import_peer("optax")
    self.jax, self.jnp = jax, jnp

    def forward(p, x):
      (w1, b1), (w2, b2), (w3, b3) = p
      h = jax.nn.relu(x @ w1.T + b1)
      h = jax.nn.relu(h @ w2.T + b2)
      return h @ w3.T + b3

    def loss_fn(p, x, y):
      logp = jax.nn.log_softmax(forward(p, x), axis=-1)
      return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    self.p = [(jnp.asarray(w), jnp.asarray(b)) for w, b in init]
    if optax is not None:
      self.label = "jax (jit, optax.adam)"
      opt = optax.adam(LR, B1, B2, EPS)
      self.o = opt.init(self.p)

      def step(p, o, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        updates, o = opt.update(g, o, p)
        return optax.apply_updates(p, updates), o, loss
    else:
      zeros = jax.tree_util.tree_map(jnp.zeros_like, self.p)
      self.o = (jnp.zeros((), jnp.int32), zeros, zeros)

      def step(p, o, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        t, m, v = o
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, v, g)
        c1, c2 = 1 - B1 ** t.astype(jnp.float32), 1 - B2 ** t.astype(jnp.float32)
        p = jax.tree_util.tree_map(lambda p, m, v: p - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS), p, m, v)
        return p, (t, m, v), loss
    self.jstep = jax.jit(step)
    self.jacc = jax.jit(lambda p, x, y: (jnp.argmax(forward(p, x), axis=-1) == y).mean())
    self.xte, self.yte = jnp.asarray(xte), jnp.asarray(yte)

  def put(self, x, y): return self.jax.device_put(x), self.jax.device_put(y)

  def step(self, x, y):
    self.p, self.o, self.loss = self.jstep(self.p, self.o, x, y)
    self.jax.block_until_ready((self.p, self.loss))

  def accuracy(self): return float(self.jacc(self.p, self.xte, self.yte))
  def last_loss(self): return float(self.loss)


# --------------------------------------------------------------------------------------------- torch

class TorchRunner:
  label = "torch (eager, optim.Adam)"

  def __init__(self, init, xte, yte):
    import torch
    self.torch = torch
    lins = []
    for w, b in init:
      lin = torch.nn.Linear(w.shape[1], w.shape[0])
      with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
      lins.append(lin)
    self.model = torch.nn.Sequential(lins[0], torch.nn.ReLU(), lins[1], torch.nn.ReLU(), lins[2])
    self.opt = torch.optim.Adam(self.model.parameters(), lr=LR, betas=(B1, B2), eps=EPS)
    self.xte, self.yte = torch.from_numpy(xte), torch.from_numpy(yte).long()

  def put(self, x, y): return self.torch.from_numpy(x), self.torch.from_numpy(y).long()

  def step(self, x, y):
    self.opt.zero_grad(set_to_none=True)
    self.loss = self.torch.nn.functional.cross_entropy(self.model(x), y)
    self.loss.backward()
    self.opt.step()

  def accuracy(self):
    with self.torch.no_grad(): return float((self.model(self.xte).argmax(-1) == self.yte).float().mean())
  def last_loss(self): return float(self.loss.detach())


# ------------------------------------------------------------------------------------------ tinygrad

class TinygradRunner:
  label = "tinygrad (TinyJit, nn.optim.Adam)"

  def __init__(self, init, xte, yte):
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.optim import Adam
    self.Tensor = Tensor

    def param(a):  # a trainable tensor: 0.14 marks parameters with is_param_(), older versions with requires_grad
      t = Tensor(a.copy())
      if hasattr(t, "is_param_"): t.is_param_()
      else: t.requires_grad = True
      return t.realize()

    self.p = [(param(w), param(b)) for w, b in init]

    def forward(x):
      (w1, b1), (w2, b2), (w3, b3) = self.p
      h = (x @ w1.T + b1).relu()
      h = (h @ w2.T + b2).relu()
      return h @ w3.T + b3

    self.forward = forward
    self.opt = Adam([t for wb in self.p for t in wb], lr=LR, b1=B1, b2=B2, eps=EPS)
    opt = self.opt
    if hasattr(Tensor, "train"): training = Tensor.train  # older tinygrad
    else:  # 0.14: the optimizer wants Context(TRAINING=1)
      from tinygrad.helpers import Context
      def training(): return Context(TRAINING=1)

    @TinyJit
    def jstep(x, y):
      with training():
        opt.zero_grad()
        loss = forward(x).sparse_categorical_crossentropy(y).backward()
        # loss and update realized together (as tinygrad's beautiful_mnist does): realizing the loss
        # after opt.step() would compute it from the UPDATED parameters in 0.14
        if hasattr(opt, "schedule_step"): return loss.realize(*opt.schedule_step())
        loss.realize()
        opt.step()
      return loss

    self.jstep = jstep
    self.xte, self.yte = Tensor(xte.copy()).realize(), Tensor(yte.copy()).realize()

  def put(self, x, y): return self.Tensor(x.copy()).realize(), self.Tensor(y.copy()).realize()
  def step(self, x, y): self.loss = self.jstep(x, y)
  def accuracy(self): return float((self.forward(self.xte).argmax(-1) == self.yte).float().mean().item())
  def last_loss(self): return float(self.loss.item())


RUNNERS = {"tgfn": TgfnRunner, "jax": JaxRunner, "torch": TorchRunner, "tinygrad": TinygradRunner}


def train(runners: dict, xtr, ytr, order) -> dict:
  """Run every step, interleaved: step i of each framework in turn, so a slow period of the shared
  machine hits all of them. {name: (first step ns, Timing of the others, seconds spent in its steps and
  batch conversions)}."""
  clock = time.perf_counter_ns
  samples = {n: [] for n in runners}
  spent = dict.fromkeys(runners, 0)
  for idx in order:
    for name, runner in runners.items():
      start = clock()
      x, y = runner.put(xtr[idx], ytr[idx])
      t0 = clock()
      runner.step(x, y)
      t1 = clock()
      samples[name].append(t1 - t0)
      spent[name] += t1 - start
  return {n: (s[0], Timing(s[1:]), spent[n] / 1e9) for n, s in samples.items()}


def main():
  ap = bench_parser(__doc__)
  ap.add_argument("--epochs", type=int, default=20)
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args()
  if args.quick: args.epochs = 1
  rep = Report(args)
  row = rep.row("the main job (`bench/digits_train.py`), ms per step", "ms")

  xtr, ytr, xte, yte = load_data()
  init = init_params(args.seed)
  order = batch_order(len(xtr), args.epochs, args.seed)
  print(f"digits_train: {'-'.join(map(str, SIZES))} ReLU MLP, Adam lr {LR}, batch {BATCH}, {args.epochs} epochs "
        f"({len(order)} steps) on {len(xtr)} train / {len(xte)} test digits; same init and batch order for all")
  print(machine_info())
  runners = {}
  for name in ("tgfn", "jax", "torch", "tinygrad"):
    mod, desc = rep.load(name)
    try:
      if mod is not None: runners[name] = RUNNERS[name](init, xte, yte)
      else: row.skip(name, desc)
    except Exception as e:
      skipped(name, error_text(e))
      row.skip(name, error_text(e))
  row.not_applicable("numpy", "no hand-written Adam training here")
  results = train(runners, xtr, ytr, order)

  print(f"\n{'framework':<34} {'test acc':>8} {'last loss':>9} {'1st step ms':>11} {'median ms':>9} {'p10':>7} "
        f"{'p90':>7} {'steps/s':>8} {'total s':>7}")
  for name, (first, t, total) in results.items():
    r = runners[name]
    print(f"{r.label:<34} {r.accuracy():>8.4f} {r.last_loss():>9.4f} {first / 1e6:>11.1f} {fmt_time(t.median, 'ms'):>9} "
          f"{fmt_time(t.p10, 'ms'):>7} {fmt_time(t.p90, 'ms'):>7} {1e9 / t.median:>8.1f} {total:>7.1f}")
    row.add_timing(name, r.label.split(" ", 1)[1].strip("()"), t)
  print("(median/p10/p90 over all steps but the first; steps/s = 1 / median; total = time in this framework's "
        "steps and batch conversions, first step included)")
  rep.finish()


if __name__ == "__main__":
  main()
