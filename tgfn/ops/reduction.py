"""Reductions over any axes, with `keepdims`. Built on the one REDUCE_AXIS primitive (ADD, MUL, MAX)."""
from __future__ import annotations

import builtins
from typing import Any, Optional

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes, float_dtype, sum_dtype, to_dtype
from tgfn.ops.axes import normalize_axes, normalize_axis
from tgfn.ops.elementwise import isnan, sqrt, square, where
from tgfn.uop.ops import Ops

__all__ = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all", "cumsum",
           "amax", "amin"]



def _finish(out: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
  if keepdims: return out
  return out._reshape(tuple(n for i, n in enumerate(out.shape) if i not in axes))


def _reduce(x: Any, op: Ops, axis: Any, keepdims: bool, dtype: Any = None, name: str = "") -> Array:
  x = as_array(x)
  axes = normalize_axes(axis, x.ndim)
  if dtype is not None: x = x.astype(dtype)
  if name and builtins.any(x.shape[a] == 0 for a in axes):
    raise ValueError(f"{name}: zero-size reduction over axes {axes} of shape {x.shape} has no identity")
  return _finish(x._reduce(op, axes), axes, keepdims)


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  return _reduce(x, Ops.ADD, axis, keepdims, dtype or sum_dtype(x.dtype))


def prod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  return _reduce(x, Ops.MUL, axis, keepdims, dtype or sum_dtype(x.dtype))


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
  """Maximum; NaN propagates. A zero-size reduction is an error, as in NumPy."""
  return _reduce(x, Ops.MAX, axis, keepdims, name="max")


def _order_reversed(x: Array) -> Array:
  """A map that reverses the order of values and is its own inverse: -x for floats, ~x for ints."""
  if x.dtype.is_float: return x._alu(Ops.NEG)
  if x.dtype.is_bool: return x._alu(Ops.CMPNE, Array.const(True, dtypes.bool, x.shape))
  return x._alu(Ops.XOR, Array.const(x.dtype.max if x.dtype.is_unsigned else -1, x.dtype, x.shape))


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
  return _order_reversed(max(_order_reversed(as_array(x)), axis, keepdims))


amax, amin = max, min


def mean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  dt = to_dtype(dtype) if dtype is not None else float_dtype(x.dtype)
  axes = normalize_axes(axis, x.ndim)
  count = 1
  for a in axes: count *= x.shape[a]
  return sum(x, axes, dtype=dt, keepdims=keepdims) / Array.const(count, dt) if count else \
    sum(x, axes, dtype=dt, keepdims=keepdims) * float("nan")


def var(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False, dtype: Any = None) -> Array:
  x = as_array(x)
  dt = to_dtype(dtype) if dtype is not None else float_dtype(x.dtype)
  x = x.astype(dt)
  axes = normalize_axes(axis, x.ndim)
  count = 1
  for a in axes: count *= x.shape[a]
  centered = x - mean(x, axes, keepdims=True)
  return sum(square(centered), axes, keepdims=keepdims) / Array.const(float(count - ddof) if count > ddof else 0.0, dt)


def std(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False, dtype: Any = None) -> Array:
  return sqrt(var(x, axis, ddof=ddof, keepdims=keepdims, dtype=dtype))


def _iota_along(shape: tuple[int, ...], axis: int) -> Array:
  from tgfn.ops.creation import arange
  n = shape[axis]
  return arange(n, dtype=dtypes.int32)._reshape(tuple(n if i == axis else 1 for i in range(len(shape))))._broadcast_to(shape)


def argmax(x: Any, axis: Optional[int] = None, keepdims: bool = False) -> Array:
  """Index of the first maximum (the first NaN, if any), as int32."""
  x = as_array(x)
  if axis is None:
    out = argmax(x._reshape((x.size,)), 0)
    return out._reshape((1,) * x.ndim) if keepdims else out
  ax = normalize_axis(axis, x.ndim)
  if x.shape[ax] == 0: raise ValueError("argmax of an empty sequence")
  top = max(x, ax, keepdims=True)._broadcast_to(x.shape)
  hit = (x == top) | isnan(x)
  candidates = where(hit, _iota_along(x.shape, ax), Array.const(x.shape[ax], dtypes.int32, x.shape))
  return min(candidates, ax, keepdims=keepdims)


def argmin(x: Any, axis: Optional[int] = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  return argmax(_order_reversed(x), axis, keepdims)


def any(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
  """True where any element is true; False over an empty axis (MAX over bools starts at False)."""
  return _reduce(as_array(x).astype(dtypes.bool), Ops.MAX, axis, keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x).astype(dtypes.bool)
  return _order_reversed(any(_order_reversed(x), axis, keepdims))


def cumsum(x: Any, axis: Optional[int] = None, dtype: Any = None) -> Array:
  """Inclusive prefix sum along `axis` (flattened when None): a masked sum over a triangle, one kernel."""
  x = as_array(x)
  if axis is None: x, axis = x._reshape((x.size,)), 0
  ax = normalize_axis(axis, x.ndim)
  x = x.astype(dtype or sum_dtype(x.dtype))
  from tgfn.ops.shape import moveaxis
  last = moveaxis(x, ax, -1)
  n = last.shape[-1]
  window = last._reshape(last.shape[:-1] + (1, n))._broadcast_to(last.shape[:-1] + (n, n))
  rows = _iota_along((n, n), 0)
  cols = _iota_along((n, n), 1)
  masked = where((cols <= rows)._broadcast_to(window.shape), window, Array.const(0, x.dtype, window.shape))
  return moveaxis(sum(masked, -1, dtype=x.dtype), -1, ax)
