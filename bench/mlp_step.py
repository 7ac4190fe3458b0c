"""One jitted SGD training step of a 784-512-512-10 MLP, per framework.

The model: ReLU MLP 784-512-512-10, softmax cross-entropy on one-hot labels (mean over the batch),
batch 256, learning rate 0.01, float32, parameters as a dict pytree {w1, b1, w2, b2, w3, b3}. One step
computes the loss and its gradient and returns the updated parameters and the loss.

  tgfn            tgfn.jit(step, donate_argnums=0): (params, x, y) -> (new params, loss)
  jax             jax.jit(step, donate_argnums=0), optax.sgd if optax is installed, else plain SGD
  tinygrad        TinyJit around forward + Tensor.gradient + assign (plain tensors), CPU device
  torch (eager)   autograd.grad + in-place update
  torch.compile   torch.compile(loss) (forward and backward compiled by AOTAutograd), run in a
                  subprocess and skipped if its warm-up takes more than --compile-limit seconds (60)
  numpy (eager)   hand-written forward and backward, float32

Correctness first: every framework starts from the same initial parameters and batch and runs 3 steps;
the loss at the parameters after those 3 steps (the loss the 4th step reports) and the parameters
themselves are compared with a float64 NumPy reference. tgfn must agree within 1e-4 relative.

Timing: each framework runs `--warmup` untimed steps, then `--rounds` interleaved rounds (every
framework in turn, for `--round-seconds` each, at least one step), each step timed on its own with
time.perf_counter_ns (parameters and loss ready at the end of each); samples pooled, MEDIAN reported.
torch.compile runs afterwards in its own subprocess (its warm-up may exceed any budget), for up to
`--reps` steps or `--seconds`; it is reported as a variant next to torch eager.

  tgfn-<backend>  (with --backends CPU,LLVM,OPENCL) the tgfn step on each other backend, a column each

Run: python bench/mlp_step.py [--quick] [--frameworks tgfn,numpy] [--rounds 5] [--no-torch-compile]
     [--backends CPU,LLVM,OPENCL]
Peak memory of the same step: bench/mlp_memory.py.
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from common import (Report, Timing, bench_parser, error_text, import_peer, interleave, machine_info, on_backend, run_on,
                    skipped, time_calls)

SIZES = (784, 512, 512, 10)
BATCH = 256
LR = 0.01
KEYS = ("w1", "b1", "w2", "b2", "w3", "b3")


def make_problem(seed: int = 0):
  """Initial parameters (He-normal weights, zero biases), a batch and one-hot labels, float32 NumPy."""
  rng = np.random.default_rng(seed)
  params = {}
  for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
    params[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
    params[f"b{i}"] = (0.01 * rng.standard_normal(b)).astype(np.float32)
  x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
  y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
  return params, x, y


def param_count() -> int: return sum(a * b + b for a, b in zip(SIZES[:-1], SIZES[1:]))


def step_flops() -> float:
  """Matmul FLOPs of one step: forward + two backward matmuls per layer, 2 flops per multiply-add."""
  return 3 * 2 * BATCH * sum(a * b for a, b in zip(SIZES[:-1], SIZES[1:]))


# --------------------------------------------------------------------------------- numpy (reference)

def numpy_step(p, x, y):
  """Forward and hand-written backward in the dtype of the inputs; returns (new params, loss)."""
  z1 = x @ p["w1"] + p["b1"]
  h1 = np.maximum(z1, 0)
  z2 = h1 @ p["w2"] + p["b2"]
  h2 = np.maximum(z2, 0)
  logits = h2 @ p["w3"] + p["b3"]
  m = logits.max(axis=1, keepdims=True)
  e = np.exp(logits - m)
  s = e.sum(axis=1, keepdims=True)
  lse = np.log(s) + m
  n = x.shape[0]
  loss = -(y * (logits - lse)).sum() / n
  dl = (e / s * y.sum(axis=1, keepdims=True) - y) / n
  g = {"w3": h2.T @ dl, "b3": dl.sum(0)}
  dz2 = (dl @ p["w3"].T) * (z2 > 0)
  g["w2"], g["b2"] = h1.T @ dz2, dz2.sum(0)
  dz1 = (dz2 @ p["w2"].T) * (z1 > 0)
  g["w1"], g["b1"] = x.T @ dz1, dz1.sum(0)
  return {k: p[k] - p[k].dtype.type(LR) * g[k] for k in p}, loss


class NumpyRunner:
  label = "numpy (eager, float32)"

  def __init__(self, P, X, Y, dtype=np.float32):
    self.p = {k: v.astype(dtype) for k, v in P.items()}
    self.x, self.y = X.astype(dtype), Y.astype(dtype)

  def step(self): self.p, self.loss = numpy_step(self.p, self.x, self.y)
  def params(self): return {k: np.array(v, np.float64) for k, v in self.p.items()}
  def last_loss(self): return float(self.loss)


# --------------------------------------------------------------------------------------------- tgfn

def tgfn_loss(p, x, y):
  """The MLP's mean cross-entropy in tgfn (bench/distributed_step.py runs it data-parallel)."""
  import tgfn
  import tgfn.numpy as tnp
  h = tnp.maximum(x @ p["w1"] + p["b1"], 0.0)
  h = tnp.maximum(h @ p["w2"] + p["b2"], 0.0)
  logits = h @ p["w3"] + p["b3"]
  m = tgfn.stop_gradient(logits.max(axis=1, keepdims=True))
  lse = tnp.log(tnp.exp(logits - m).sum(axis=1, keepdims=True)) + m
  return -(y * (logits - lse)).sum() / x.shape[0]


def jax_loss(p, x, y):
  """The same loss in JAX (bench/distributed_step.py runs it under pmap)."""
  import jax
  import jax.numpy as jnp
  h = jax.nn.relu(x @ p["w1"] + p["b1"])
  h = jax.nn.relu(h @ p["w2"] + p["b2"])
  logits = h @ p["w3"] + p["b3"]
  m = jax.lax.stop_gradient(logits.max(axis=1, keepdims=True))
  lse = jnp.log(jnp.exp(logits - m).sum(axis=1, keepdims=True)) + m
  return -(y * (logits - lse)).sum() / x.shape[0]


class TgfnRunner:
  label = "tgfn (jit, donate_argnums=0)"

  def __init__(self, P, X, Y):
    import tgfn
    import tgfn.numpy as tnp

    def step(p, x, y):
      loss, g = tgfn.value_and_grad(tgfn_loss)(p, x, y)
      return {k: p[k] - LR * g[k] for k in p}, loss

    self.step_fn = step
    self.jstep = tgfn.jit(step, donate_argnums=0)
    self.p = {k: tnp.array(v) for k, v in P.items()}
    self.x, self.y = tnp.array(X), tnp.array(Y)

  def step(self):
    self.p, self.loss = self.jstep(self.p, self.x, self.y)
    for v in self.p.values(): v.block_until_ready()
    self.loss.block_until_ready()

  def params(self): return {k: np.array(v, np.float64) for k, v in self.p.items()}
  def last_loss(self): return float(self.loss)


# ---------------------------------------------------------------------------------------------- jax

class JaxRunner:
  label = "jax (jit, donate_argnums=0)"

  def __init__(self, P, X, Y):
    import jax
    import jax.numpy as jnp
    optax, _ = import_peer("optax")
    self.jax = jax

    self.p = {k: jnp.asarray(v) for k, v in P.items()}
    self.x, self.y = jnp.asarray(X), jnp.asarray(Y)
    if optax is not None:
      self.label = "jax (jit, optax.sgd, donate)"
      opt = optax.sgd(LR)

      def step(state, x, y):
        p, o = state
        loss, g = jax.value_and_grad(jax_loss)(p, x, y)
        updates, o = opt.update(g, o, p)
        return (optax.apply_updates(p, updates), o), loss
      self.state = (self.p, opt.init(self.p))
    else:
      self.label = "jax (jit, plain SGD, donate)"

      def step(state, x, y):
        p, o = state
        loss, g = jax.value_and_grad(jax_loss)(p, x, y)
        return (jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g), o), loss
      self.state = (self.p, ())
    self.jstep = jax.jit(step, donate_argnums=0)

  def step(self):
    self.state, self.loss = self.jstep(self.state, self.x, self.y)
    self.jax.block_until_ready((self.state, self.loss))

  def params(self): return {k: np.array(v, np.float64) for k, v in self.state[0].items()}
  def last_loss(self): return float(self.loss)


# ----------------------------------------------------------------------------------------- tinygrad

class TinygradRunner:
  label = "tinygrad (TinyJit)"

  def __init__(self, P, X, Y):
    from tinygrad import Tensor, TinyJit
    self.Tensor = Tensor
    self.p = {k: Tensor(v.copy()).realize() for k, v in P.items()}
    self.x, self.y = Tensor(X.copy()).realize(), Tensor(Y.copy()).realize()
    params = [self.p[k] for k in KEYS]

    def loss_fn(p, x, y):
      h = (x @ p["w1"] + p["b1"]).relu()
      h = (h @ p["w2"] + p["b2"]).relu()
      logits = h @ p["w3"] + p["b3"]
      return -(y * logits.log_softmax(axis=1)).sum() / x.shape[0]

    @TinyJit
    def jstep(x, y):
      loss = loss_fn(self.p, x, y)
      if hasattr(loss, "gradient"): grads = loss.gradient(*params)
      else:  # older tinygrad: backward() into .grad
        for t in params: t.requires_grad, t.grad = True, None
        loss.backward()
        grads = [t.grad for t in params]
      for t, g in zip(params, grads): t.assign(t.detach() - LR * g)
      Tensor.realize(loss, *params)
      return loss

    self.jstep = jstep

  def step(self): self.loss = self.jstep(self.x, self.y)
  def params(self): return {k: v.numpy().astype(np.float64) for k, v in self.p.items()}
  def last_loss(self): return float(self.loss.item())


# -------------------------------------------------------------------------------------------- torch

def torch_loss_fn(torch):
  def loss_fn(p, x, y):
    h = torch.relu(x @ p["w1"] + p["b1"])
    h = torch.relu(h @ p["w2"] + p["b2"])
    logits = h @ p["w3"] + p["b3"]
    return -(y * torch.log_softmax(logits, dim=1)).sum() / x.shape[0]
  return loss_fn


class TorchRunner:
  label = "torch (eager)"

  def __init__(self, P, X, Y, compile_loss: bool = False):
    import torch
    self.torch = torch
    self.p = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in P.items()}
    self.x, self.y = torch.from_numpy(X.copy()), torch.from_numpy(Y.copy())
    self.loss_fn = torch_loss_fn(torch)
    if compile_loss:
      self.label = "torch.compile (loss; AOTAutograd)"
      self.loss_fn = torch.compile(self.loss_fn)
    self.plist = [self.p[k] for k in KEYS]

  def step(self):
    torch = self.torch
    self.loss = self.loss_fn(self.p, self.x, self.y)
    grads = torch.autograd.grad(self.loss, self.plist)
    with torch.no_grad():
      for t, g in zip(self.plist, grads): t.sub_(LR * g)

  def params(self): return {k: v.detach().numpy().astype(np.float64) for k, v in self.p.items()}
  def last_loss(self): return float(self.loss.detach())


class OnBackend:
  """A runner built and stepped with tgfn's default device `backend` (the tgfn-<backend> columns)."""
  def __init__(self, runner_class, backend: str, *problem):
    self.backend = backend
    with on_backend(backend): self.inner = runner_class(*problem)
    self.label = f"tgfn-{backend.lower()} ({self.inner.label.split(' (', 1)[1]}"
    self.step = run_on(backend, self.inner.step)

  def params(self): return self.inner.params()
  def last_loss(self): return self.inner.last_loss()


RUNNERS = {"tgfn": TgfnRunner, "jax": JaxRunner, "tinygrad": TinygradRunner, "torch": TorchRunner,
           "numpy": NumpyRunner}


# ---------------------------------------------------------------------------------------- correctness

def reference(P, X, Y, steps: int = 3):
  """float64 NumPy: the parameters after `steps` steps and the loss at them."""
  r = NumpyRunner(P, X, Y, np.float64)
  losses = []
  for _ in range(steps):
    r.step()
    losses.append(r.last_loss())
  params = r.params()
  r.step()
  return losses, params, r.last_loss()


def check(runner, ref, steps: int = 3):
  """Run `steps` steps then one more; (losses, loss after `steps` steps, its relative error, worst
  relative parameter error (max |diff| / max |ref| per tensor))."""
  ref_losses, ref_params, ref_final = ref
  losses = []
  for _ in range(steps):
    runner.step()
    losses.append(runner.last_loss())
  params = runner.params()
  runner.step()
  final = runner.last_loss()
  perr = max(float(np.abs(params[k] - ref_params[k]).max() / np.abs(ref_params[k]).max()) for k in KEYS)
  return losses, final, abs(final - ref_final) / abs(ref_final), perr


# ----------------------------------------------------------------------------- torch.compile worker

def torch_compile_worker(args) -> None:
  """Subprocess body: warm up torch.compile, give up past the limit, else time; one JSON line out."""
  P, X, Y = make_problem()
  t0 = time.perf_counter()
  r = TorchRunner(P, X, Y, compile_loss=True)
  for _ in range(3): r.step()
  warm = time.perf_counter() - t0
  if warm > args.compile_limit:
    print(json.dumps({"skip": f"torch.compile warm-up took {warm:.0f} s (> {args.compile_limit:.0f} s)"}))
    return
  t = time_calls(r.step, reps=args.reps, warmup=args.warmup, max_seconds=args.seconds)
  print(json.dumps({"samples": t.samples, "warmup_s": warm, "label": r.label}))


def run_torch_compile(args):
  cmd = [sys.executable, __file__, "--torch-compile-worker", "--reps", str(args.reps), "--warmup",
         str(args.warmup), "--seconds", str(args.seconds), "--compile-limit", str(args.compile_limit)]
  try:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_limit + args.seconds + 60)
  except subprocess.TimeoutExpired:
    return f"torch.compile did not warm up and finish within {args.compile_limit:.0f} s + timing budget"
  lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
  if out.returncode != 0 or not lines:
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return f"torch.compile worker failed (rc {out.returncode}): {tail[:200]}"
  res = json.loads(lines[-1])
  if "skip" in res: return res["skip"]
  print(f"  torch.compile: warm-up (compile + 3 steps) took {res['warmup_s']:.1f} s")
  return Timing(res["samples"])


# ----------------------------------------------------------------------------------------------- main

def main():
  ap = bench_parser(__doc__, rounds=5, round_seconds=2.0)
  ap.add_argument("--reps", type=int, default=100, help="torch.compile worker: timed steps (at most)")
  ap.add_argument("--seconds", type=float, default=10.0, help="torch.compile worker: time budget")
  ap.add_argument("--warmup", type=int, default=2, help="untimed steps before timing (after the 4 checked)")
  ap.add_argument("--no-torch-compile", action="store_true", help="(also implied by --quick)")
  ap.add_argument("--compile-limit", type=float, default=60.0, help="skip torch.compile past this warm-up")
  ap.add_argument("--torch-compile-worker", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.torch_compile_worker: return torch_compile_worker(args)
  if args.quick: args.rounds, args.round_seconds, args.warmup, args.no_torch_compile = 1, 0.1, 0, True
  rep = Report(args)

  print(f"mlp_step: SGD step of a {'-'.join(map(str, SIZES))} ReLU MLP, softmax cross-entropy, batch {BATCH}, "
        f"lr {LR}, float32 ({param_count():,} parameters, {step_flops() / 1e9:.2f} GFLOP of matmul per step)")
  print(machine_info())
  row = rep.row(f"MLP {'-'.join(map(str, SIZES))} SGD step, batch {BATCH}, ms", "ms")
  P, X, Y = make_problem()
  ref = reference(P, X, Y)
  print(f"\ncorrectness: 3 steps from the same parameters and batch; float64 NumPy reference losses "
        f"{', '.join(f'{v:.6f}' for v in ref[0])}; loss after 3 steps {ref[2]:.7f}")
  runners = {}
  for name in ("tgfn", *rep.backends, "jax", "numpy", "torch", "tinygrad"):
    mod, desc = rep.load(name)
    if mod is None:
      row.skip(name, desc)
      continue
    try:
      t0 = time.perf_counter()
      runner = OnBackend(TgfnRunner, rep.backend(name), P, X, Y) if rep.backend(name) else RUNNERS[name](P, X, Y)
      losses, final, lerr, perr = check(runner, ref)
      first = time.perf_counter() - t0
    except Exception as e:
      row.skip(name, error_text(e))
      skipped(name, error_text(e))
      continue
    ok = lerr <= 1e-4 and perr <= 1e-4
    print(f"  {runner.label:<34} losses {', '.join(f'{v:.6f}' for v in losses)}; after 3 steps {final:.7f} "
          f"(rel. err {lerr:.1e}; params max rel. err {perr:.1e}) {'OK' if ok else 'MISMATCH (> 1e-4)'}"
          f"  [build+compile+4 steps {first:.1f} s]")
    if ok: runners[name] = runner
    else: row.skip(name, f"wrong result: loss rel. err {lerr:.1e}, params {perr:.1e}")

  print(f"\ntiming: {args.warmup} warm-up steps, then {args.rounds} interleaved rounds of {args.round_seconds:.0f} s")
  times = interleave({n: r.step for n, r in runners.items()}, args.rounds, 1000, args.round_seconds, args.warmup)
  for name, t in times.items(): row.add_timing(name, runners[name].label.split(" ", 1)[1].strip("()"), t)
  if "torch" in runners and not args.no_torch_compile:
    res = run_torch_compile(args)
    if isinstance(res, str): print(f"  torch.compile: skipped: {res}")
    else: row.add_timing("torch", "torch.compile", res)
  rep.finish()


if __name__ == "__main__":
  main()
