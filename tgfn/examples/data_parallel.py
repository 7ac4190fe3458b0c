"""Data-parallel training of the digits MLP, checked against training on the whole batch in one process.

Each process takes its slice of the batch and maps it over its devices with pmap; the per-device
gradients are averaged with lax.pmean over the "batch" axis, which spans every device of every process
(MPI between processes). After N steps the parameters must equal those of plain single-device training
on the whole batch, to float tolerance; the example exits with status 1 if they do not.

  mpirun -n 2 python -m tgfn.examples.data_parallel            # 2 processes (as root: --allow-run-as-root)
  TGFN_CPU_DEVICES=2 python -m tgfn.examples.data_parallel     # 1 process, 2 CPU devices
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

import tgfn
import tgfn.numpy as tnp
from tgfn import lax

Params = dict[str, Any]


def init_params(seed: int = 0, hidden: int = 32) -> Params:
  rng = np.random.default_rng(seed)
  return {"w1": tnp.asarray((rng.standard_normal((64, hidden)) / 8).astype(np.float32)),
          "b1": tnp.zeros(hidden), "w2": tnp.asarray((rng.standard_normal((hidden, 10)) / np.sqrt(hidden)).astype(np.float32)),
          "b2": tnp.zeros(10)}


def loss(params: Params, x: Any, labels: Any) -> Any:
  """Mean cross-entropy of a one-hidden-layer tanh MLP."""
  logits = tnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
  shifted = logits - logits.max(axis=-1, keepdims=True)
  log_probs = shifted - tnp.log(tnp.exp(shifted).sum(axis=-1, keepdims=True))
  one_hot = (labels[:, None] == tnp.arange(10)[None, :]).astype(log_probs.dtype)
  return -(one_hot * log_probs).sum() / x.shape[0]


def sgd(params: Params, grads: Params, lr: float) -> Params:
  return tgfn.tree.map(lambda p, g: p - lr * g, params, grads)


def train_single(params: Params, x: Any, labels: Any, steps: int, lr: float) -> Params:
  step = tgfn.jit(lambda p, x, y: sgd(p, tgfn.grad(loss)(p, x, y), lr))
  for _ in range(steps): params = step(params, x, labels)
  return params


def train_data_parallel(params: Params, x: np.ndarray, labels: np.ndarray, steps: int, lr: float) -> tuple[Params, float]:
  """Train on this process's slice of the batch, one block per local device; (params, seconds per step
  after the first, which traces and compiles: pmap then replays)."""
  devices, processes, me = tgfn.local_device_count(), tgfn.process_count(), tgfn.process_index()
  members = devices * processes
  if x.shape[0] % members:
    raise ValueError(f"the batch of {x.shape[0]} does not split over {members} devices ({processes} process(es) x {devices})")
  per_process = x.shape[0] // processes
  mine = slice(me * per_process, (me + 1) * per_process)
  xs = tnp.asarray(x[mine].reshape(devices, per_process // devices, -1))
  ys = tnp.asarray(labels[mine].reshape(devices, per_process // devices))
  # every member's gradient of its own mean loss, averaged over all members, is the whole batch's gradient;
  # every member applies it, and the members' copies of the new parameters are equal: take the first's
  step = tgfn.pmap(lambda p, xb, yb: sgd(p, lax.pmean(tgfn.grad(loss)(p, xb, yb), "batch"), lr), "batch",
                   in_axes=(None, 0, 0), out_axes=None)
  start = time.perf_counter()
  for i in range(steps):
    if i == 1: start = time.perf_counter()  # the first step compiles: time the others
    params = step(params, xs, ys)
  return params, (time.perf_counter() - start) / max(1, steps - 1)


def parse_args(description: str, argv: list[str] | None) -> argparse.Namespace:
  """The examples' common options: steps, batch size, learning rate, and the tolerance of the check."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--lr", type=float, default=0.5)
  parser.add_argument("--tolerance", type=float, default=1e-4)
  return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
  args = parse_args(__doc__.splitlines()[0], argv)
  if any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")):  # started by mpirun
    tgfn.distributed.initialize()
  from tgfn.nn.datasets import digits
  x_train, y_train, _, _ = digits()
  x = x_train.numpy()[:args.batch].reshape(args.batch, 64)
  labels = y_train.numpy()[:args.batch]
  params, per_step = train_data_parallel(init_params(), x, labels, args.steps, args.lr)
  reference = train_single(init_params(), tnp.asarray(x), tnp.asarray(labels), args.steps, args.lr)
  diff = max(float(np.abs(params[k].numpy() - reference[k].numpy()).max()) for k in params)
  final_loss = float(loss(params, tnp.asarray(x), tnp.asarray(labels)))
  print(f"process {tgfn.process_index()}/{tgfn.process_count()} with {tgfn.local_device_count()} device(s): "
        f"{args.steps} steps, {per_step * 1e3:.1f} ms/step, loss {final_loss:.4f}, "
        f"max |data-parallel - single| = {diff:.2e}", flush=True)
  return 0 if diff <= args.tolerance else 1


if __name__ == "__main__":
  sys.exit(main())
