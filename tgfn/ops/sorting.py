"""Sorting, composed from the primitives: a bitonic compare-exchange network over the sorted axis, padded
to a power of two, written with reshape / flip / where. It is entirely in the IR, so jit, vmap and grad
work by composition (the derivative of a sort is the cotangent routed back through the same WHEREs: a
gather by the permutation, JAX's rule).

The network sorts several arrays at once, ordering them lexicographically by the first `num_keys` and
then by original position, so every sort is stable and the payloads (argsort's indices, lax.sort's extra
operands) move with their keys. Float keys order NaN last (as NumPy; -0.0 and 0.0 are equal).

Cost: for n entries padded to m = 2**p, p(p+1)/2 compare-exchange steps over m/2 pairs, each step one
kernel per sorted array (a materialized step: fused, the network would recompute every earlier step).
`searchsorted` compares every needle with every entry, O(len(a) * len(v)) in one fused reduction.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from tgfn.array import Array, as_array
from tgfn.device import has_64bit
from tgfn.dtype import dtypes
from tgfn.ops.axes import normalize_axis
from tgfn.ops.elementwise import floor, isnan, where
from tgfn.ops.shape import moveaxis
from tgfn.uop.ops import Ops, UOp

__all__ = ["sort", "argsort", "searchsorted", "median", "quantile", "percentile"]


# A sort of n entries along the axis (rows of them) is a rank count (2 kernels, rows * n**2 compares) when
# n <= RANK_MAX and either n is tiny or the compares stay within RANK_WORK; else the bitonic network
RANK_MAX, RANK_WORK = 2048, 1 << 26


def _materialize(x: Array) -> Array: return Array(UOp(Ops.CONTIGUOUS, x.dtype, (x.uop,)))
def _bitcast(x: Array, dtype: Any) -> Array: return Array(UOp(Ops.BITCAST, dtype, (x.uop,)))


def _order_key(x: Array, descending: bool) -> Array:
  """An unsigned array (uint32, or uint64 for 64-bit dtypes) whose integer order is the sort order of
  `x`: floats in IEEE total order (-inf < ... < -0.0 < 0.0 < ... < inf) with every NaN last, as JAX's
  sort; reversed when `descending`."""
  if x.dtype.is_float and x.dtype.bits < 32: x = x.astype(dtypes.float32)  # exact
  elif x.dtype.is_bool or x.dtype.bits < 32: x = x.astype(dtypes.uint32 if x.dtype.is_unsigned or x.dtype.is_bool
                                                           else dtypes.int32)
  word = dtypes.uint64 if x.dtype.bits == 64 else dtypes.uint32
  sign = Array.const(1 << (word.bits - 1), word, x.shape)
  if x.dtype.is_float:
    bits = _bitcast(where(isnan(x), float("nan"), x), word)
    negative = (bits & sign) != 0
    key = where(negative, ~bits, bits | sign)
  elif x.dtype.is_unsigned: key = x
  else: key = _bitcast(x, word) ^ sign
  return ~key if descending else key


def _less(a: list[Array], b: list[Array]) -> Array:
  """Lexicographic a < b over parallel lists of unsigned keys."""
  out: Optional[Array] = None
  for ka, kb in zip(reversed(a), reversed(b)):
    out = ka < kb if out is None else (ka < kb) | ((ka == kb) & out)
  assert out is not None
  return out


def _halves(x: Array, d: int, flip_second: bool) -> tuple[Array, Array]:
  """Split the last axis into blocks of 2d: the first and second half of each block."""
  batch, m = x.shape[:-1], x.shape[-1]
  blocks = x._reshape(batch + (m // (2 * d), 2, d))
  bounds = [(0, n) for n in blocks.shape[:-2]]
  a = blocks._shrink(tuple(bounds + [(0, 1), (0, d)]))._reshape(batch + (m // (2 * d), d))
  b = blocks._shrink(tuple(bounds + [(1, 2), (0, d)]))._reshape(batch + (m // (2 * d), d))
  return a, (b._flip((b.ndim - 1,)) if flip_second else b)


def _unhalves(lo: Array, hi: Array, flip_second: bool) -> Array:
  if flip_second: hi = hi._flip((hi.ndim - 1,))
  shape = lo.shape[:-1] + (1, lo.shape[-1])
  keep = [(0, 0)] * (len(shape) - 2)
  first = lo._reshape(shape)._pad(tuple(keep + [(0, 1), (0, 0)]))
  second = hi._reshape(shape)._pad(tuple(keep + [(1, 0), (0, 0)]))
  in_second = Array.const(True, dtypes.bool, shape)._pad(tuple(keep + [(1, 0), (0, 0)]))
  return in_second._alu(Ops.WHERE, second, first)._reshape(lo.shape[:-2] + (lo.shape[-2] * 2 * lo.shape[-1],))


def _compare_exchange(arrays: list[Array], n_keys: int, d: int, flip_second: bool) -> list[Array]:
  pairs = [_halves(x, d, flip_second) for x in arrays]
  swap = _less([b for _, b in pairs[:n_keys]], [a for a, _ in pairs[:n_keys]])
  return [_materialize(_unhalves(swap._alu(Ops.WHERE, b, a), swap._alu(Ops.WHERE, a, b), flip_second))
          for a, b in pairs]


def _network(keys: list[Array], payloads: list[Array]) -> tuple[list[Array], list[Array]]:
  """Bitonic sort of the last axis (a power of two long) by distinct lexicographic `keys`."""
  arrays, m = keys + payloads, keys[0].shape[-1]
  size = 2
  while size <= m:
    arrays = _compare_exchange(arrays, len(keys), size // 2, True)
    d = size // 4
    while d >= 1:
      arrays = _compare_exchange(arrays, len(keys), d, False)
      d //= 2
    size *= 2
  return arrays[:len(keys)], arrays[len(keys):]


def _by_rank(keys: list[Array], payloads: list[Array]) -> tuple[list[Array], list[Array]]:
  """Sort the last axis by distinct `keys` through each entry's rank (how many entries are smaller)."""
  n = keys[0].shape[-1]
  grid = keys[0].shape + (n,)
  rows = [k._reshape(k.shape + (1,))._broadcast_to(grid) for k in keys]  # [..., i, j] = k[i]
  cols = [k._reshape(k.shape[:-1] + (1, n))._broadcast_to(grid) for k in keys]  # [..., i, j] = k[j]
  rank = _less(cols, rows).astype(dtypes.int32)._reduce(Ops.ADD, (len(grid) - 1,))  # [..., i, 1]
  slot = Array.from_data(np.arange(n, dtype=np.int32), device=keys[0].device)
  hit = rank._broadcast_to(grid) == slot._broadcast_to(grid)  # [..., i, r]: entry i goes to slot r

  def gather(x: Array) -> Array:
    spread = x._reshape(x.shape + (1,))._broadcast_to(grid)
    picked = hit._alu(Ops.WHERE, spread, Array.const(0, x.dtype, grid))
    out = picked._reduce(Ops.MAX if x.dtype.is_bool else Ops.ADD, (len(grid) - 2,))
    return out._reshape(x.shape)
  return [gather(k) for k in keys], [gather(p) for p in payloads]


def _sort_last(keys: list[Array], payloads: list[Array], descending: bool = False) -> tuple[Array, list[Array]]:
  """Stable sort along the last axis, lexicographic by `keys`: (the original positions in sorted order,
  the sorted `payloads`). All share one shape."""
  shape, device = keys[0].shape, keys[0].device
  n = shape[-1]
  position = Array.from_data(np.arange(n, dtype=np.int32), device=device)._broadcast_to(shape)
  if n <= 1: return position, payloads
  order = [_order_key(k, descending) for k in keys]
  # one 32-bit key and the position pack into one uint64: a single array to sort (where the device has 64-bit
  # integers; else the position is a second 32-bit key)
  packed = len(order) == 1 and order[0].dtype is dtypes.uint32 and has_64bit(device)
  if packed: sort_keys = [(order[0].astype(dtypes.uint64) << 32) | position.astype(dtypes.uint64)]
  else: sort_keys = order + [position.astype(dtypes.uint32)]
  rows = math.prod(shape[:-1])
  if n <= RANK_MAX and (n <= 16 or rows * n * n <= RANK_WORK): sorted_keys, out = _by_rank(sort_keys, payloads)
  else:
    m = 1 << (n - 1).bit_length()
    pad = tuple([(0, 0)] * (len(shape) - 1) + [(0, m - n)])
    # padding sorts last: all-ones keys, and positions n.. keep them distinct
    tail = Array.const(True, dtypes.bool, shape)._pad(pad)
    padded = [tail._alu(Ops.WHERE, k._pad(pad), Array.const(k.dtype.max, k.dtype, shape[:-1] + (m,)))
              for k in sort_keys[:-1]]
    last_pos = Array.from_data(np.arange(m, dtype=np.int32), device=device)._broadcast_to(shape[:-1] + (m,))
    last = sort_keys[-1]._pad(pad)
    last = tail._alu(Ops.WHERE, last, (last_pos.astype(dtypes.uint64) | (0xFFFFFFFF << 32)) if packed
                     else last_pos.astype(dtypes.uint32))
    sorted_keys, out = _network(padded + [last], [p._pad(pad) for p in payloads])
    trim = tuple([(0, s) for s in shape[:-1]] + [(0, n)])
    sorted_keys, out = [k._shrink(trim) for k in sorted_keys], [p._shrink(trim) for p in out]
  pos = sorted_keys[-1]
  pos = (pos & 0xFFFFFFFF).astype(dtypes.int32) if packed else pos.astype(dtypes.int32)
  return pos, out


def sort_multiple(operands: Sequence[Array], axis: int = -1, num_keys: int = 1,
                  descending: bool = False) -> list[Array]:
  """Sort same-shaped `operands` along `axis`, stably and lexicographically by the first `num_keys`; the
  others are permuted alike (lax.sort)."""
  xs = [as_array(x) for x in operands]
  if not xs: raise ValueError("sort: need at least one operand")
  if any(x.shape != xs[0].shape for x in xs):
    raise ValueError(f"sort: operands must share a shape, got {[x.shape for x in xs]}")
  if not 1 <= num_keys <= len(xs): raise ValueError(f"sort: num_keys must be in [1, {len(xs)}], got {num_keys}")
  if xs[0].ndim == 0: raise ValueError("sort: operands must have at least one axis")
  ax = normalize_axis(axis, xs[0].ndim)
  last = [moveaxis(x, ax, -1) for x in xs]
  _, out = _sort_last(last[:num_keys], last, descending)
  return [moveaxis(x, -1, ax) for x in out]


def _flat_or_axis(x: Any, axis: Optional[int]) -> tuple[Array, int]:
  x = as_array(x)
  if axis is None: return x._reshape((x.size,)), 0
  if x.ndim == 0: raise ValueError("sort: a 0-d array has no axis to sort; use axis=None")
  return x, normalize_axis(axis, x.ndim)


def sort(a: Any, axis: Optional[int] = -1, kind: Any = None, order: Any = None, stable: bool = True,
         descending: bool = False) -> Array:
  """The sorted copy of `a` along `axis` (flattened when None); NaN sorts last (first when descending)."""
  if order is not None: raise NotImplementedError("sort: `order` (structured arrays) is not supported")
  x, ax = _flat_or_axis(a, axis)
  return sort_multiple([x], ax, descending=descending)[0]


def argsort(a: Any, axis: Optional[int] = -1, kind: Any = None, order: Any = None, stable: bool = True,
            descending: bool = False) -> Array:
  """int32 indices that sort `a` along `axis`; always stable: equal values keep their order, also when
  `descending` (as JAX)."""
  if order is not None: raise NotImplementedError("argsort: `order` (structured arrays) is not supported")
  x, ax = _flat_or_axis(a, axis)
  pos, _ = _sort_last([moveaxis(x, ax, -1)], [], descending)
  return moveaxis(pos, -1, ax)


def _nan_aware_less(a: Array, b: Array) -> Array:
  """a < b in sort order: NaN after every number."""
  if not a.dtype.is_float: return a < b
  return (a < b) | (~isnan(a) & isnan(b))


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, method: str = "compare_all") -> Array:
  """Insertion points (int32) of `v` into the sorted 1-d `a`: the count of entries before each `v`
  (side='left': a < v; 'right': a <= v), in sort order (NaN last)."""
  from tgfn.ops.reduction import sum as _sum
  if side not in ("left", "right"): raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
  a, v = as_array(a), as_array(v)
  if a.ndim != 1: raise ValueError(f"searchsorted: a must be 1-d, got shape {a.shape}")
  if sorter is not None: a = a[as_array(sorter)]
  a, v = _promote_pair(a, v)
  grid_a = a._reshape((1,) * v.ndim + (a.shape[0],))._broadcast_to(v.shape + a.shape)
  grid_v = v._reshape(v.shape + (1,))._broadcast_to(v.shape + a.shape)
  before = _nan_aware_less(grid_a, grid_v) if side == "left" else ~_nan_aware_less(grid_v, grid_a)
  return _sum(before.astype(dtypes.int32), -1)


def _promote_pair(a: Array, v: Array) -> tuple[Array, Array]:
  from tgfn.dtype import result_type
  dt = result_type(a.dtype, v.dtype)
  return a.astype(dt), v.astype(dt)


_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def quantile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False,
             interpolation: Optional[str] = None) -> Array:
  """The q-th quantiles (q in [0, 1]) along `axis` (flattened when None); NaN if the slice holds a NaN.
  The result has q's axes first, then the remaining axes of `a` (NumPy's layout)."""
  from tgfn.dtype import float_dtype
  method = interpolation or method
  if method not in _METHODS: raise ValueError(f"quantile: method must be one of {_METHODS}, got {method!r}")
  x = as_array(a)
  x = x.astype(float_dtype(x.dtype))
  axes = tuple(range(x.ndim)) if axis is None else tuple(normalize_axis(i, x.ndim) for i in np.atleast_1d(axis))
  keep_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
  rest = [i for i in range(x.ndim) if i not in axes]
  x = x._permute(tuple(rest) + axes)
  n = math.prod(x.shape[len(rest):])
  if n == 0: raise ValueError("quantile: cannot take a quantile of an empty slice")
  x = x._reshape(x.shape[:len(rest)] + (n,))
  s = sort(x, -1)
  qa = as_array(q).astype(x.dtype)
  pos = qa * (n - 1)
  lo = floor(pos)
  frac = pos - lo
  lo_i = lo.astype(dtypes.int32)
  hi_i = lo_i + (frac > 0).astype(dtypes.int32)
  if method == "lower": hi_i = lo_i
  elif method == "higher": lo_i = hi_i
  elif method == "nearest":
    from tgfn.ops.elementwise import rint
    lo_i = hi_i = rint(pos).astype(dtypes.int32)  # ties to even, as NumPy
  below, above = _take_last(s, lo_i), _take_last(s, hi_i)
  t = _broadcast_q(frac, below)
  if method == "midpoint": out = (below + above) * 0.5
  elif method == "linear":
    diff = above - below
    out = where(t >= 0.5, above - diff * (1.0 - t), below + diff * t)
  else: out = below
  has_nan = isnan(_take_last(s, Array.const(n - 1, dtypes.int32, qa.shape)))
  out = where(has_nan, float("nan"), out)
  if keepdims: out = out._reshape(qa.shape + keep_shape)
  return out


def _broadcast_q(values: Array, like: Array) -> Array:
  """q-shaped values broadcast to `like` (q's axes first, then the kept axes)."""
  return values._reshape(values.shape + (1,) * (like.ndim - values.ndim))._broadcast_to(like.shape)


def _take_last(s: Array, idx: Array) -> Array:
  """s[..., idx] with q-shaped `idx`, laid out as q's axes first, then s's leading axes."""
  picked = s[..., idx]
  lead = s.ndim - 1
  return picked._permute(tuple(range(lead, picked.ndim)) + tuple(range(lead)))


def percentile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False,
               interpolation: Optional[str] = None) -> Array:
  return quantile(a, as_array(q) / 100.0, axis, method, keepdims, interpolation)


def median(a: Any, axis: Any = None, keepdims: bool = False) -> Array:
  """The middle value, or the mean of the two middle values (NumPy: inf stays inf)."""
  return quantile(a, 0.5, axis, method="midpoint", keepdims=keepdims)
