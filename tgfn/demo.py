"""The main job for now: a small computation, fused and compiled to C. Run `DEBUG=4 python -m tgfn.demo`
to also see the generated C of every kernel."""
from __future__ import annotations

import time

import numpy as np

import tgfn.numpy as tnp
from tgfn.device import Device
from tgfn.engine.realize import Counters


def main() -> None:
  rng = np.random.default_rng(0)
  logits = tnp.array(rng.standard_normal((4, 10)).astype(np.float32))
  weights = tnp.array(rng.standard_normal((10, 3)).astype(np.float32))

  # a numerically stable softmax, a matmul and a normalization: lazy until printed
  e = tnp.exp(logits - logits.max(axis=-1, keepdims=True))
  probs = e / e.sum(axis=-1, keepdims=True)
  scores = probs @ weights
  normalized = (scores - scores.mean(0)) / (scores.std(0) + 1e-5)

  start, launched = time.perf_counter(), Counters.kernels_launched
  result = normalized.numpy()
  elapsed = time.perf_counter() - start
  print(f"device: {Device.DEFAULT}")
  print("result:")
  print(np.array2string(result, precision=4, suppress_small=True))
  print(f"kernels: {Counters.kernels_launched - launched} (compiled {Counters.kernels_compiled}) in {elapsed * 1e3:.1f} ms")

  # check against NumPy, so the demo never prints a wrong answer silently
  x, w = np.asarray(logits), np.asarray(weights)
  p = np.exp(x - x.max(-1, keepdims=True))
  s = (p / p.sum(-1, keepdims=True)) @ w
  np.testing.assert_allclose(result, (s - s.mean(0)) / (s.std(0) + 1e-5), rtol=1e-4, atol=1e-4)
  print("matches NumPy: yes")


if __name__ == "__main__":
  main()
