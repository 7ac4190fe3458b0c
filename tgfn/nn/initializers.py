"""`tgfn.nn.initializers`: jax.nn.initializers' functions. Each builder returns an
`init(key, shape, dtype=float32)`; `zeros` and `ones` are initializers themselves. The arithmetic is
JAX's, in the same order and dtype, on tgfn.random (bit-identical with jax.random), so the weights
equal JAX's for the same key (`orthogonal`, which needs a QR factorization, agrees to rounding)."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence, Union

import numpy as np

import tgfn.numpy as tnp
from tgfn import random
from tgfn.array import Array
from tgfn.dtype import DType, dtypes, to_dtype

__all__ = ["zeros", "ones", "constant", "uniform", "normal", "truncated_normal", "variance_scaling",
           "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "lecun_uniform", "lecun_normal", "orthogonal"]

Initializer = Callable[..., Array]
Axes = Union[int, Sequence[int]]
# the standard deviation of a standard normal truncated to (-2, 2)
_TRUNCATED_STDDEV = .87962566103423978


def _shape(shape: Any) -> tuple[int, ...]:
  return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)


def _float(dtype: Any, name: str) -> DType:
  dt = to_dtype(dtype)
  if not dt.is_float: raise ValueError(f"initializers.{name}: dtype must be a float dtype, got {dt.name}")
  return dt


def zeros(key: Any, shape: Any, dtype: Any = dtypes.float32) -> Array:
  return tnp.zeros(_shape(shape), dtype)


def ones(key: Any, shape: Any, dtype: Any = dtypes.float32) -> Array:
  return tnp.ones(_shape(shape), dtype)


def constant(value: Any, dtype: Any = dtypes.float32) -> Initializer:
  def init(key: Any, shape: Any, dtype: Any = dtype) -> Array:
    return tnp.full(_shape(shape), value, dtype)
  return init


def uniform(scale: float = 1e-2, dtype: Any = dtypes.float32) -> Initializer:
  """Uniform in [0, scale)."""
  def init(key: Any, shape: Any, dtype: Any = dtype) -> Array:
    dt = _float(dtype, "uniform")
    return random.uniform(key, _shape(shape), dt) * tnp.array(scale, dt)
  return init


def normal(stddev: float = 1e-2, dtype: Any = dtypes.float32) -> Initializer:
  def init(key: Any, shape: Any, dtype: Any = dtype) -> Array:
    dt = _float(dtype, "normal")
    return random.normal(key, _shape(shape), dt) * tnp.array(stddev, dt)
  return init


def truncated_normal(stddev: float = 1e-2, dtype: Any = dtypes.float32, lower: float = -2.0,
                     upper: float = 2.0) -> Initializer:
  """stddev times a standard normal truncated to (lower, upper)."""
  def init(key: Any, shape: Any, dtype: Any = dtype) -> Array:
    dt = _float(dtype, "truncated_normal")
    return random.truncated_normal(key, lower, upper, _shape(shape), dt) * tnp.array(stddev, dt)
  return init


def _size(shape: tuple[int, ...], axes: Axes) -> int:
  return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _fans(shape: tuple[int, ...], in_axis: Axes, out_axis: Axes, batch_axis: Axes) -> tuple[float, float]:
  """(fan_in, fan_out): the input and output sizes times the receptive field (every other axis but
  the batch axes), as JAX computes them."""
  if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
    raise ValueError(f"can't compute fans of a {len(shape)}-dimensional weight with the default in_axis; "
                     "it needs at least 2 axes, or an explicit in_axis")
  in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
  receptive = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
  return in_size * receptive, out_size * receptive


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: Axes = -2, out_axis: Axes = -1,
                     batch_axis: Axes = (), dtype: Any = dtypes.float32) -> Initializer:
  """Zero-mean weights with variance scale / n, n the fan given by `mode` ('fan_in', 'fan_out',
  'fan_avg', 'fan_geo_avg'), from `distribution`: 'truncated_normal' (cut at 2 standard deviations,
  then rescaled to that variance), 'normal' or 'uniform'."""
  if mode not in _MODES: raise ValueError(f"variance_scaling: mode must be one of {_MODES}, got {mode!r}")
  if distribution not in _DISTRIBUTIONS:
    raise ValueError(f"variance_scaling: distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}")

  def init(key: Any, shape: Any, dtype: Any = dtype) -> Array:
    shape, dt = _shape(shape), _float(dtype, "variance_scaling")
    fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
         "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
    variance = tnp.array(scale / n, dt)
    if distribution == "truncated_normal":
      return random.truncated_normal(key, -2, 2, shape, dt) * (tnp.sqrt(variance) / tnp.array(_TRUNCATED_STDDEV, dt))
    if distribution == "normal":
      return random.normal(key, shape, dt) * tnp.sqrt(variance)
    return random.uniform(key, shape, dt, -1) * tnp.sqrt(3 * variance)
  return init


def _family(scale: float, mode: str, distribution: str) -> Callable[..., Initializer]:
  def builder(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = dtypes.float32) -> Initializer:
    return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
  builder.__doc__ = f"variance_scaling({scale}, {mode!r}, {distribution!r})"
  return builder


glorot_uniform = xavier_uniform = _family(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _family(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _family(1.0, "fan_in", "uniform")
lecun_normal = _family(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _family(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _family(2.0, "fan_in", "truncated_normal")


def orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: Any = dtypes.float32) -> Initializer:
  """scale times a uniformly random orthogonal matrix (tgfn.random.orthogonal), reshaped so that
  `column_axis` holds the columns and every other axis is flattened into the rows."""
  def init(key: Any, shape: Any, dtype: Any = dtype) -> Array:
    shape, dt = _shape(shape), _float(dtype, "orthogonal")
    if len(shape) < 2: raise ValueError(f"orthogonal initializer needs at least a 2D shape, got {shape}")
    if 0 in shape: return tnp.zeros(shape, dt)
    ax = column_axis % len(shape)
    n_cols = shape[ax]
    q = random.orthogonal(key, math.prod(shape) // n_cols, (), dt, n_cols)
    q = q.reshape(shape[:ax] + shape[ax + 1:] + (n_cols,))
    return tnp.array(scale, dt) * tnp.moveaxis(q, -1, ax)
  return init
