"""tgfn.nn.optim: each optimizer step by step against a float64 NumPy reference written here, schedules
against their closed forms (and optax itself when it is installed), the Tensor optimizers against the
functional ones (and PyTorch's when it is installed), jit without retracing as the step count advances,
and the edge cases (weight decay, Nesterov, LAMB's trust ratio where a norm is 0, parameters without
gradients).

Eager loops realize the state and the parameters after every step, so each step runs the kernels the
first steps compiled instead of a graph that grows with the step count."""
import dataclasses
import math

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn import Tensor, nn
from tgfn.array import Array
from tgfn.nn import optim
from tgfn.test_util import check_grads

rng = np.random.default_rng(7)
SHAPES = {"w": (2, 3), "block": {"b": (3,), "s": ()}}  # nested dicts, a 0-d leaf
STEPS = 4


def random_tree(shapes=SHAPES, dtype=np.float64):
  return tgfn.tree.map(lambda s: rng.standard_normal(s).astype(dtype), shapes,
                       is_leaf=lambda s: isinstance(s, tuple))


PARAMS0 = random_tree()
GRADS = [random_tree() for _ in range(STEPS)]


def arrays(tree): return tgfn.tree.map(tnp.array, tree)
def realized(tree): return tgfn.tree.map(lambda a: a.realize(), tree)


def run_functional(opt, params, grads_seq):
  """Parameters after each step (NumPy trees), and the final state."""
  params, history = arrays(params), []
  state = opt.init(params)
  for grads in grads_seq:
    updates, state = opt.update(arrays(grads), state, params)
    state = realized(state)
    params = realized(optim.apply_updates(params, updates))
    history.append(tgfn.tree.map(np.asarray, params))
  return history, state


# ---- float64 NumPy references, one leaf at a time
def ref_sgd(p, grads, lrs, momentum=0.0, nesterov=False, weight_decay=0.0):
  buf, out = np.zeros_like(p), []
  for g, lr in zip(grads, lrs):
    g = g + weight_decay * p
    buf = momentum * buf + g
    direction = (g + momentum * buf if nesterov else buf) if momentum else g
    p = p - lr * direction
    out.append(p)
  return out


def ref_adam(p, grads, lrs, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, trust=False):
  m, v, out = np.zeros_like(p), np.zeros_like(p), []
  for t, (g, lr) in enumerate(zip(grads, lrs), 1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + weight_decay * p
    if trust:
      p_norm, u_norm = np.linalg.norm(p), np.linalg.norm(u)
      u = u * (p_norm / u_norm if p_norm > 0 and u_norm > 0 else 1.0)
    p = p - lr * u
    out.append(p)
  return out


def reference(ref, params, grads_seq, lrs, **kw):
  """Run a one-leaf reference on every leaf: a list (per step) of parameter trees."""
  p_leaves, treedef = tgfn.tree.flatten(params)
  per_leaf = [ref(p, [tgfn.tree.leaves(g)[i] for g in grads_seq], lrs, **kw) for i, p in enumerate(p_leaves)]
  return [tgfn.tree.unflatten(treedef, [leaf[k] for leaf in per_leaf]) for k in range(len(grads_seq))]


def assert_trees_close(got, want, rtol=1e-12, atol=1e-12):
  assert tgfn.tree.structure(got) == tgfn.tree.structure(want)
  for g, w in zip(tgfn.tree.leaves(got), tgfn.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=rtol, atol=atol)


CASES = [
  ("sgd", lambda lr: optim.sgd(lr), ref_sgd, {}),
  ("sgd-momentum-decay", lambda lr: optim.sgd(lr, momentum=0.9, weight_decay=0.05), ref_sgd,
   dict(momentum=0.9, weight_decay=0.05)),
  ("sgd-nesterov", lambda lr: optim.sgd(lr, momentum=0.8, nesterov=True), ref_sgd,
   dict(momentum=0.8, nesterov=True)),
  ("adam", lambda lr: optim.adam(lr, b1=0.8, b2=0.99, eps=1e-3), ref_adam, dict(b1=0.8, b2=0.99, eps=1e-3)),
  ("adam-b1-zero", lambda lr: optim.adam(lr, b1=0.0), ref_adam, dict(b1=0.0)),
  ("adamw", lambda lr: optim.adamw(lr, weight_decay=0.3), ref_adam, dict(weight_decay=0.3)),
  ("lamb", lambda lr: optim.lamb(lr, weight_decay=0.1), ref_adam,
   dict(eps=1e-6, weight_decay=0.1, trust=True)),
]


@pytest.mark.parametrize("name,make,ref,kw", CASES, ids=[c[0] for c in CASES])
def test_optimizer_matches_numpy_reference(name, make, ref, kw):
  history, state = run_functional(make(0.05), PARAMS0, GRADS)
  for got, want in zip(history, reference(ref, PARAMS0, GRADS, [0.05] * STEPS, **kw)):
    assert_trees_close(got, want)
  assert isinstance(state.count, Array) and state.count.dtype == tnp.int32 and int(state.count) == STEPS


def test_a_schedule_sets_the_rate_of_each_update_from_the_count_before_it():
  schedule = optim.exponential_decay(0.1, transition_steps=2, decay_rate=0.5)
  history, _ = run_functional(optim.adamw(schedule, weight_decay=0.2), PARAMS0, GRADS)
  lrs = [0.1 * 0.5 ** (k / 2) for k in range(STEPS)]  # update k (from 0) uses schedule(k)
  want = reference(ref_adam, PARAMS0, GRADS, lrs, weight_decay=0.2)
  for got, w in zip(history, want):
    assert_trees_close(got, w, rtol=1e-6, atol=1e-7)  # the schedule computes in float32, as optax's


# ---- edge cases
def test_weight_decay_alone_shrinks_parameters():
  p = {"a": tnp.array(np.array([1.0, -2.0, 4.0]))}
  zero = {"a": tnp.zeros(3, tnp.float64)}
  for opt in (optim.sgd(0.1, weight_decay=0.5), optim.adamw(0.1, weight_decay=0.5)):
    updates, _ = opt.update(zero, opt.init(p), p)
    want = np.array([1.0, -2.0, 4.0]) * (1 - 0.1 * 0.5)
    assert_close(optim.apply_updates(p, updates)["a"], want, rtol=1e-15)


def test_nesterov_looks_ahead_along_the_momentum():
  p, g = tnp.array(np.zeros(2)), tnp.array(np.array([1.0, -1.0]))
  plain, nesterov = optim.sgd(1.0, momentum=0.5), optim.sgd(1.0, momentum=0.5, nesterov=True)
  s_plain, s_nest = plain.init(p), nesterov.init(p)
  for _ in range(2):
    u_plain, s_plain = plain.update(g, s_plain)
    u_nest, s_nest = nesterov.update(g, s_nest)
  assert_close(u_plain, -np.array([1.5, -1.5]))  # buffers: g, then 1.5 g
  assert_close(u_nest, -np.array([1.75, -1.75]))  # g + 0.5 * 1.5 g
  assert_close(s_nest.momentum, np.array([1.5, -1.5]))


def test_lamb_trust_ratio():
  p = {"zero": tnp.zeros(3, tnp.float64), "live": tnp.array(np.array([3.0, 4.0])),
       "still": tnp.array(np.array([1.0, 2.0]))}
  g = {"zero": tnp.array(np.array([1.0, -2.0, 0.5])), "live": tnp.array(np.array([0.5, -0.1])),
       "still": tnp.zeros(2, tnp.float64)}
  opt = optim.lamb(0.1)
  updates, _ = opt.update(g, opt.init(p), p)
  # a zero parameter norm: ratio 1, so the step is the plain first Adam step, -lr * sign(g) (up to eps)
  assert_close(updates["zero"], -0.1 * np.sign([1.0, -2.0, 0.5]), rtol=1e-5)
  # otherwise the step's norm is lr * ||p||, whatever the gradient's scale
  assert math.isclose(np.linalg.norm(np.asarray(updates["live"])), 0.1 * 5.0, rel_tol=1e-12)
  # a zero update norm (zero gradient, no decay): ratio 1, no NaN
  assert_close(updates["still"], np.zeros(2))


def test_update_checks_its_arguments():
  with pytest.raises(ValueError, match="nesterov=True needs momentum"): optim.sgd(0.1, nesterov=True)
  with pytest.raises(ValueError, match="b1 and b2 must be in"): optim.adam(0.1, b1=1.0)
  with pytest.raises(ValueError, match="learning_rate must be >= 0"): optim.lamb(-1.0)
  with pytest.raises(ValueError, match="decay_steps must be positive"): optim.cosine_decay_schedule(1.0, 0)
  p = tnp.array(np.ones(2))
  for opt in (optim.sgd(0.1, weight_decay=0.1), optim.adamw(0.1), optim.lamb(0.1)):
    with pytest.raises(ValueError, match="needs params"): opt.update(p, opt.init(p))


def test_updates_keep_the_parameter_dtype_under_a_float32_schedule():
  p = {"h": tnp.array(np.ones(3, np.float16)), "d": tnp.array(np.ones(3))}
  opt = optim.adam(optim.linear_schedule(0.5, 0.1, 4))
  updates, state = opt.update(p, opt.init(p), p)
  assert updates["h"].dtype == tnp.float16 and updates["d"].dtype == tnp.float64
  assert state.mu["h"].dtype == tnp.float16
  assert optim.apply_updates(p, updates)["h"].dtype == tnp.float16


@tgfn.tree.register_dataclass
@dataclasses.dataclass(frozen=True)
class Affine:
  scale: object
  shift: object


def test_optimizers_take_registered_dataclasses():
  model = Affine(tnp.array(PARAMS0["w"]), tnp.array(PARAMS0["block"]["b"]))
  grads = Affine(tnp.array(GRADS[0]["w"]), tnp.array(GRADS[0]["block"]["b"]))
  opt = optim.lamb(0.05, weight_decay=0.1)
  state = opt.init(model)
  assert isinstance(state.mu, Affine)
  updates, state = opt.update(grads, state, model)
  new = optim.apply_updates(model, updates)
  assert isinstance(new, Affine)
  want = reference(ref_adam, PARAMS0, GRADS[:1], [0.05], eps=1e-6, weight_decay=0.1, trust=True)[0]
  assert_close(new.scale, want["w"], rtol=1e-12)
  assert_close(new.shift, want["block"]["b"], rtol=1e-12)


def test_gradients_flow_through_an_update():
  opt = optim.lamb(0.1, weight_decay=0.1)

  def after_one_step(p):
    updates, _ = opt.update(p * p, opt.init(p), p)
    return optim.apply_updates(p, updates)
  check_grads(after_one_step, (tnp.array(np.array([0.5, -1.5, 2.0])),), order=1, modes=("rev",))


def test_updates_vmap_over_a_stack_of_models():
  opt = optim.lamb(0.1, weight_decay=0.1)  # the trust ratio is per model: a norm over each row here
  stack = rng.standard_normal((3, 4))

  def one_step(p):
    updates, _ = opt.update(p * 2, opt.init(p), p)
    return optim.apply_updates(p, updates)
  want = np.stack([np.asarray(one_step(tnp.array(row))) for row in stack])
  assert_close(tgfn.vmap(one_step)(tnp.array(stack)), want, rtol=1e-12)


# ---- schedules
COUNTS = np.array([0, 1, 2, 3, 5, 8, 10, 13, 20, 40])


def closed_forms():
  c = COUNTS.astype(np.float64)
  cos = lambda t, n: 0.5 * (1 + np.cos(np.pi * np.minimum(t, n) / n))
  return [
    ("constant", optim.constant_schedule(0.3), np.full(c.shape, 0.3), None),
    ("exponential", optim.exponential_decay(1.0, 4, 0.5), 0.5 ** (c / 4),
     lambda o: o.exponential_decay(1.0, 4, 0.5)),
    ("exponential-staircase-begin-end",
     optim.exponential_decay(2.0, 3, 0.1, transition_begin=2, staircase=True, end_value=0.01),
     np.maximum(np.where(c <= 2, 2.0, 2.0 * 0.1 ** np.floor((c - 2) / 3)), 0.01),
     lambda o: o.exponential_decay(2.0, 3, 0.1, transition_begin=2, staircase=True, end_value=0.01)),
    ("exponential-growth-capped", optim.exponential_decay(1.0, 2, 2.0, end_value=5.0),
     np.minimum(2.0 ** (c / 2), 5.0), lambda o: o.exponential_decay(1.0, 2, 2.0, end_value=5.0)),
    ("cosine", optim.cosine_decay_schedule(0.5, 10, alpha=0.1), 0.5 * (0.9 * cos(c, 10) + 0.1),
     lambda o: o.cosine_decay_schedule(0.5, 10, alpha=0.1)),
    ("cosine-exponent", optim.cosine_decay_schedule(1.0, 8, exponent=2.0), cos(c, 8) ** 2,
     lambda o: o.cosine_decay_schedule(1.0, 8, exponent=2.0)),
    ("linear", optim.linear_schedule(1.0, 0.2, 8, transition_begin=2), 1.0 - 0.8 * np.clip(c - 2, 0, 8) / 8,
     lambda o: o.linear_schedule(1.0, 0.2, 8, transition_begin=2)),
    ("warmup-cosine", optim.warmup_cosine_decay_schedule(0.0, 1.0, 3, 13, end_value=0.1),
     np.where(c < 3, c / 3, 0.1 + 0.9 * cos(c - 3, 10)),
     lambda o: o.warmup_cosine_decay_schedule(0.0, 1.0, 3, 13, end_value=0.1)),
    ("piecewise", optim.piecewise_constant_schedule(1.0, {8: 0.5, 3: 0.1}),
     np.where(c < 3, 1.0, np.where(c < 8, 0.1, 0.05)),
     lambda o: o.piecewise_constant_schedule(1.0, {8: 0.5, 3: 0.1})),
  ]


def test_schedules_match_their_closed_forms():
  counts = tnp.array(COUNTS.astype(np.int32))
  for name, schedule, want, _ in closed_forms():
    got = np.broadcast_to(np.asarray(schedule(counts), np.float64), want.shape)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7, err_msg=name)
    assert math.isclose(float(schedule(5)), want[list(COUNTS).index(5)], rel_tol=2e-6), name  # a Python int


def test_schedules_match_optax():
  optax = pytest.importorskip("optax")
  import jax
  import jax.numpy as jnp
  counts = tnp.array(COUNTS.astype(np.int32))
  for name, schedule, _, make in closed_forms()[1:]:
    want = np.asarray(jax.jit(make(optax))(jnp.asarray(COUNTS, jnp.int32)), np.float64)
    got = np.asarray(schedule(counts), np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7, err_msg=name)


def test_optimizers_match_optax():
  optax = pytest.importorskip("optax")
  import jax
  import jax.numpy as jnp
  schedule = optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 6)
  pairs = [
    (optim.sgd(0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
     optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.1, momentum=0.9, nesterov=True))),
    (optim.adamw(schedule, weight_decay=0.5),
     optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 0.1, 2, 6), weight_decay=0.5)),
    (optim.lamb(0.1, weight_decay=0.2), optax.lamb(0.1, weight_decay=0.2)),
  ]
  shapes = {"w": (2, 3), "s": ()}  # float32 kernels are new ones: a small tree keeps them few
  params0, grads = random_tree(shapes, np.float32), [random_tree(shapes, np.float32) for _ in range(STEPS)]
  for ours, theirs in pairs:
    history, _ = run_functional(ours, params0, grads)
    p = tgfn.tree.map(jnp.asarray, params0)
    state, step = theirs.init(p), jax.jit(theirs.update)  # one XLA compile instead of one per op
    for got, g in zip(history, grads):
      updates, state = step(tgfn.tree.map(jnp.asarray, g), state, p)
      p = optax.apply_updates(p, updates)
      assert_trees_close(got, tgfn.tree.map(np.asarray, p), rtol=2e-5, atol=2e-6)


# ---- jit
def test_a_jitted_training_step_equals_the_eager_one_and_compiles_once():
  opt = optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 6), weight_decay=0.1)
  x = tnp.array(rng.standard_normal((5, 2)))

  def loss(params):
    return tnp.mean(tnp.tanh(x @ params["w"] + params["block"]["b"]) ** 2) + params["block"]["s"] ** 2

  def train_step(params, state):
    updates, state = opt.update(tgfn.grad(loss)(params), state, params)
    return optim.apply_updates(params, updates), state

  jitted = tgfn.jit(train_step)
  eager_params, params = arrays(PARAMS0), arrays(PARAMS0)
  eager_state, state = opt.init(eager_params), opt.init(params)
  for _ in range(STEPS):
    eager_params, eager_state = realized(train_step(eager_params, eager_state))
    params, state = jitted(params, state)
    assert_trees_close(params, eager_params, rtol=1e-12)
    assert_trees_close(state, eager_state, rtol=1e-12)
  assert int(state.count) == STEPS
  assert jitted.trace_count == 1 and jitted._cache_size() == 1


# ---- the Tensor optimizers
STATEFUL = [  # (Tensor optimizer, functional optimizer, PyTorch's)
  (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
   optim.sgd(0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
   lambda torch, ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
  (lambda ps: optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6), optim.adam(0.05, 0.8, 0.99, 1e-6),
   lambda torch, ps: torch.optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6)),
  (lambda ps: optim.AdamW(ps, lr=0.1), optim.adamw(0.1, weight_decay=1e-2),  # PyTorch's default decay
   lambda torch, ps: torch.optim.AdamW(ps, lr=0.1)),
  (lambda ps: optim.LAMB(ps, lr=0.05, weight_decay=0.1), optim.lamb(0.05, weight_decay=0.1), None),
]


def is_tensor(x): return isinstance(x, Tensor)


@pytest.mark.parametrize("make,functional,make_torch", STATEFUL, ids=["SGD", "Adam", "AdamW", "LAMB"])
def test_tensor_optimizers_equal_the_functional_ones_and_pytorchs(make, functional, make_torch):
  tensors = tgfn.tree.map(lambda p: Tensor(p, requires_grad=True), PARAMS0)
  opt = make(tensors)  # a pytree (nested dicts) of Tensors
  for grads in GRADS:
    for t, g in zip(tgfn.tree.leaves(tensors, is_tensor), tgfn.tree.leaves(grads)):
      t.grad = Tensor(g)
    opt.step()
    opt.zero_grad()
  history, state = run_functional(functional, PARAMS0, GRADS)
  got = tgfn.tree.map(np.asarray, tensors, is_leaf=is_tensor)
  assert_trees_close(got, history[-1], rtol=0, atol=0)
  assert all(t.grad is None for t in opt.params)
  assert all(isinstance(s.count, Tensor) and int(s.count.data) == STEPS for s in opt.state)
  if make_torch is None: return
  torch = pytest.importorskip("torch")
  leaves = [torch.tensor(p, requires_grad=True) for p in tgfn.tree.leaves(PARAMS0)]
  torch_opt = make_torch(torch, leaves)
  for grads in GRADS:
    for v, g in zip(leaves, tgfn.tree.leaves(grads)): v.grad = torch.tensor(g)
    torch_opt.step()
  for ours, theirs in zip(tgfn.tree.leaves(got), leaves):
    np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_step_skips_parameters_without_gradients_and_reads_backward_grads():
  w = Tensor(np.array([[1.0, -1.0], [0.5, 2.0]], np.float32), requires_grad=True)
  frozen = Tensor(np.array([3.0, 4.0], np.float32), requires_grad=True)
  model = nn.Linear(w, frozen)  # a layer whose leaves are Tensors
  opt = optim.Adam(model, lr=0.1)
  x = Tensor(np.array([[1.0, 2.0]], np.float32))
  (x @ w).sum().backward()
  opt.step()
  # the first Adam step is -lr * sign(g)
  assert_close(w, np.array([[0.9, -1.1], [0.4, 1.9]], np.float32), rtol=1e-5)
  assert_close(frozen, np.array([3.0, 4.0], np.float32))
  assert [int(s.count.data) for s in opt.state] == [1, 0]


def test_tensor_optimizers_check_their_parameters():
  t = Tensor(np.ones(2, np.float32))
  with pytest.raises(TypeError, match="got one Tensor"): optim.SGD(t)
  with pytest.raises(TypeError, match="must all be Tensors, got Array"): optim.SGD([t, tnp.ones(2)])
  with pytest.raises(ValueError, match="empty parameter list"): optim.Adam([])
  opt = optim.SGD((p for p in [t, t]), lr=1.0)  # any iterable; a Tensor listed twice is updated once
  assert len(opt.params) == 1
  t.grad = Tensor(np.ones(3, np.float32))
  with pytest.raises(ValueError, match="gradient of shape \\(3,\\) for a parameter of shape \\(2,\\)"):
    opt.step()


def test_a_jitted_step_carries_tensor_state_out_and_compiles_once():
  w0 = rng.standard_normal((3, 2)).astype(np.float32)
  xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(STEPS)]

  def make():
    w = Tensor(w0, requires_grad=True)
    return w, optim.AdamW([w], lr=optim.cosine_decay_schedule(0.1, 3), weight_decay=0.1)

  def train(w, opt, x):
    loss = ((x @ w).tanh() ** 2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.data

  eager_w, eager_opt = make()
  jit_w, jit_opt = make()
  step = tgfn.jit(lambda x: train(jit_w, jit_opt, x))
  for x in xs:
    eager_loss = train(eager_w, eager_opt, Tensor(x))
    assert_close(step(Tensor(x)), np.asarray(eager_loss), rtol=1e-6)
    assert_close(jit_w, np.asarray(eager_w), rtol=1e-6)
    assert_close(jit_opt.state[0].mu, np.asarray(eager_opt.state[0].mu), rtol=1e-6)
  assert int(jit_opt.state[0].count.data) == STEPS and jit_w.grad is None
  assert step.trace_count == 1
