"""The main job: train a small MLP on the 8x8 digits set with a `@tgfn.jit` training step.

  pip install -e '.[examples]' && python -m tgfn.train_digits

Prints the first step's time (tracing and compiling it) on its own line, a progress line per epoch with
that epoch's steps per second (the first step left out), then the test accuracy and total time.
`DEV=PYTHON python -m tgfn.train_digits --steps 2 --hidden 8 --batch 4` runs a few steps of a small
model on the (slow, exact) reference interpreter.
"""
from __future__ import annotations

import argparse
import time
from typing import Any, Optional

import numpy as np

import tgfn
import tgfn.numpy as tnp
from tgfn import nn
from tgfn.device import Device


def make_model(key: Any, hidden: int = 128) -> nn.Sequential:
  k1, k2, k3 = tgfn.random.split(key, 3)
  return nn.Sequential([nn.Linear.init(k1, 64, hidden), nn.relu, nn.Linear.init(k2, hidden, hidden), nn.relu,
                        nn.Linear.init(k3, hidden, 10)])


def loss_fn(model: nn.Sequential, x: tgfn.Array, y: tgfn.Array) -> tgfn.Array:
  return nn.cross_entropy(model(x), y)


class StepTimer:
  """Step times: the first call (trace and compile) on its own, then steps/s per epoch and overall, so a
  rate never averages the compile in."""
  def __init__(self) -> None:
    self.first: Optional[float] = None
    self.epoch_steps, self.epoch_time, self.steps, self.time = 0, 0.0, 0, 0.0

  def add(self, seconds: float) -> None:
    if self.first is None:
      self.first = seconds
      return
    self.epoch_steps, self.epoch_time = self.epoch_steps + 1, self.epoch_time + seconds
    self.steps, self.time = self.steps + 1, self.time + seconds

  def end_epoch(self) -> str:
    """This epoch's rate ('-' when it had only the first call), and start the next epoch."""
    rate = f"{self.epoch_steps / self.epoch_time:8.1f}" if self.epoch_time else f"{'-':>8s}"
    self.epoch_steps, self.epoch_time = 0, 0.0
    return rate

  def overall(self) -> str: return f"{self.steps / self.time:.1f}" if self.time else "-"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--epochs", type=int, default=20)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--lr", type=float, default=3e-3)
  parser.add_argument("--hidden", type=int, default=128, help="width of the two hidden layers")
  parser.add_argument("--steps", type=int, default=0,
                      help="stop after this many steps (0: all epochs); then test on 64 samples only")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  x_train, y_train, x_test, y_test = nn.datasets.digits()
  x_train, x_test = x_train.reshape(-1, 64), x_test.reshape(-1, 64)
  if args.steps: x_test, y_test = x_test[:64], y_test[:64]
  optimizer = nn.optim.adam(args.lr)
  model = make_model(tgfn.random.key(args.seed), args.hidden)
  opt_state = optimizer.init(model)

  @tgfn.jit
  def train_step(model: nn.Sequential, opt_state: Any, x: tgfn.Array, y: tgfn.Array) -> tuple:
    loss, grads = tgfn.value_and_grad(loss_fn)(model, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, model)
    return nn.optim.apply_updates(model, updates), opt_state, loss

  @tgfn.jit
  def accuracy(model: nn.Sequential, x: tgfn.Array, y: tgfn.Array) -> tgfn.Array:
    return (tnp.argmax(model(x), axis=-1) == y).mean()

  host_x, host_y = np.asarray(x_train), np.asarray(y_train)
  n_batches = len(host_x) // args.batch
  order = np.random.default_rng(args.seed)
  print(f"device {Device.DEFAULT}: training a 64-{args.hidden}-{args.hidden}-10 MLP on {len(host_x)} digits, "
        f"batch {args.batch}, {n_batches} steps per epoch")
  start, steps, timer = time.perf_counter(), 0, StepTimer()
  for epoch in range(args.epochs):
    perm = order.permutation(len(host_x))
    for b in range(n_batches):
      idx = perm[b * args.batch:(b + 1) * args.batch]
      xb, yb = tnp.array(host_x[idx]), tnp.array(host_y[idx])
      t0 = time.perf_counter()
      model, opt_state, loss = train_step(model, opt_state, xb, yb)
      loss.block_until_ready()
      timer.add(time.perf_counter() - t0)
      if steps == 0:
        print(f"first step (trace and compile train_step): {timer.first:.2f} s")
        tgfn.wait_for_optimized_kernels()  # (a cold compile ran quick builds: steps/s are the optimized kernels')
      steps += 1
      if args.steps and steps >= args.steps: break
    print(f"epoch {epoch + 1:3d}  loss {float(loss):.4f}  test accuracy {float(accuracy(model, x_test, y_test)):.4f}"
          f"  {timer.end_epoch()} steps/s")
    if args.steps and steps >= args.steps: break
  total = time.perf_counter() - start
  acc = float(accuracy(model, x_test, y_test))
  print(f"test accuracy {acc:.4f} after {steps} steps; {timer.overall()} steps/s "
        f"(after the first, compiling, step); total {total:.1f} s")


if __name__ == "__main__":
  main()
