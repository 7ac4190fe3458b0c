"""NaN-ignoring reductions and the cumulative products, maxima and minima, composed from the reductions of
tgfn/ops/reduction.py and `where`.

NaN-reductions replace NaN by the operation's identity first (0 for sums, 1 for products, -inf for max),
so their derivatives are JAX's: zero at the NaN entries. An all-NaN slice gives NaN for nanmax, nanmin,
nanmean, nanvar and nanstd, 0 for nansum and 1 for nanprod, and -1 for nanargmax and nanargmin (JAX's
choice; NumPy raises). Cumulative ops are a masked reduction over a triangle (one kernel, O(n**2) work
along the axis, like `cumsum`); `reverse=True` accumulates from the end (lax.cumsum's flag).
"""
from __future__ import annotations

from typing import Any, Optional

from tgfn.array import Array, as_array
from tgfn.dtype import sum_dtype
from tgfn.ops.axes import normalize_axis
from tgfn.ops.elementwise import isnan, sqrt, square, where
from tgfn.ops.reduction import _iota_along, _order_reversed, _work_dtype, all as _all, argmax, sum
from tgfn.ops.reduction import max as _max, prod
from tgfn.uop.ops import Ops

__all__ = ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin",
           "cumprod", "cummax", "cummin", "cumulative_sum", "cumulative_prod"]


def _nan_to(x: Array, value: float) -> Array:
  return where(isnan(x), Array.const(value, x.dtype, x.shape), x) if x.dtype.is_float else x


def nansum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  return sum(_nan_to(as_array(x), 0.0), axis, dtype, keepdims)


def nanprod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  return prod(_nan_to(as_array(x), 1.0), axis, dtype, keepdims)


def nanmax(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  if not x.dtype.is_float: return _max(x, axis, keepdims)
  out = _max(_nan_to(x, float("-inf")), axis, keepdims)
  return where(_all(isnan(x), axis, keepdims), float("nan"), out)


def nanmin(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
  x = as_array(x)
  return _order_reversed(nanmax(_order_reversed(x), axis, keepdims))


def _count(x: Array, axis: Any, keepdims: bool, work: Any) -> Array:
  return sum((~isnan(x)).astype(work), axis, keepdims=keepdims)


def nanmean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
  """The mean of the non-NaN entries; NaN where there are none."""
  x = as_array(x)
  dt, work = _work_dtype(x, dtype)
  x = x.astype(work)
  return (sum(_nan_to(x, 0.0), axis, keepdims=keepdims) / _count(x, axis, keepdims, work)).astype(dt)


def _nan_variance(x: Array, axis: Any, ddof: int, keepdims: bool, work: Any) -> Array:
  x = x.astype(work)
  centered = x - nanmean(x, axis, keepdims=True)
  total = sum(_nan_to(square(centered), 0.0), axis, keepdims=keepdims)
  count = _count(x, axis, keepdims, work) - ddof
  return total / where(count > 0, count, 0.0)


def nanvar(x: Any, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Array:
  x = as_array(x)
  dt, work = _work_dtype(x, dtype)
  return _nan_variance(x, axis, ddof, keepdims, work).astype(dt)


def nanstd(x: Any, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False) -> Array:
  x = as_array(x)
  dt, work = _work_dtype(x, dtype)
  return sqrt(_nan_variance(x, axis, ddof, keepdims, work)).astype(dt)


def nanargmax(x: Any, axis: Optional[int] = None, keepdims: bool = False) -> Array:
  """The index of the first maximum ignoring NaN; -1 for an all-NaN slice (JAX)."""
  x = as_array(x)
  if not x.dtype.is_float: return argmax(x, axis, keepdims)
  out = argmax(_nan_to(x, float("-inf")), axis, keepdims)
  flat = x if axis is not None else x._reshape((x.size,))
  ax = 0 if axis is None else axis
  none = _all(isnan(flat), ax, keepdims=keepdims)
  return where(none._reshape(out.shape), -1, out)


def nanargmin(x: Any, axis: Optional[int] = None, keepdims: bool = False) -> Array:
  return nanargmax(_order_reversed(as_array(x)), axis, keepdims)


# ---- cumulative
def _cumulative(x: Any, axis: Optional[int], op: Ops, identity: Any, reverse: bool, dtype: Any = None) -> Array:
  """The inclusive scan of `op` along `axis` (flattened when None) as a masked reduction over a triangle."""
  x = as_array(x)
  if axis is None: x, axis = x._reshape((x.size,)), 0
  ax = normalize_axis(axis, x.ndim)
  if dtype is not None: x = x.astype(dtype)
  from tgfn.ops.shape import moveaxis
  last = moveaxis(x, ax, -1)
  if reverse: last = last._flip((last.ndim - 1,))
  n = last.shape[-1]
  window = last._reshape(last.shape[:-1] + (1, n))._broadcast_to(last.shape[:-1] + (n, n))
  below = (_iota_along((n, n), 1) <= _iota_along((n, n), 0))._broadcast_to(window.shape)
  masked = below._alu(Ops.WHERE, window, Array.const(identity, x.dtype, window.shape))
  out = masked._reduce(op, (masked.ndim - 1,))._reshape(last.shape)
  if reverse: out = out._flip((out.ndim - 1,))
  return moveaxis(out, -1, ax)


def cumprod(x: Any, axis: Optional[int] = None, dtype: Any = None, reverse: bool = False) -> Array:
  x = as_array(x)
  return _cumulative(x, axis, Ops.MUL, 1, reverse, dtype or sum_dtype(x.dtype))


def _lowest(dtype: Any) -> Any:
  if dtype.is_float: return float("-inf")
  return False if dtype.is_bool else dtype.min


def cummax(x: Any, axis: Optional[int] = None, reverse: bool = False) -> Array:
  """The running maximum; NaN propagates from where it appears."""
  x = as_array(x)
  return _cumulative(x, axis, Ops.MAX, _lowest(x.dtype), reverse)


def cummin(x: Any, axis: Optional[int] = None, reverse: bool = False) -> Array:
  x = as_array(x)
  return _order_reversed(cummax(_order_reversed(x), axis, reverse))


def cumulative_sum(x: Any, axis: Optional[int] = None, dtype: Any = None, include_initial: bool = False) -> Array:
  """The array-API spelling: like cumsum, with an optional leading 0 (`include_initial`)."""
  x = as_array(x)
  if axis is None and x.ndim > 1: raise ValueError("cumulative_sum: axis is required for arrays of more than one axis")
  ax = 0 if axis is None else normalize_axis(axis, x.ndim)
  out = _cumulative(x, ax, Ops.ADD, 0, False, dtype or sum_dtype(x.dtype))
  if not include_initial: return out
  return out._pad(tuple((1, 0) if i == ax else (0, 0) for i in range(out.ndim)))


def cumulative_prod(x: Any, axis: Optional[int] = None, dtype: Any = None, include_initial: bool = False) -> Array:
  x = as_array(x)
  if axis is None and x.ndim > 1: raise ValueError("cumulative_prod: axis is required for arrays of more than one axis")
  ax = 0 if axis is None else normalize_axis(axis, x.ndim)
  out = cumprod(x, ax, dtype)
  if not include_initial: return out
  ones = Array.const(1, out.dtype, tuple(1 if i == ax else n for i, n in enumerate(out.shape)))
  from tgfn.ops.shape import concatenate
  return concatenate([ones, out], ax)

