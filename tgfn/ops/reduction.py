"""Reductions over any axes, with `keepdims`. Built on the one REDUCE_AXIS primitive (ADD, MUL, MAX)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Optional

from tgfn.array import Array, as_array
from tgfn.dtype import DType, dtypes, float_dtype, real_dtype, sum_dtype, to_dtype
from tgfn.ops.axes import normalize_axes, normalize_axis
from tgfn.ops.elementwise import isnan, sqrt, square, where
from tgfn.uop.ops import Ops
from tgfn.viz.locations import at_user_line

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
    raise ValueError(f"{name}: zero-size reduction over axes {axes} of shape {x.shape} has no identity{at_user_line()}")
  return _finish(x._reduce(op, axes), axes, keepdims)


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  return _reduce(x, Ops.ADD, axis, keepdims, dtype or sum_dtype(x.dtype))


def prod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  if (dtype is not None and to_dtype(dtype).is_complex) or (dtype is None and x.dtype.is_complex):
    from tgfn.ops.complex_math import complex_prod
    return complex_prod(x.astype(dtype or x.dtype), normalize_axes(axis, x.ndim), keepdims)
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
  return _order_reversed(_reduce(_order_reversed(as_array(x)), Ops.MAX, axis, keepdims, name="min"))


amax, amin = max, min


def _work_dtype(x: Array, dtype: Any) -> tuple[DType, DType]:
  """(result dtype, dtype to compute in) of mean/var/std: the default float for ints and bools, and
  float32 arithmetic for float16/bfloat16, rounded once at the end (as JAX)."""
  dt = to_dtype(dtype) if dtype is not None else float_dtype(x.dtype)
  return dt, dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt


def mean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  """The arithmetic mean; NaN for an empty reduction."""
  x = as_array(x)
  dt, work = _work_dtype(x, dtype)
  axes = normalize_axes(axis, x.ndim)
  count = math.prod(x.shape[a] for a in axes)
  total = sum(x, axes, dtype=work, keepdims=keepdims)
  return (total / count if count else total * float("nan")).astype(dt)


def _variance(x: Array, axis: Any, ddof: int, keepdims: bool, work: DType) -> Array:
  """sum(|x - mean|^2) / (count - ddof) in `work` (real for complex x, as NumPy); a divisor <= 0 gives
  inf or NaN, as NumPy."""
  x = x.astype(work)
  axes = normalize_axes(axis, x.ndim)
  count = math.prod(x.shape[a] for a in axes)
  centered = x - mean(x, axes, keepdims=True)
  if centered.dtype.is_complex:
    from tgfn.ops.complex_math import imag, real
    squares = square(real(centered)) + square(imag(centered))
    return sum(squares, axes, keepdims=keepdims) / float(builtins.max(count - ddof, 0))
  return sum(square(centered), axes, keepdims=keepdims) / float(builtins.max(count - ddof, 0))


def var(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False, dtype: Any = None, *,
        correction: Optional[float] = None) -> Array:
  """`correction` is the array API's name for `ddof`."""
  if correction is not None: ddof = correction
  x = as_array(x)
  dt, work = _work_dtype(x, dtype)
  return _variance(x, axis, ddof, keepdims, work).astype(real_dtype(dt))


def std(x: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False, dtype: Any = None, *,
        correction: Optional[float] = None) -> Array:
  """`correction` is the array API's name for `ddof`."""
  if correction is not None: ddof = correction
  x = as_array(x)
  dt, work = _work_dtype(x, dtype)
  return sqrt(_variance(x, axis, ddof, keepdims, work)).astype(real_dtype(dt))


def _iota_along(shape: tuple[int, ...], axis: int) -> Array:
  from tgfn.ops.creation import arange
  n = shape[axis]
  column = tuple(n if i == axis else 1 for i in range(len(shape)))
  return arange(n, dtype=dtypes.int32)._reshape(column)._broadcast_to(shape)


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
