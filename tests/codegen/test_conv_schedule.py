"""A strided convolution's input gradient does the work it needs, not a loop in full for every padded
position: a reduction read under a PAD's gate inside another reduction's loop gets a buffer of its own
(tgfn/schedule/kernelize.py). The kernels' multiplies are counted, not timed."""
import numpy as np

import tgfn
import tgfn.numpy as tnp
from tgfn.nn import functional as F
from tgfn.uop.ops import Ops


def test_strided_conv_input_gradient_is_not_recomputed_per_padded_position():
  rng = np.random.default_rng(0)
  x = tnp.array(rng.standard_normal((8, 4, 8, 8)).astype(np.float32))
  w = tnp.array(rng.standard_normal((6, 4, 3, 3)).astype(np.float32))
  dx = tgfn.jit(tgfn.grad(lambda x, w: (F.conv2d(x, w, stride=2, padding=1) ** 2).sum()))
  products = sum(_multiplies(k.linear) for k in dx.lower(x, w).kernels)
  # the forward convolution and the input gradient each multiply every output (gradient) by every weight
  useful = 2 * 8 * 6 * 4 * 4 * 4 * 3 * 3
  assert products <= 1.5 * useful, f"{products} multiplies for {useful} useful ones"
  np.testing.assert_allclose(np.asarray(dx(x, w)), _input_gradient(np.asarray(x, np.float64), np.asarray(w, np.float64)),
                             rtol=1e-4, atol=1e-4)


def _multiplies(linear) -> int:
  """Float multiplies a kernel executes (per lane), each counted once per trip of the loops around it."""
  n, trips = 0, [1]
  for u in linear:
    if u.op is Ops.RANGE: trips.append(trips[-1] * u.src[0].arg)
    elif u.op is Ops.ENDRANGE: trips.pop()
    elif u.op is Ops.MUL and u.dtype.is_float: n += trips[-1] * u.dtype.count
  return n


def _input_gradient(x, w):
  """d/dx of sum(conv2d(x, w, stride=2, padding=1) ** 2), by loops in float64."""
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  y = np.zeros((x.shape[0], w.shape[0], 4, 4))
  for i in range(4):
    for j in range(4): y[:, :, i, j] = np.einsum("nckl,ockl->no", xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3], w)
  dxp = np.zeros_like(xp)
  for i in range(4):
    for j in range(4): dxp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += np.einsum("no,ockl->nckl", 2 * y[:, :, i, j], w)
  return dxp[:, :, 1:-1, 1:-1]
