"""Which update count a learning-rate schedule sees: as optax, the count before the update (0 first)."""
import numpy as np

import tgfn.numpy as tnp
from tgfn.nn import optim
from tgfn.tensor import Tensor

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([-0.25, 0.75, 1.0]), np.array([1.0, 1.0, -3.0])]
P0 = np.array([1.0, 2.0, -1.0])


def rate(count):  # different at every count, so using the wrong one changes the result
  return 0.1 * (tnp.asarray(count).astype(tnp.float32) + 1.0) ** 2


def hand_adam(b1=0.9, b2=0.999, eps=1e-8):
  """Adam by hand, update k (from 0) at rate(k): the schedule sees the count before the update."""
  p, m, v, out = P0.copy(), np.zeros(3), np.zeros(3), []
  for k, g in enumerate(GRADS):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    t = k + 1
    lr = np.float32(0.1) * np.float32(k + 1) ** 2
    p = p - float(lr) * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    out.append(p.copy())
  return out


def test_adam_schedule_sees_the_count_before_each_update():
  opt = optim.adam(rate)
  params = tnp.array(P0)
  state = opt.init(params)
  for g, want in zip(GRADS, hand_adam()):
    updates, state = opt.update(tnp.array(g), state, params)
    params = optim.apply_updates(params, updates)
    np.testing.assert_allclose(np.asarray(params), want, rtol=1e-12)
  assert int(state.count) == len(GRADS)


def test_stateful_adam_schedule_sees_the_count_before_each_update():
  w = Tensor(tnp.array(P0))
  opt = optim.Adam([w], lr=rate)
  for g, want in zip(GRADS, hand_adam()):
    w.grad = Tensor(tnp.array(g))
    opt.step()
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)
