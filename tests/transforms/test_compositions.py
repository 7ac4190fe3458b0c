"""The composition matrix on a small MLP loss, against gradients written out by hand in NumPy."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close

rng = np.random.default_rng(42)
N = 5
X = rng.standard_normal((N, 3))
Y = rng.standard_normal((N, 2))
P = {"w1": rng.standard_normal((3, 4)), "b1": rng.standard_normal(4),
     "w2": rng.standard_normal((4, 2)), "b2": rng.standard_normal(2)}


def loss(p, x, y):
  h = tnp.tanh(x @ p["w1"] + p["b1"])
  return tnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def np_loss_and_grads(p, x, y):
  """Forward and backward written out by hand."""
  h = np.tanh(x @ p["w1"] + p["b1"])
  r = h @ p["w2"] + p["b2"] - y
  d_out = 2 * r / r.size
  dh = d_out @ p["w2"].T
  dz = dh * (1 - h ** 2)
  return (r ** 2).mean(), {"w1": x.T @ dz, "b1": dz.sum(0), "w2": h.T @ d_out, "b2": d_out.sum(0)}


def as_tgfn(tree): return tgfn.tree.map(tnp.array, tree)


def test_grad():
  assert_close(loss(as_tgfn(P), tnp.array(X), tnp.array(Y)), np_loss_and_grads(P, X, Y)[0], rtol=1e-12)
  g = tgfn.grad(loss)(as_tgfn(P), tnp.array(X), tnp.array(Y))
  for k, v in np_loss_and_grads(P, X, Y)[1].items(): assert_close(g[k], v, rtol=1e-10, atol=1e-12)


def test_grad_of_grad_matches_finite_differences_of_the_hand_gradient():
  def scaled(s, p): return loss({**p, "b2": p["b2"] * s}, tnp.array(X), tnp.array(Y))
  got = tgfn.grad(tgfn.grad(scaled))(tnp.array(np.float64(1.3)), as_tgfn(P))

  def first(s): return (np_loss_and_grads({**P, "b2": P["b2"] * s}, X, Y)[1]["b2"] * P["b2"]).sum()
  eps = 1e-6
  assert_close(got, (first(1.3 + eps) - first(1.3 - eps)) / (2 * eps), rtol=1e-6)


def test_hessian_by_jacfwd_of_jacrev():
  # d2L/db2^2 = 2/(N*2) * N * I = I, exactly
  hess = tgfn.jacfwd(tgfn.jacrev(lambda b2: loss({**as_tgfn(P), "b2": b2}, tnp.array(X), tnp.array(Y))))(tnp.array(P["b2"]))
  assert_close(hess, np.eye(2), atol=1e-12)
  assert_close(tgfn.hessian(lambda b2: loss({**as_tgfn(P), "b2": b2}, tnp.array(X), tnp.array(Y)))(tnp.array(P["b2"])),
               np.eye(2), atol=1e-12)


def test_jvp_of_grad_is_a_hessian_vector_product():
  v = rng.standard_normal((4, 2))

  def grad_w2(w2): return tgfn.grad(lambda w: loss({**as_tgfn(P), "w2": w}, tnp.array(X), tnp.array(Y)))(w2)
  _, hvp = tgfn.jvp(grad_w2, (tnp.array(P["w2"]),), (tnp.array(v),))
  eps = 1e-6
  fd = (np_loss_and_grads({**P, "w2": P["w2"] + eps * v}, X, Y)[1]["w2"]
        - np_loss_and_grads({**P, "w2": P["w2"] - eps * v}, X, Y)[1]["w2"]) / (2 * eps)
  assert_close(hvp, fd, rtol=1e-6, atol=1e-9)


def test_vmap_of_grad_gives_per_example_gradients():
  per_example = tgfn.vmap(tgfn.grad(loss), in_axes=(None, 0, 0))(as_tgfn(P), tnp.array(X[:, None]), tnp.array(Y[:, None]))
  for k in P:
    want = np.stack([np_loss_and_grads(P, X[i:i + 1], Y[i:i + 1])[1][k] for i in range(N)])
    assert_close(per_example[k], want, rtol=1e-10, atol=1e-12)


def test_grad_of_vmap_equals_the_batch_gradient():
  def total(p): return tgfn.vmap(loss, in_axes=(None, 0, 0))(p, tnp.array(X[:, None]), tnp.array(Y[:, None])).mean()
  g = tgfn.grad(total)(as_tgfn(P))
  for k, v in np_loss_and_grads(P, X, Y)[1].items(): assert_close(g[k], v, rtol=1e-10, atol=1e-12)


def test_vmap_of_vmap_over_params_and_data():
  scales = np.array([0.5, 1.0, 2.0])
  def f(s, i): return loss({**as_tgfn(P), "b1": as_tgfn(P)["b1"] * s}, tnp.array(X)[i][None], tnp.array(Y)[i][None])
  got = tgfn.vmap(tgfn.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(tnp.array(scales), tnp.arange(N))
  want = np.array([[np_loss_and_grads({**P, "b1": P["b1"] * s}, X[i:i + 1], Y[i:i + 1])[0] for i in range(N)]
                   for s in scales])
  assert_close(got, want, rtol=1e-10)


@pytest.mark.parametrize("outer", ["jit_of_grad", "grad_of_jit", "vmap_of_jit", "jit_of_vmap"])
def test_jit_composes(outer):
  x, y = tnp.array(X), tnp.array(Y)
  want = np_loss_and_grads(P, X, Y)[1]
  if outer == "jit_of_grad": g = tgfn.jit(tgfn.grad(loss))(as_tgfn(P), x, y)
  elif outer == "grad_of_jit": g = tgfn.grad(tgfn.jit(loss))(as_tgfn(P), x, y)
  else:
    f = tgfn.vmap(tgfn.jit(tgfn.grad(loss)), in_axes=(None, 0, 0)) if outer == "vmap_of_jit" else \
      tgfn.jit(tgfn.vmap(tgfn.grad(loss), in_axes=(None, 0, 0)))
    g = tgfn.tree.map(lambda a: a.mean(0), f(as_tgfn(P), tnp.array(X[:, None]), tnp.array(Y[:, None])))
  for k, v in want.items(): assert_close(g[k], v, rtol=1e-10, atol=1e-12)
