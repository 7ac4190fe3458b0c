"""The same model, from the same key, trained in the functional style (pytree layers, `grad`, the
functional optimizer) and in the stateful style (Tensors, `backward()`, the stateful optimizer), eagerly
and under jit, ends with the same parameters."""
import numpy as np

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn import Tensor, nn

rng = np.random.default_rng(0)
BATCHES = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8)) for _ in range(3)]


def initial_model() -> nn.Sequential:
  k1, k2 = tgfn.random.split(tgfn.random.key(7))
  return nn.Sequential([nn.Linear.init(k1, 6, 5), nn.relu, nn.Linear.init(k2, 5, 3)])


def train_functional() -> list[np.ndarray]:
  model, opt = initial_model(), nn.optim.adam(0.05)
  state = opt.init(model)

  @tgfn.jit
  def step(model, state, x, y):
    grads = tgfn.grad(lambda m: nn.cross_entropy(m(x), y))(model)
    updates, state = opt.update(grads, state, model)
    return nn.optim.apply_updates(model, updates), state

  for x, y in BATCHES: model, state = step(model, state, tnp.array(x), tnp.array(y))
  return [np.asarray(leaf) for leaf in tgfn.tree.leaves(model)]


def stateful_loss(params: list[Tensor], x: Tensor, y: tgfn.Array) -> Tensor:
  w1, b1, w2, b2 = params
  hidden = (x @ w1.T + b1).relu()
  logits = hidden @ w2.T + b2
  log_probs = logits - logits.exp().sum(axis=1, keepdims=True).log()
  return -(log_probs * nn.one_hot(y, 3)).sum(axis=1).mean()


def train_stateful(jit: bool) -> list[np.ndarray]:
  model = initial_model()
  params = [Tensor(leaf, requires_grad=True) for leaf in tgfn.tree.leaves(model)]  # w1, b1, w2, b2
  opt = nn.optim.Adam(params, lr=0.05)

  def step(x: Tensor, y: tgfn.Array) -> None:
    opt.zero_grad()
    stateful_loss(params, x, y).backward()
    opt.step()

  run = tgfn.jit(step) if jit else step
  for x, y in BATCHES: run(Tensor(x), tnp.array(y))
  return [t.numpy() for t in params]


def test_functional_and_stateful_training_agree():
  functional = train_functional()
  for jit in (False, True):
    for got, want in zip(train_stateful(jit), functional):
      assert_close(got, want, rtol=1e-5, atol=1e-6)
