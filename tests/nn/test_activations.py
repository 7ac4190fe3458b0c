"""jax.nn's activations in tgfn.nn: values against NumPy formulas (float64), derivatives against
finite differences away from the kinks, JAX's derivative at the kinks."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import nn
from tgfn.test_util import check_grads

SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _softplus(x): return np.logaddexp(x, 0.0)
def _sigmoid(x): return 1 / (1 + np.exp(-x))


REFERENCE = {
  "relu6": lambda x: np.clip(x, 0, 6),
  "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
  "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
  "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
  "selu": lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x)),
  "softplus": _softplus,
  "soft_sign": lambda x: x / (np.abs(x) + 1),
  "log_sigmoid": lambda x: -_softplus(-x),
  "hard_tanh": lambda x: np.clip(x, -1, 1),
  "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
  "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
  "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
  "swish": lambda x: x * _sigmoid(x),
  "mish": lambda x: x * np.tanh(_softplus(x)),
  "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
  "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
  "sparse_sigmoid": lambda x: (np.clip(x, -1, 1) + 1) / 2,
}
# points away from every kink (0, +-1, -3, 3, 6), for finite differences
SMOOTH = np.array([-7.3, -2.2, -0.6, -0.2, 0.3, 0.7, 1.6, 4.1, 7.7])


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_values_match_numpy(name):
  x = np.concatenate([np.linspace(-40, 40, 161), [-1.0, 0.0, 1.0, 3.0, -3.0, 6.0]])
  got = np.asarray(getattr(nn, name)(tnp.array(x)))
  np.testing.assert_allclose(got, REFERENCE[name](x), rtol=1e-12, atol=1e-300)
  assert getattr(nn, name)(tnp.array(x.astype(np.float32))).dtype == tnp.float32


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_gradients_match_finite_differences(name):
  check_grads(lambda v: getattr(nn, name)(v).sum(), (tnp.array(SMOOTH),), order=1, modes=("rev",))


def test_kink_derivatives_follow_jax():
  grad_at = lambda f, v: float(tgfn.grad(lambda t: f(t))(tnp.array(v)))
  assert grad_at(nn.relu6, 0.0) == 0.0 and grad_at(nn.relu6, 6.0) == 0.0
  assert grad_at(nn.hard_tanh, 1.0) == 1.0 and grad_at(nn.hard_tanh, 1.5) == 0.0
  assert grad_at(nn.leaky_relu, 0.0) == 1.0 and grad_at(nn.elu, 0.0) == 1.0


def test_parameters_and_aliases():
  x = np.array([-2.0, 3.0])
  np.testing.assert_allclose(np.asarray(nn.leaky_relu(tnp.array(x), negative_slope=0.2)), [-0.4, 3.0])
  np.testing.assert_allclose(np.asarray(nn.elu(tnp.array(x), alpha=2.0)), [2 * np.expm1(-2.0), 3.0])
  np.testing.assert_allclose(np.asarray(nn.celu(tnp.array(x), alpha=0.5)), [0.5 * np.expm1(-4.0), 3.0])
  assert nn.swish is nn.silu and nn.hard_swish is nn.hard_silu
  assert float(nn.softplus(tnp.array(1000.0))) == 1000.0 and float(nn.log_sigmoid(tnp.array(-1000.0))) == -1000.0


def test_glu():
  x = np.arange(12.0).reshape(3, 4) / 5 - 1
  got = np.asarray(nn.glu(tnp.array(x)))
  np.testing.assert_allclose(got, x[:, :2] * _sigmoid(x[:, 2:]), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(nn.glu(tnp.array(x.T), axis=0)), (x[:, :2] * _sigmoid(x[:, 2:])).T, rtol=1e-12)
  with pytest.raises(ValueError, match="even"):
    nn.glu(tnp.ones((3, 3)))
  check_grads(lambda v: nn.glu(v).sum(), (tnp.array(x),), order=1, modes=("rev",))


def test_standardize():
  x = np.random.default_rng(0).normal(size=(3, 5)) * 4 + 2
  mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  want = (x - mean) / np.sqrt(var + 1e-5)
  np.testing.assert_allclose(np.asarray(nn.standardize(tnp.array(x))), want, rtol=1e-9)
  np.testing.assert_allclose(np.asarray(nn.standardize(tnp.array(x), algorithm="stable")), want, rtol=1e-12)
  given = np.asarray(nn.standardize(tnp.array(x), axis=0, mean=1.0, variance=4.0, epsilon=0.0))
  np.testing.assert_allclose(given, (x - 1) / 2, rtol=1e-12)
  with pytest.raises(ValueError, match="algorithm"):
    nn.standardize(tnp.array(x), algorithm="exact")


def test_existing_softmax_family_is_exported():
  for name in ["sigmoid", "silu", "gelu", "softmax", "log_softmax", "logsumexp", "one_hot", "relu"]:
    assert callable(getattr(nn, name))
  np.testing.assert_allclose(np.asarray(nn.gelu(tnp.array([1.0]), approximate=False)), [0.8413447460685429], rtol=1e-6)
