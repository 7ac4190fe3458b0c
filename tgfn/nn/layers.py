"""Layers as pytrees: immutable dataclasses whose arrays are the tree's leaves and whose configuration
(stride, eps, number of heads, ...) is static tree metadata.

So a model is an ordinary value: `tgfn.grad(loss)(model)` returns a model-shaped tree of gradients,
`tgfn.jit(f)(model, x)` compiles once per model structure, `tgfn.vmap` maps over inputs (or over a
stack of models), and an optimizer step is `tgfn.tree.map(lambda p, g: p - lr * g, model, grads)`.

Construction, the same for every layer with parameters:
  - `Layer.init(key, ...)` draws PyTorch's default initialization from `key`, a `tgfn.random` PRNG key
    (`tgfn.random.key(0)`). Layers whose initialization is deterministic (the norms) accept and
    ignore a key (None is fine), so generic code can call every `init` the same way.
  - `Layer(weight=..., bias=...)`, the dataclass constructor, takes the arrays as they are: the path
    for pretrained or NumPy-generated values. Parameter-free layers (Dropout, Sequential, Lambda) are
    only built this way.

Calling conventions:
  - `layer(x)` returns the output. A layer that behaves differently while training takes a keyword
    `training` (default False: inference), and one that needs randomness a keyword `key`.
  - Stateful layers (class attribute `stateful = True`: BatchNorm, and a Sequential holding one)
    return `(y, updated_layer)` instead, JAX style: the caller keeps the updated statistics.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

import tgfn.numpy as tnp
from tgfn import random, tree
from tgfn.array import Array
from tgfn.dtype import DType, dtypes, to_dtype
from tgfn.nn import functional as F
from tgfn.ops.axes import normalize_axis
from tgfn.transforms.api import stop_gradient

__all__ = ["Linear", "Conv2d", "BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm", "Embedding", "Dropout",
           "Sequential", "Lambda", "MultiHeadAttention"]

Key = Any  # a tgfn.random PRNG key: uint32 of shape (2,)
Shape = Union[int, Sequence[int]]


# the classes made by _layer: known pytree nodes, so Sequential need not flatten one to tell it from a function
_LAYER_TYPES: set[type] = set()


def _layer(*meta_fields: str) -> Callable[[type], type]:
  """Make `cls` a frozen dataclass registered as a pytree node with `meta_fields` static. eq=False:
  generated equality would compare arrays elementwise, and layers are values, not keys."""
  def wrap(cls: type) -> type:
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    _LAYER_TYPES.add(cls)
    return tree.register_dataclass(cls, meta_fields=list(meta_fields), rebuild_fields_only=True)
  return wrap


# ---- initialization
def _uniform(key: Key, shape: tuple[int, ...], bound: float, dtype: DType) -> Array:
  """U(-bound, bound) of `shape`."""
  return random.uniform(key, shape, dtype, -bound, bound)


def _shape(shape: Shape) -> tuple[int, ...]: return (shape,) if isinstance(shape, int) else tuple(shape)


def _hashable(value: Any) -> Any:
  """Lists (at any depth) as tuples: static tree metadata is hashed and compared by jit's cache."""
  return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def _channel_shape(x: Array, axis: int) -> tuple[int, ...]:
  """The shape that broadcasts a per-channel vector along `axis` of x."""
  return tuple(n if i == axis else 1 for i, n in enumerate(x.shape))


# ---- dense and convolutional
@_layer()
class Linear:
  """y = x @ weight.T + bias. x: (..., in_features) -> (..., out_features).
  weight: (out_features, in_features); bias: (out_features,) or None."""
  weight: Array
  bias: Optional[Array] = None

  @classmethod
  def init(cls, key: Key, in_features: int, out_features: int, bias: bool = True,
           dtype: Any = dtypes.float32) -> Linear:
    """PyTorch's default: weight and bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features))."""
    dt, bound = to_dtype(dtype), 1.0 / math.sqrt(in_features)
    kw, kb = random.split(key)
    return cls(_uniform(kw, (out_features, in_features), bound, dt),
               _uniform(kb, (out_features,), bound, dt) if bias else None)

  def __call__(self, x: Any) -> Array:
    y = tnp.matmul(x, self.weight.T)
    return y if self.bias is None else y + self.bias


@_layer("stride", "padding", "dilation", "groups")
class Conv2d:
  """2-d convolution (see `functional.conv2d`): x (N, C, H, W) or (C, H, W) -> (N, O, OH, OW).
  weight: (O, C // groups, KH, KW); bias: (O,) or None. The configuration is static."""
  weight: Array
  bias: Optional[Array] = None
  stride: Any = 1
  padding: Any = 0
  dilation: Any = 1
  groups: int = 1

  def __post_init__(self) -> None:
    for name in ("stride", "padding", "dilation"):  # the dataclass is frozen
      object.__setattr__(self, name, _hashable(getattr(self, name)))

  @classmethod
  def init(cls, key: Key, in_channels: int, out_channels: int, kernel_size: Shape, stride: Shape = 1,
           padding: Any = 0, dilation: Shape = 1, groups: int = 1, bias: bool = True,
           dtype: Any = dtypes.float32) -> Conv2d:
    """PyTorch's default: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    fan_in = in_channels // groups * KH * KW."""
    kh, kw = F._pair(kernel_size, "Conv2d: kernel_size")
    dt = to_dtype(dtype)
    bound = 1.0 / math.sqrt(in_channels // groups * kh * kw)
    k_w, k_b = random.split(key)
    return cls(_uniform(k_w, (out_channels, in_channels // groups, kh, kw), bound, dt),
               _uniform(k_b, (out_channels,), bound, dt) if bias else None,
               stride, padding, dilation, groups)

  def __call__(self, x: Any) -> Array:
    return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


@_layer()
class Embedding:
  """A lookup table: integer ids of any shape (...) -> (..., features). weight: (num_embeddings,
  features). Out-of-range ids follow tgfn indexing (negative ids wrap once, then ids are clamped)."""
  weight: Array

  @classmethod
  def init(cls, key: Key, num_embeddings: int, features: int, dtype: Any = dtypes.float32) -> Embedding:
    """PyTorch's default: weight ~ N(0, 1)."""
    return cls(random.normal(key, (num_embeddings, features), to_dtype(dtype)))

  def __call__(self, ids: Any) -> Array: return self.weight[ids]


# ---- normalization
def _standardize(x: Array, axes: tuple[int, ...], eps: float) -> Array:
  mean = tnp.mean(x, axes, keepdims=True)
  centered = x - mean
  return centered * tnp.rsqrt(tnp.mean(centered * centered, axes, keepdims=True) + eps)


@_layer("momentum", "eps", "axis")
class BatchNorm:
  """Batch normalization over every axis but the channel `axis` (default 1: (N, C), (N, C, H, W), ...).
  weight, bias, running_mean, running_var: (C,).

  `y, new_bn = bn(x, training=True)` normalizes with the batch's mean and (biased) variance and
  returns the layer with updated running statistics, as PyTorch: running = (1 - momentum) * running +
  momentum * batch statistic, the variance unbiased (n / (n - 1)). The statistics carry no gradient.
  With training=False (the default) the running statistics normalize and the layer comes back as is."""
  stateful: ClassVar[bool] = True
  weight: Array
  bias: Array
  running_mean: Array
  running_var: Array
  momentum: float = 0.1
  eps: float = 1e-5
  axis: int = 1

  @classmethod
  def init(cls, key: Key, num_features: int, momentum: float = 0.1, eps: float = 1e-5, axis: int = 1,
           dtype: Any = dtypes.float32) -> BatchNorm:
    """weight and running_var ones, bias and running_mean zeros (deterministic: `key` is unused)."""
    ones, zeros = tnp.ones(num_features, to_dtype(dtype)), tnp.zeros(num_features, to_dtype(dtype))
    return cls(ones, zeros, zeros, ones, momentum, eps, axis)

  def __call__(self, x: Any, training: bool = False) -> tuple[Array, BatchNorm]:
    x = tnp.asarray(x)
    ax = normalize_axis(self.axis, x.ndim)
    axes = tuple(i for i in range(x.ndim) if i != ax)
    per_channel = lambda v: v.reshape(_channel_shape(x, ax))
    if training:
      mean = tnp.mean(x, axes, keepdims=True)
      var = tnp.mean(tnp.square(x - mean), axes, keepdims=True)
      n = x.size // x.shape[ax]
      m = self.momentum
      stats = stop_gradient((mean.reshape(-1), var.reshape(-1) * (n / max(n - 1, 1))))
      new = dataclasses.replace(self, running_mean=(1 - m) * self.running_mean + m * stats[0],
                                running_var=(1 - m) * self.running_var + m * stats[1])
    else:
      mean, var, new = per_channel(self.running_mean), per_channel(self.running_var), self
    y = (x - mean) * tnp.rsqrt(var + self.eps) * per_channel(self.weight) + per_channel(self.bias)
    return y, new


@_layer("normalized_shape", "eps")
class LayerNorm:
  """Normalize over the last axes `normalized_shape`: x (..., *normalized_shape), same shape out.
  weight (ones) and bias (zeros) have shape normalized_shape, or are None without elementwise_affine."""
  weight: Optional[Array]
  bias: Optional[Array]
  normalized_shape: tuple[int, ...]
  eps: float = 1e-5

  @classmethod
  def init(cls, key: Key, normalized_shape: Shape, eps: float = 1e-5, elementwise_affine: bool = True,
           bias: bool = True, dtype: Any = dtypes.float32) -> LayerNorm:
    """weight ones, bias zeros (deterministic: `key` is unused)."""
    shape, dt = _shape(normalized_shape), to_dtype(dtype)
    return cls(tnp.ones(shape, dt) if elementwise_affine else None,
               tnp.zeros(shape, dt) if elementwise_affine and bias else None, shape, eps)

  def __call__(self, x: Any) -> Array:
    x = tnp.asarray(x)
    y = _standardize(x, tuple(range(x.ndim - len(self.normalized_shape), x.ndim)), self.eps)
    if self.weight is not None: y = y * self.weight
    return y if self.bias is None else y + self.bias


@_layer("normalized_shape", "eps")
class RMSNorm:
  """x / sqrt(mean(x^2) + eps) * weight over the last axes `normalized_shape` (no centering).
  weight (ones) has shape normalized_shape, or is None without elementwise_affine. eps defaults to 1e-6
  (as Flax; PyTorch's default is the dtype's machine epsilon)."""
  weight: Optional[Array]
  normalized_shape: tuple[int, ...]
  eps: float = 1e-6

  @classmethod
  def init(cls, key: Key, normalized_shape: Shape, eps: float = 1e-6, elementwise_affine: bool = True,
           dtype: Any = dtypes.float32) -> RMSNorm:
    """weight ones (deterministic: `key` is unused)."""
    shape = _shape(normalized_shape)
    return cls(tnp.ones(shape, to_dtype(dtype)) if elementwise_affine else None, shape, eps)

  def __call__(self, x: Any) -> Array:
    x = tnp.asarray(x)
    axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
    y = x * tnp.rsqrt(tnp.mean(x * x, axes, keepdims=True) + self.eps)
    return y if self.weight is None else y * self.weight


@_layer("num_groups", "eps")
class GroupNorm:
  """Split the channels of x (N, C, *spatial) into `num_groups` groups and normalize each group of each
  example over its channels and positions; then scale and shift per channel. weight (ones), bias
  (zeros): (C,), or None without affine."""
  weight: Optional[Array]
  bias: Optional[Array]
  num_groups: int
  eps: float = 1e-5

  @classmethod
  def init(cls, key: Key, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
           dtype: Any = dtypes.float32) -> GroupNorm:
    """weight ones, bias zeros (deterministic: `key` is unused)."""
    if num_channels % num_groups:
      raise ValueError(f"GroupNorm: {num_channels} channels do not divide into {num_groups} groups")
    dt = to_dtype(dtype)
    if not affine: return cls(None, None, num_groups, eps)
    return cls(tnp.ones(num_channels, dt), tnp.zeros(num_channels, dt), num_groups, eps)

  def __call__(self, x: Any) -> Array:
    x = tnp.asarray(x)
    if x.ndim < 2 or x.shape[1] % self.num_groups:
      raise ValueError(f"GroupNorm: x must be (N, C, ...) with C divisible by {self.num_groups}, "
                       f"got shape {x.shape}")
    grouped = x.reshape(x.shape[0], self.num_groups, -1)
    y = _standardize(grouped, (2,), self.eps).reshape(x.shape)
    if self.weight is not None: y = y * self.weight.reshape(_channel_shape(x, 1))
    return y if self.bias is None else y + self.bias.reshape(_channel_shape(x, 1))


# ---- regularization and composition
@_layer("rate")
class Dropout:
  """`functional.dropout` as a layer: `Dropout(0.1)(x, key=key, training=True)`; the identity when
  training is False (the default)."""
  rate: float

  def __call__(self, x: Any, key: Key = None, training: bool = False) -> Array:
    return F.dropout(x, self.rate, key, training)


@_layer("fn")
class Lambda:
  """A parameter-free function as a layer (e.g. an activation inside Sequential); `fn` is static."""
  fn: Callable[[Array], Array]

  def __call__(self, x: Any) -> Array: return self.fn(x)


@functools.lru_cache(maxsize=None)
def _call_keywords(cls: type) -> frozenset:
  return frozenset(inspect.signature(cls.__call__).parameters)


def _is_plain_function(x: Any) -> bool:
  """A callable that is a pytree leaf, not a layer (a layer is a node: its leaves are its arrays).
  Every jit call rebuilds its Sequential outputs, so tgfn's own layers skip the flatten."""
  if not callable(x) or type(x) in _LAYER_TYPES: return False
  leaves = tree.leaves(x)
  return len(leaves) == 1 and leaves[0] is x


@_layer()
class Sequential:
  """Layers applied in order. Plain functions (e.g. `tgfn.nn.relu`) are wrapped in `Lambda`.

  `seq(x, key=None, training=False)` passes `training` to every layer that takes it and a fresh key
  (split from `key`) to every layer that takes one. If any layer is stateful, so is the Sequential:
  it returns `(y, updated_sequential)`; otherwise just `y`."""
  layers: tuple

  def __post_init__(self) -> None:
    layers = tuple(Lambda(lay) if _is_plain_function(lay) else lay for lay in self.layers)
    object.__setattr__(self, "layers", layers)  # the dataclass is frozen

  @property
  def stateful(self) -> bool: return any(getattr(lay, "stateful", False) for lay in self.layers)

  def __call__(self, x: Any, key: Key = None, training: bool = False) -> Any:
    takes = [_call_keywords(type(lay)) for lay in self.layers]
    n_keys = sum("key" in kw for kw in takes)
    keys = iter(random.split(key, n_keys) if key is not None and n_keys else [None] * n_keys)
    new_layers = []
    for lay, kw in zip(self.layers, takes):
      kwargs: dict[str, Any] = {}
      if "training" in kw: kwargs["training"] = training
      if "key" in kw: kwargs["key"] = next(keys)
      out = lay(x, **kwargs)
      x, lay = out if getattr(lay, "stateful", False) else (out, lay)
      new_layers.append(lay)
    return (x, Sequential(tuple(new_layers))) if self.stateful else x


# ---- attention
@_layer("num_heads")
class MultiHeadAttention:
  """Multi-head attention, batch first: query (..., L, E), inputs_k (..., S, E) and inputs_v (..., S, E)
  -> (..., L, E). inputs_k defaults to the query (self-attention) and inputs_v to inputs_k.

  Each input is projected (q_proj, k_proj, v_proj: Linear E -> E), split into num_heads heads of size
  E // num_heads, attended with `scaled_dot_product_attention`, and the heads are concatenated and
  projected by out_proj. mask: broadcastable to (..., num_heads, L, S), bool (True = may attend) or
  float (added to the scores); is_causal masks future key positions."""
  q_proj: Linear
  k_proj: Linear
  v_proj: Linear
  out_proj: Linear
  num_heads: int

  @classmethod
  def init(cls, key: Key, embed_dim: int, num_heads: int, bias: bool = True,
           dtype: Any = dtypes.float32) -> MultiHeadAttention:
    """PyTorch's default: the q, k, v projection weights Xavier-uniform as one packed (3E, E) matrix,
    U(+-sqrt(6 / (E + 3E))); out_proj's weight as Linear's; all biases zero."""
    if embed_dim % num_heads:
      raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} is not divisible by "
                       f"num_heads {num_heads}")
    dt = to_dtype(dtype)
    kq, kk, kv, ko = random.split(key, 4)
    in_bound, out_bound = math.sqrt(6.0 / (4 * embed_dim)), 1.0 / math.sqrt(embed_dim)
    zeros = tnp.zeros(embed_dim, dt) if bias else None
    proj = lambda k, bound: Linear(_uniform(k, (embed_dim, embed_dim), bound, dt), zeros)
    return cls(proj(kq, in_bound), proj(kk, in_bound), proj(kv, in_bound), proj(ko, out_bound), num_heads)

  def __call__(self, query: Any, inputs_k: Optional[Any] = None, inputs_v: Optional[Any] = None,
               mask: Optional[Any] = None, is_causal: bool = False) -> Array:
    inputs_k = query if inputs_k is None else inputs_k
    inputs_v = inputs_k if inputs_v is None else inputs_v

    def heads(x: Array) -> Array:  # (..., T, E) -> (..., H, T, E // H)
      return tnp.swapaxes(x.reshape(x.shape[:-1] + (self.num_heads, -1)), -2, -3)

    out = F.scaled_dot_product_attention(heads(self.q_proj(query)), heads(self.k_proj(inputs_k)),
                                         heads(self.v_proj(inputs_v)), mask, is_causal)
    out = tnp.swapaxes(out, -2, -3)
    return self.out_proj(out.reshape(out.shape[:-2] + (-1,)))
