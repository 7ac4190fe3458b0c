"""Array creation. Filled arrays are lazy constants (no memory until used); arange and linspace are
computed on the host, since their values are known when they are built."""
from __future__ import annotations

from typing import Any, Optional

import functools
import inspect

import numpy as np

from tgfn.array import Array, as_array, device_put, holds_arrays
from tgfn.dtype import DType, dtypes, result_type, to_dtype
from tgfn.viz.locations import at_user_line

__all__ = ["array", "asarray", "full", "zeros", "ones", "empty", "zeros_like", "ones_like", "full_like",
           "empty_like", "arange", "linspace", "eye", "identity"]



def _on_device(fn: Any) -> Any:
  """Add the array API's `device=` keyword (None: the default device) to a creation function."""
  @functools.wraps(fn)
  def create(*args: Any, device: Optional[str] = None, **kwargs: Any) -> Array:
    out = fn(*args, **kwargs)
    return out if device is None else device_put(out, device)
  # the signature shows `device` (inspect.signature, which the array API's conformance suite reads)
  sig = inspect.signature(fn)
  device_param = inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="Optional[str]")
  create.__signature__ = sig.replace(parameters=[*sig.parameters.values(), device_param])
  return create


def _shape(shape: Any) -> tuple[int, ...]:
  shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
  if any(int(n) < 0 for n in shape):
    raise ValueError(f"negative dimensions are not allowed, got shape {shape}{at_user_line()}")
  return tuple(int(n) for n in shape)


@_on_device
def array(data: Any, dtype: Any = None, copy: Optional[bool] = True) -> Array:
  """An Array from Python or NumPy data: float lists are float32 and int lists int32 (int64 if a value
  needs it), NumPy arrays keep their dtype. Lists and tuples holding Arrays (traced ones too) are stacked
  in the graph, their dtype promoted as in JAX. With an integer `dtype`, Python ints must fit it. `copy` is
  accepted for the array API: arrays are immutable, so a copy and the original cannot be told apart."""
  if dtype is not None: _check_python_ints_fit(data, to_dtype(dtype))
  return Array.from_data(data, dtype)


@_on_device
def asarray(data: Any, dtype: Any = None, copy: Optional[bool] = None) -> Array:
  """As `array`; an Array of the requested dtype is returned as it is."""
  return array(data, dtype)


def _check_python_ints_fit(data: Any, dt: DType) -> None:
  """Python ints out of `dt`'s range are an error (as in NumPy 2 and JAX), never silently wrapped. (Data
  holding Arrays is built in the graph, where each scalar gets this check as it is cast.)"""
  if not dt.is_int or isinstance(data, (Array, np.ndarray, np.generic)) or holds_arrays(data): return
  host = np.asarray(data)
  if host.dtype.kind not in "iu" or not host.size: return
  bad = next((int(v) for v in (host.min(), host.max()) if not dt.min <= int(v) <= dt.max), None)
  if bad is not None:
    raise OverflowError(f"Python int {bad} does not fit in {dt.name} (range {dt.min}..{dt.max})")


@_on_device
def full(shape: Any, fill_value: Any, dtype: Any = None) -> Array:
  if isinstance(fill_value, (Array, np.ndarray, list, tuple)):
    return as_array(fill_value, to_dtype(dtype) if dtype is not None else None)._broadcast_to(_shape(shape))
  dt = to_dtype(dtype) if dtype is not None else result_type(fill_value)
  return Array.const(fill_value, dt, _shape(shape))


@_on_device
def zeros(shape: Any, dtype: Any = None) -> Array: return full(shape, 0, dtype or dtypes.default_float)
@_on_device
def ones(shape: Any, dtype: Any = None) -> Array: return full(shape, 1, dtype or dtypes.default_float)
@_on_device
def empty(shape: Any, dtype: Any = None) -> Array: return zeros(shape, dtype)


def _like_dtype(x: Any, dtype: Any) -> DType:
  return to_dtype(dtype) if dtype is not None else as_array(x).dtype
@_on_device
def zeros_like(x: Any, dtype: Any = None, shape: Any = None) -> Array:
  return full(as_array(x).shape if shape is None else shape, 0, _like_dtype(x, dtype))
@_on_device
def ones_like(x: Any, dtype: Any = None, shape: Any = None) -> Array:
  return full(as_array(x).shape if shape is None else shape, 1, _like_dtype(x, dtype))
@_on_device
def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None) -> Array:
  return full(as_array(x).shape if shape is None else shape, fill_value, _like_dtype(x, dtype))
@_on_device
def empty_like(x: Any, dtype: Any = None, shape: Any = None) -> Array: return zeros_like(x, dtype, shape)


@_on_device
def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Array:
  """Like jnp.arange: int arguments give int32, any float gives float32 (unless `dtype`)."""
  if stop is None: start, stop = 0, start
  for name, v in (("start", start), ("stop", stop), ("step", step)):
    if isinstance(v, Array): raise TypeError(f"arange needs concrete Python numbers, got an Array for {name}")
  if step == 0: raise ValueError("arange: step must not be zero")
  dt = to_dtype(dtype) if dtype is not None else result_type(start, stop, step)
  values = np.arange(start, stop, step)
  return Array.from_data(values.astype(dt.np if dt is not dtypes.bfloat16 else np.float32), dt)


@_on_device
def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> Array:
  if num < 0: raise ValueError(f"linspace: num must be non-negative, got {num}")
  dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
  values = np.linspace(float(start), float(stop), num, endpoint=endpoint)
  return Array.from_data(values if dt.is_float else np.floor(values), dt)


@_on_device
def eye(N: int, M: Optional[int] = None, k: int = 0, dtype: Any = None) -> Array:
  """Identity-like matrix, built lazily from movement ops: ones every (M+1) positions of a flat buffer."""
  M = N if M is None else M
  dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
  if N == 0 or M == 0 or k >= M or -k >= N: return zeros((N, M), dt)  # the diagonal misses the matrix
  size = max(N, M) + abs(k)
  ones_col = Array.const(1, dt, (size, 1))
  flat = ones_col._pad(((0, 0), (0, size)))._reshape((size * (size + 1),))
  square = flat._shrink(((0, size * size),))._reshape((size, size))
  row0, col0 = (k, 0) if k >= 0 else (0, -k)
  return square._shrink(((row0, row0 + N), (col0, col0 + M)))


@_on_device
def identity(n: int, dtype: Any = None) -> Array: return eye(n, dtype=dtype)

