"""Peak memory of the gradient of a deep MLP, with and without `tgfn.checkpoint`.

The network: `depth` layers h = tanh(h @ W_i), loss = sum(h**2). Three variants of the jitted gradient:
  plain        no checkpoint: the backward pass reads every layer's activation, all kept alive
  segments     tgfn.checkpoint around blocks of `segment` layers (default sqrt(depth)), policy
               nothing_saveable: the forward pass keeps only the block boundaries, and the backward pass
               recomputes one block's activations at a time (all blocks share one compiled body)
  dots         the same blocks with policy dots_saveable (matrix products kept, tanh recomputed)
Measured: the peak of bytes held by tgfn's device allocator during the first call (trace, compile,
run: planned intermediates, the bodies' scratch, the outputs), counted by wrapping the allocator's
alloc/free -- exact, not RSS. The inputs are allocated before and not counted. The gradients of the
three variants are checked to agree.

Run: python bench/remat_memory.py [--depth 16] [--width 256] [--batch 256]
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tgfn  # noqa: E402
import tgfn.numpy as tnp  # noqa: E402
from tgfn.device import Device  # noqa: E402

MiB = 1024 * 1024


class Counting:
  """Wraps a device allocator's alloc/free to track the bytes it holds and their peak."""
  def __init__(self, allocator):
    self.allocator, self.live, self.peak, self.sizes = allocator, 0, 0, {}
    self._alloc, self._free = allocator.alloc, allocator.free

  def __enter__(self):
    def alloc(nbytes):
      handle = self._alloc(nbytes)
      self.sizes[id(handle) if not isinstance(handle, int) else handle] = nbytes
      self.live += nbytes
      self.peak = max(self.peak, self.live)
      return handle

    def free(handle):
      self.live -= self.sizes.pop(id(handle) if not isinstance(handle, int) else handle, 0)
      self._free(handle)
    self.allocator.alloc, self.allocator.free = alloc, free
    return self

  def __exit__(self, *exc):
    self.allocator.alloc, self.allocator.free = self._alloc, self._free


def loss(ws, x, segment, policy):
  def block(h, *block_ws):
    for w in block_ws: h = tnp.tanh(h @ w)
    return h
  if segment: block = tgfn.checkpoint(block, policy=policy)
  h, step = x, segment or len(ws)
  for i in range(0, len(ws), step): h = block(h, *ws[i:i + step])
  return (h * h).sum()


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--depth", type=int, default=16)
  ap.add_argument("--width", type=int, default=256)
  ap.add_argument("--batch", type=int, default=256)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  ws = [tnp.asarray(rng.normal(size=(args.width, args.width)).astype(np.float32) / math.sqrt(args.width))
        for _ in range(args.depth)]
  x = tnp.asarray(rng.normal(size=(args.batch, args.width)).astype(np.float32))
  for a in ws + [x]: a.realize()
  segment = max(1, round(math.sqrt(args.depth)))
  variants = [("plain", 0, None), (f"segments of {segment}", segment, tgfn.checkpoint_policies.nothing_saveable),
              (f"segments of {segment}, dots_saveable", segment, tgfn.checkpoint_policies.dots_saveable)]
  activation = args.batch * args.width * 4
  print(f"MLP depth {args.depth}, width {args.width}, batch {args.batch}, float32: one activation "
        f"{activation / MiB:.2f} MiB, weights {args.depth * args.width ** 2 * 4 / MiB:.2f} MiB (not counted)")
  reference = None
  for name, seg, policy in variants:
    step = tgfn.jit(tgfn.grad(lambda ws, x, seg=seg, policy=policy: loss(ws, x, seg, policy)))
    with Counting(Device[Device.DEFAULT].allocator) as count:
      grads = step(ws, x)
      grads = [g.numpy() for g in grads]
    if reference is None: reference = grads
    err = max(float(np.abs(g - r).max()) for g, r in zip(grads, reference))
    print(f"  {name:34s} peak {count.peak / MiB:8.2f} MiB  ({count.peak / activation:5.1f} activations)"
          f"  max |grad - plain| {err:.1e}")


if __name__ == "__main__":
  main()
