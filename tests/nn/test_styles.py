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


def test_a_jitted_stateful_step_with_batchnorm_equals_the_eager_one_step_by_step():
  import optree
  k1, k2 = tgfn.random.split(tgfn.random.key(3))
  model = nn.Sequential([nn.Linear.init(k1, 6, 4), nn.BatchNorm.init(None, 4), nn.relu, nn.Linear.init(k2, 4, 3)])
  paths, _, treedef = optree.tree_flatten_with_path(model, namespace="tgfn")

  def make_trainer():
    leaves = tgfn.tree.leaves(model)
    tensors = [Tensor(leaf, requires_grad="running" not in str(path)) for path, leaf in zip(paths, leaves)]
    opt = nn.optim.SGD([t for t in tensors if t.requires_grad], lr=0.1, momentum=0.9)

    def step(x, y):
      current = tgfn.tree.unflatten(treedef, [t.data for t in tensors])

      def loss_fn(m):
        out, new_model = m(x, training=True)
        return nn.cross_entropy(out, y), new_model
      (loss, new_model), grads = tgfn.value_and_grad(loss_fn, has_aux=True)(current)
      for t, g, new in zip(tensors, tgfn.tree.leaves(grads), tgfn.tree.leaves(new_model)):
        if t.requires_grad: t.grad = Tensor(g)
        else: t.assign(new)  # BatchNorm's running statistics
      opt.step()
      return loss
    return tensors, opt, step

  eager_tensors, _, eager_step = make_trainer()
  jit_tensors, _, step = make_trainer()
  jit_step = tgfn.jit(step)
  for x, y in BATCHES:
    assert_close(jit_step(tnp.array(x), tnp.array(y)), np.asarray(eager_step(tnp.array(x), tnp.array(y))), rtol=1e-5)
    for got, want in zip(jit_tensors, eager_tensors): assert_close(got, np.asarray(want), rtol=1e-5, atol=1e-6)
  stats = [t for t in jit_tensors if not t.requires_grad]
  assert len(stats) == 2 and not np.allclose(np.asarray(stats[0]), 0.0)  # running mean moved
  assert jit_step.trace_count == 1
