"""The JAX quickstart examples, ported by changing the imports (`jax` -> `tgfn`, `jax.numpy` -> `tgfn.numpy`).
Reference values were computed once with NumPy in float64 (closed forms and the hand-written
logistic-regression gradient X.T @ (sigmoid(X W + b) - t)) and are hard-coded here."""
import numpy as np

import tgfn as jax
import tgfn.numpy as jnp
from tests.conftest import assert_close
from tgfn import grad, jacfwd, jacrev, vmap


def test_grad_of_tanh():
  x_small = jnp.arange(3.0)
  derivative_fn = grad(lambda x: jnp.sum(jnp.tanh(x)))
  assert_close(derivative_fn(x_small), np.array([1.0, 0.41997434, 0.07065082], np.float32), rtol=1e-6)


def sigmoid(x): return 0.5 * (jnp.tanh(x / 2) + 1)


def predict(W, b, inputs): return sigmoid(jnp.dot(inputs, W) + b)


inputs = jnp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
targets = jnp.array([True, True, False, True])
W = jnp.array([0.3, -0.2, 0.5])
b = jnp.array(0.1)


def loss(W, b):
  preds = predict(W, b, inputs)
  label_probs = preds * targets + (1 - preds) * (1 - targets)
  return -jnp.sum(jnp.log(label_probs))


def test_logistic_regression_gradients():
  assert_close(loss(W, b), np.float32(1.6338761466778178), rtol=1e-6)
  W_grad = grad(loss, argnums=0)(W, b)
  assert_close(W_grad, np.array([-0.43281616, 0.3969975, -1.12746008], np.float32), rtol=1e-5)
  W_grad, b_grad = grad(loss, (0, 1))(W, b)
  assert_close(b_grad, np.float32(-0.519425873515188), rtol=1e-5)


def test_jacobian_and_hessian_of_a_vector_function():
  def f(x): return jnp.stack([x[0] ** 2 + x[1], jnp.sin(x[1]) * x[2]])
  x = jnp.array([1.0, 2.0, 3.0])
  want_j = np.array([[2.0, 1.0, 0.0], [0.0, 3 * np.cos(2.0), np.sin(2.0)]], np.float32)
  assert_close(jacfwd(f)(x), want_j, rtol=1e-5, atol=1e-6)
  assert_close(jacrev(f)(x), want_j, rtol=1e-5, atol=1e-6)

  def hessian(fn): return jacfwd(jacrev(fn))
  h = hessian(lambda v: f(v)[1])(x)
  want_h = np.array([[0, 0, 0], [0, -3 * np.sin(2.0), np.cos(2.0)], [0, np.cos(2.0), 0]], np.float32)
  assert_close(h, want_h, rtol=1e-5, atol=1e-6)


def test_per_example_gradients():
  per_example = vmap(grad(lambda W, x, t: -jnp.log(predict(W, b, x) * t + (1 - predict(W, b, x)) * (1 - t))),
                     in_axes=(None, 0, 0))(W, inputs, targets)
  summed = np.asarray(per_example).sum(0)
  assert_close(summed, np.array([-0.43281616, 0.3969975, -1.12746008], np.float32), rtol=1e-5)
  assert per_example.shape == (4, 3)


def test_jit_speeds_up_and_matches():
  selu = lambda x, alpha=1.67, lmbda=1.05: lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)
  x = jnp.arange(5.0) - 2.0
  assert_close(jax.jit(selu)(x), selu(x), rtol=1e-6)
