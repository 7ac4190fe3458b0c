"""Tensor: the stateful wrapper. backward fills .grad through the same rules as tgfn.grad, assign
updates in place, and under jit the state a step reads and writes is carried through the compiled call."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn import Tensor

rng = np.random.default_rng(0)
W0 = rng.standard_normal((3, 2)).astype(np.float32)
X = rng.standard_normal((4, 3)).astype(np.float32)


def test_backward_matches_grad():
  w = Tensor(W0, requires_grad=True)
  x = Tensor(X)
  loss = (x @ w).tanh().sum()
  loss.backward()
  want = tgfn.grad(lambda v: tnp.tanh(tnp.array(X) @ v).sum())(tnp.array(W0))
  assert_close(w.grad, np.asarray(want), rtol=1e-6)
  assert x.grad is None  # no requires_grad: no gradient


def test_gradients_accumulate_like_pytorch():
  w = Tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
  (w * 3).sum().backward()
  (w * w).sum().backward()
  assert_close(w.grad, np.array([3 + 2, 3 + 4], np.float32))
  with pytest.raises(RuntimeError, match="non-scalar"):
    (w * 2).backward()


def test_assign_updates_in_place_and_checks_shapes():
  t = Tensor(np.zeros(3, np.float32))
  same = t.assign(tnp.arange(3.0))
  assert same is t
  assert_close(t, np.arange(3, dtype=np.float32))
  t.assign(7)
  assert_close(t, np.full(3, 7.0, np.float32))
  with pytest.raises(ValueError, match="shape \\(4,\\) into a Tensor of shape \\(3,\\)"):
    t.assign(tnp.ones(4))


def sgd_step(w, x, lr=0.1):
  loss = ((x @ w) ** 2).mean()
  loss.backward()
  w.assign(w.data - lr * w.grad.data)
  w.grad = None
  return loss.data


def test_a_jitted_stateful_step_equals_the_eager_one_step_by_step():
  eager_w = Tensor(W0, requires_grad=True)
  jit_w = Tensor(W0, requires_grad=True)
  step = tgfn.jit(lambda x: sgd_step(jit_w, x))  # jit_w is read and assigned through the closure
  for i in range(4):
    batch = Tensor(X * (i + 1))
    eager_loss = sgd_step(eager_w, batch)
    jit_loss = step(batch)
    assert_close(jit_loss, np.asarray(eager_loss), rtol=1e-6)
    assert_close(jit_w, np.asarray(eager_w), rtol=1e-6)
    assert jit_w.grad is None
  assert step.trace_count == 1


def test_explicit_tensor_arguments_are_bound_by_position():
  step = tgfn.jit(sgd_step)
  a, b = Tensor(W0, requires_grad=True), Tensor(W0 * 2, requires_grad=True)
  step(a, Tensor(X))
  step(b, Tensor(X))
  want_a, want_b = Tensor(W0, requires_grad=True), Tensor(W0 * 2, requires_grad=True)
  sgd_step(want_a, Tensor(X))
  sgd_step(want_b, Tensor(X))
  assert_close(a, np.asarray(want_a), rtol=1e-6)
  assert_close(b, np.asarray(want_b), rtol=1e-6)
  assert step.trace_count == 1


def test_grad_set_inside_jit_is_written_back():
  w = Tensor(W0, requires_grad=True)

  @tgfn.jit
  def compute_grad(x):
    loss = (x @ w).sum()
    loss.backward()
    return loss.data

  compute_grad(Tensor(X))
  assert_close(w.grad, np.repeat(X.sum(0)[:, None], 2, axis=1), rtol=1e-6)


def test_pytorch_shaped_methods():
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  t = Tensor(a)
  assert_close(t.sum(dim=1, keepdim=True), a.sum(1, keepdims=True))
  assert_close(t.mean(axis=0), a.mean(0))
  assert_close(t.max(dim=0), a.max(0))
  assert t.size() == (2, 3) and t.size(1) == 3
  assert t.view(3, 2).shape == (3, 2) and t.unsqueeze(0).shape == (1, 2, 3) and t.permute(1, 0).shape == (3, 2)
  e = np.exp(a - a.max(1, keepdims=True))
  assert_close(t.softmax(dim=1), e / e.sum(1, keepdims=True), rtol=1e-6)
  assert_close(t.sigmoid(), 1 / (1 + np.exp(-a)), rtol=1e-6)
  assert t.long().dtype == tgfn.int64 and t.float().dtype == tgfn.float32
  u = Tensor(np.ones(3, np.float32))
  assert u.add_(2).mul_(Tensor(np.full(3, 2.0, np.float32))) is u
  assert_close(u, np.full(3, 6.0, np.float32))
  assert_close(u.zero_(), np.zeros(3, np.float32))
  w = Tensor(a).requires_grad_()
  w.log_softmax(dim=-1).sum().backward()
  assert_close(w.grad, 1 - 3 * e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
