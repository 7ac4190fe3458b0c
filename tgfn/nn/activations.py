"""The rest of jax.nn's activations, as compositions of tgfn.numpy (so grad, vmap and jit apply).
`relu gelu silu sigmoid softmax log_softmax logsumexp one_hot` live in functional.py; every name is
exported from `tgfn.nn`. Definitions and defaults follow jax.nn; kinks take the derivative JAX gives
(0 at relu6's and hard_tanh's corners, 1/2 for softplus at 0; tests/transforms/test_kink_grads.py)."""
from __future__ import annotations

from typing import Any, Optional, Union

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.dtype import float_dtype
from tgfn.nn.functional import Axis, sigmoid, silu
from tgfn.ops.axes import normalize_axis

__all__ = ["identity", "relu6", "leaky_relu", "elu", "celu", "selu", "softplus", "soft_sign", "log_sigmoid",
           "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "swish", "glu", "mish", "squareplus",
           "sparse_plus", "sparse_sigmoid", "standardize"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
swish = silu


def _float(x: Any) -> Array:
  x = as_array(x)
  return x.astype(float_dtype(x.dtype))


def identity(x: Any) -> Array:
  return as_array(x)


def relu6(x: Any) -> Array:
  """min(max(x, 0), 6); the derivative is 0 at both corners, as in JAX."""
  x = as_array(x)
  return tnp.where(x <= 0, tnp.zeros_like(x), tnp.where(x >= 6, tnp.full_like(x, 6), x))


def leaky_relu(x: Any, negative_slope: float = 1e-2) -> Array:
  """x where x >= 0, negative_slope * x elsewhere."""
  x = _float(x)
  return tnp.where(x >= 0, x, negative_slope * x)


def elu(x: Any, alpha: float = 1.0) -> Array:
  """x where x > 0, alpha * (exp(x) - 1) elsewhere (expm1 of a clamped x: no overflow, finite derivative)."""
  x = _float(x)
  return tnp.where(x > 0, x, alpha * tnp.expm1(tnp.where(x > 0, tnp.zeros_like(x), x)))


def celu(x: Any, alpha: float = 1.0) -> Array:
  """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
  x = _float(x)
  return tnp.maximum(x, 0.0) + alpha * tnp.expm1(tnp.minimum(x, 0.0) / alpha)


def selu(x: Any) -> Array:
  """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al."""
  return _SELU_SCALE * elu(x, _SELU_ALPHA)


def softplus(x: Any) -> Array:
  """log(1 + exp(x)) = logaddexp(x, 0): no overflow for any x, and the derivative is sigmoid(x) (1/2 at 0;
  the form max(x, 0) + log1p(exp(-|x|)) would give 0 there)."""
  return tnp.logaddexp(_float(x), 0.0)


def soft_sign(x: Any) -> Array:
  x = _float(x)
  return x / (tnp.abs(x) + 1)


def log_sigmoid(x: Any) -> Array:
  """log(sigmoid(x)) = -softplus(-x)."""
  return -softplus(-_float(x))


def hard_tanh(x: Any) -> Array:
  """x clipped to [-1, 1]; the derivative is 0 outside (-1, 1)."""
  x = _float(x)
  return tnp.where(x > 1, tnp.ones_like(x), tnp.where(x < -1, -tnp.ones_like(x), x))


def hard_sigmoid(x: Any) -> Array:
  """relu6(x + 3) / 6."""
  return relu6(_float(x) + 3.0) / 6.0


def hard_silu(x: Any) -> Array:
  """x * hard_sigmoid(x)."""
  x = _float(x)
  return x * hard_sigmoid(x)


hard_swish = hard_silu


def glu(x: Any, axis: int = -1) -> Array:
  """The gated linear unit: x split in two halves a, b along `axis`, a * sigmoid(b)."""
  x = _float(x)
  ax = normalize_axis(axis, x.ndim)
  if x.shape[ax] % 2: raise ValueError(f"glu needs an even size along axis {axis}, got shape {x.shape}")
  a, b = tnp.split(x, 2, ax)
  return a * sigmoid(b)


def mish(x: Any) -> Array:
  """x * tanh(softplus(x))."""
  x = _float(x)
  return x * tnp.tanh(softplus(x))


def squareplus(x: Any, b: float = 4) -> Array:
  """(x + sqrt(x^2 + b)) / 2, a smooth relu."""
  x = _float(x)
  return (x + tnp.sqrt(x * x + b)) / 2


def sparse_plus(x: Any) -> Array:
  """0 for x <= -1, (x + 1)^2 / 4 for -1 < x < 1, x for x >= 1."""
  x = _float(x)
  return tnp.where(x <= -1, tnp.zeros_like(x), tnp.where(x >= 1, x, (x + 1) ** 2 / 4))


def sparse_sigmoid(x: Any) -> Array:
  """The derivative of sparse_plus: (clip(x, -1, 1) + 1) / 2 (at +-1 the derivative is clip's, 1/2 of the
  slope, as JAX; hard_tanh's would be the full slope)."""
  return 0.5 * (tnp.clip(_float(x), -1.0, 1.0) + 1.0)


def standardize(x: Any, axis: Axis = -1, mean: Optional[Any] = None, variance: Optional[Any] = None,
                epsilon: Union[float, Any] = 1e-5, *, algorithm: str = "fast") -> Array:
  """(x - mean) / sqrt(variance + epsilon) over `axis`. As jax.nn.standardize: the "fast" variance is
  mean(x^2) - mean^2 clipped at 0; "stable" is mean((x - mean)^2)."""
  x = _float(x)
  if mean is None: mean = tnp.mean(x, axis, keepdims=True)
  if variance is None:
    if algorithm == "fast": variance = tnp.clip(tnp.mean(tnp.square(x), axis, keepdims=True) - tnp.square(mean), 0)
    elif algorithm == "stable": variance = tnp.mean(tnp.square(x - mean), axis, keepdims=True)
    else: raise ValueError(f"standardize: unknown algorithm {algorithm!r}, expected 'fast' or 'stable'")
  return (x - mean) * tnp.rsqrt(variance + epsilon)
