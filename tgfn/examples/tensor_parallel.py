"""Tensor-parallel training of the digits MLP on two CPU devices: the first layer's weight is split by
columns and the second's by rows over a "model" mesh axis (the Megatron layout), so each device computes
half of the hidden units and the only communication is one all-reduce of the logits' partial sums (and
its mirror in the backward pass). jit(in_shardings=, out_shardings=) propagates the layouts and inserts
that all-reduce (tgfn/sharding/partition.py). The parameters after N steps must equal one-device training.

  TGFN_CPU_DEVICES=2 python -m tgfn.examples.tensor_parallel
"""
from __future__ import annotations

import sys
import time

import numpy as np

import tgfn
import tgfn.numpy as tnp
from tgfn.examples.data_parallel import init_params, loss, parse_args, sgd
from tgfn.sharding import NamedSharding, P, make_mesh


def main(argv: list[str] | None = None) -> int:
  args = parse_args(__doc__.splitlines()[0], argv)
  from tgfn.nn.datasets import digits
  x_train, y_train, _, _ = digits()
  x = tnp.asarray(x_train.numpy()[:args.batch].reshape(args.batch, 64))
  labels = y_train.numpy()[:args.batch]

  mesh = make_mesh((2,), ("model",))
  layout = {"w1": NamedSharding(mesh, P(None, "model")), "b1": NamedSharding(mesh, P("model")),
            "w2": NamedSharding(mesh, P("model", None)), "b2": NamedSharding(mesh, P())}
  replicated = NamedSharding(mesh, P())
  step = tgfn.jit(lambda p, x, y: sgd(p, tgfn.grad(loss)(p, x, y), args.lr),
                  in_shardings=(layout, replicated, replicated), out_shardings=layout)
  params = {k: tgfn.device_put(v, layout[k]) for k, v in init_params().items()}
  start = time.perf_counter()
  for i in range(args.steps):
    if i == 1: start = time.perf_counter()  # the first step compiles
    params = step(params, x, tnp.asarray(labels))
    tgfn.Array.realize_all([b for v in params.values() for b in v.blocks])
  per_step = (time.perf_counter() - start) / max(1, args.steps - 1)

  reference = init_params()
  plain = tgfn.jit(lambda p, x, y: sgd(p, tgfn.grad(loss)(p, x, y), args.lr))
  for _ in range(args.steps): reference = plain(reference, x, tnp.asarray(labels))
  diff = max(float(np.abs(params[k].numpy() - reference[k].numpy()).max()) for k in params)
  print(f"tensor parallel on {mesh.size} devices: w1 {params['w1'].sharding.spec}, w2 {params['w2'].sharding.spec}; "
        f"{args.steps} steps, {per_step * 1e3:.1f} ms/step, max |tensor-parallel - single| = {diff:.2e}", flush=True)
  return 0 if diff <= args.tolerance else 1


if __name__ == "__main__":
  sys.exit(main())
