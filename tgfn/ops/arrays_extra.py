"""More array functions composed from movement ops, `where` and the one-hot gather of tgfn/ops/indexing.py:
`diff triu tril meshgrid dstack column_stack atleast_3d` and the functions whose
result size depends on the data: `nonzero flatnonzero argwhere unique`.

Data-dependent sizes follow JAX: with `size=` the result has that static size (entries past the count are
`fill_value`, extra ones dropped), so they work under jit and vmap; without it the values are read on the
host (a sync), which raises tgfn.ConcretizationError under jit and vmap.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.ops.axes import normalize_axis
from tgfn.ops.elementwise import where
from tgfn.ops.reduction import _iota_along
from tgfn.ops.shape import _promoted, atleast_1d, broadcast_to, concatenate, stack
from tgfn.uop.ops import Ops

__all__ = ["diff", "triu", "tril", "meshgrid", "dstack", "column_stack", "atleast_3d", "nonzero", "flatnonzero", "argwhere", "unique", "count_nonzero"]


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Array:
  """The n-th discrete difference along `axis` (bool: not_equal, as NumPy)."""
  x = as_array(a)
  if n < 0: raise ValueError(f"diff: order n must be non-negative, got {n}")
  ax = normalize_axis(axis, x.ndim)
  edges = []
  for extra in (prepend, append):
    if extra is None: edges.append(None); continue
    e = as_array(extra)
    shape = tuple(1 if i == ax else s for i, s in enumerate(x.shape)) if e.ndim == 0 else e.shape
    edges.append(broadcast_to(e, shape))
  x = concatenate([p for p in (edges[0], x, edges[1]) if p is not None], ax)
  for _ in range(n):
    k = x.shape[ax]
    hi = x._shrink(tuple((1, k) if i == ax else (0, s) for i, s in enumerate(x.shape))) if k else x
    lo = x._shrink(tuple((0, k - 1) if i == ax else (0, s) for i, s in enumerate(x.shape))) if k else x
    x = hi != lo if x.dtype.is_bool else hi - lo
  return x


def _triangle(m: Any, k: int, upper: bool) -> Array:
  x = as_array(m)
  if x.ndim < 2: raise ValueError(f"{'triu' if upper else 'tril'}: need at least 2 axes, got shape {x.shape}")
  rows, cols = x.shape[-2:]
  r, c = _iota_along((rows, cols), 0), _iota_along((rows, cols), 1)
  keep = (c - r >= k) if upper else (c - r <= k)
  return where(keep._broadcast_to(x.shape), x, Array.const(0, x.dtype, x.shape))


def triu(m: Any, k: int = 0) -> Array: return _triangle(m, k, True)
def tril(m: Any, k: int = 0) -> Array: return _triangle(m, k, False)


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Array]:
  if indexing not in ("xy", "ij"): raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
  xs = [as_array(x)._reshape((as_array(x).size,)) for x in xi]
  shape = [x.size for x in xs]
  if indexing == "xy" and len(xs) >= 2: shape[0], shape[1] = shape[1], shape[0]
  out = []
  for i, x in enumerate(xs):
    axis = (1 - i if i < 2 else i) if indexing == "xy" and len(xs) >= 2 else i
    column = tuple(x.size if j == axis else 1 for j in range(len(xs)))
    v = x._reshape(column)
    out.append(v if sparse else v._broadcast_to(tuple(shape)))
  return out


def atleast_3d(x: Any) -> Array:
  x = as_array(x)
  if x.ndim == 0: return x._reshape((1, 1, 1))
  if x.ndim == 1: return x._reshape((1, x.shape[0], 1))
  if x.ndim == 2: return x._reshape(x.shape + (1,))
  return x


def dstack(arrays: Sequence[Any], dtype: Any = None) -> Array:
  return concatenate([atleast_3d(a) for a in _promoted(list(arrays), dtype)], axis=2)


def column_stack(arrays: Sequence[Any]) -> Array:
  xs = [as_array(a) for a in arrays]
  return concatenate([x._reshape((x.size, 1)) if x.ndim < 2 else x for x in xs], axis=1)


def _host_flat_positions(mask: Array) -> np.ndarray:
  return np.flatnonzero(mask.numpy("nonzero without size= (pass size= to use it under jit or vmap)"))


def _first_positions(mask: Array, size: int, fill: int) -> tuple[Array, Array]:
  """The flat positions of the first `size` true entries of `mask` (int32), `fill` past the count, and
  whether each slot is filled. One-hot over the rank of each true entry: O(mask.size * size)."""
  flat = mask._reshape((mask.size,))
  n = flat.size
  from tgfn.ops.reduction import cumsum
  rank = cumsum(flat.astype(dtypes.int32)) - 1  # rank of each true entry among the true ones
  grid = (size, n)
  slot = _iota_along(grid, 0)
  hit = flat._reshape((1, n))._broadcast_to(grid) & (rank._reshape((1, n))._broadcast_to(grid) == slot)
  pos = where(hit, _iota_along(grid, 1), 0)._reduce(Ops.ADD, (1,))._reshape((size,))
  filled = hit._reduce(Ops.MAX, (1,))._reshape((size,))
  return where(filled, pos, fill), filled


def _unravel(flat: Array, shape: tuple[int, ...]) -> list[Array]:
  out = []
  for k in range(len(shape)):
    stride = math.prod(shape[k + 1:])
    out.append((flat // stride) % shape[k] if k else flat // stride)
  return out


def nonzero(a: Any, size: Optional[int] = None, fill_value: Any = None) -> tuple[Array, ...]:
  """The indices of the nonzero entries, one int32 array per axis. With `size`, exactly `size` of them
  (padded with `fill_value`, default 0: a scalar, or one per axis)."""
  x = as_array(a)
  if x.ndim == 0: raise ValueError("nonzero: a 0-d array has no axes to index; use atleast_1d first")
  mask = x != 0 if not x.dtype.is_bool else x
  if size is None:
    pos = Array.from_data(_host_flat_positions(mask).astype(np.int32), device=x.device)
    return tuple(_unravel(pos, x.shape))
  fills = fill_value if isinstance(fill_value, (tuple, list)) else [0 if fill_value is None else fill_value] * x.ndim
  if len(fills) != x.ndim:
    raise ValueError(f"nonzero: fill_value needs one value per axis ({x.ndim}), got {len(fills)}")
  pos, filled = _first_positions(mask, size, 0)
  return tuple(where(filled, i, int(f)) for i, f in zip(_unravel(pos, x.shape), fills))


def flatnonzero(a: Any, size: Optional[int] = None, fill_value: Any = None) -> Array:
  return nonzero(as_array(a)._reshape((as_array(a).size,)), size=size, fill_value=fill_value)[0]


def argwhere(a: Any, size: Optional[int] = None, fill_value: Any = None) -> Array:
  """(count, ndim) int32 indices of the nonzero entries (NumPy's argwhere)."""
  x = atleast_1d(as_array(a))
  idx = nonzero(x, size=size, fill_value=fill_value)
  out = stack(idx, axis=1)
  return out if as_array(a).ndim else out[:, :0]


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Array:
  from tgfn.ops.reduction import sum as _sum
  x = as_array(a)
  return _sum((x != 0).astype(dtypes.int32), axis, keepdims=keepdims)


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: Optional[int] = None, equal_nan: bool = True, size: Optional[int] = None,
           fill_value: Any = None) -> Any:
  """The sorted distinct values of the flattened array (NaNs count as one, as `equal_nan`). With `size`,
  exactly `size` values: padded with `fill_value` (default: the smallest value, as JAX)."""
  from tgfn.ops.sorting import _sort_last
  if axis is not None: raise NotImplementedError("unique: axis= is not supported; use axis=None (flattened)")
  x = as_array(ar)
  x = x._reshape((x.size,))
  n = x.size
  order, (s,) = _sort_last([x], [x])
  if n == 0: first = Array.const(True, dtypes.bool, (0,))
  else:
    prev = s._shrink(((0, n - 1),))._pad(((1, 0),))
    same = (s == prev) | ((s != s) & (prev != prev)) if equal_nan and s.dtype.is_float else s == prev
    first = ~same | (_iota_along((n,), 0) == 0)
  extras = []
  if size is None:
    keep = np.flatnonzero(first.numpy("unique without size= (pass size= to use it under jit or vmap)"))
    values = s[keep] if len(keep) else s[:0]
    if return_index: extras.append(order[keep] if len(keep) else order[:0])
    if return_inverse:
      group = _inverse_groups(first, order, n)
      extras.append(group)
    if return_counts:
      ends = np.append(keep[1:], n)
      extras.append(Array.from_data((ends - keep).astype(np.int32), device=x.device))
    return (values, *extras) if extras else values
  pos, filled = _first_positions(first, size, 0)
  values = s.at[pos].get(mode="clip") if n else Array.const(0, x.dtype, (size,))
  default_fill = s[0] if n else 0
  values = where(filled, values, default_fill if fill_value is None else fill_value)
  if return_index: extras.append(where(filled, order.at[pos].get(mode="clip"), 0) if n else pos)
  if return_inverse: extras.append(_inverse_groups(first, order, n))
  if return_counts:
    count = first.astype(dtypes.int32).sum()
    nxt = where(_iota_along((size,), 0) + 1 < count, _roll_left(pos), n)
    extras.append(where(filled, nxt - pos, 0))
  return (values, *extras) if extras else values


def _roll_left(pos: Array) -> Array:
  k = pos.size
  return pos._shrink(((1, k),))._pad(((0, 1),)) if k else pos


def _inverse_groups(first: Array, order: Array, n: int) -> Array:
  """For each original entry, the index of its value among the unique values."""
  from tgfn.ops.reduction import cumsum
  group_sorted = cumsum(first.astype(dtypes.int32)) - 1  # the group of each sorted entry
  # scatter back to original positions: entry order[j] belongs to group_sorted[j]
  return Array.const(0, dtypes.int32, (n,)).at[order].set(group_sorted) if n else group_sorted
