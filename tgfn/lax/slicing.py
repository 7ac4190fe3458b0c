"""lax.gather and lax.scatter (and scatter_add / _mul / _min / _max) with XLA's dimension numbers, as
integer-array indexing of every operand axis (the one-hot gather and the scatter of
tgfn/ops/indexing.py, so grad, vmap and jit apply).

Each operand axis d gets a full index array: the slice start along d (from the index vector, 0 where d is
not in start_index_map) plus the window offset along d. Bounds follow JAX's modes: 'clip' clamps each start
so the whole window fits; 'fill' (the default, FILL_OR_DROP) reads `fill_value` for a window whose start
does not fit and drops such an update window entirely; 'promise_in_bounds' is treated as 'clip'.
Batching dims (operand_batching_dims) are not supported. Cost: O(result size * operand size).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.ops.indexing import _default_fill

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "gather", "scatter", "scatter_add",
           "scatter_mul", "scatter_min", "scatter_max", "GatherScatterMode"]


class GatherDimensionNumbers(NamedTuple):
  offset_dims: tuple[int, ...]
  collapsed_slice_dims: tuple[int, ...]
  start_index_map: tuple[int, ...]
  operand_batching_dims: tuple[int, ...] = ()
  start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
  update_window_dims: tuple[int, ...]
  inserted_window_dims: tuple[int, ...]
  scatter_dims_to_operand_dims: tuple[int, ...]
  operand_batching_dims: tuple[int, ...] = ()
  scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode:
  CLIP, FILL_OR_DROP, PROMISE_IN_BOUNDS = "clip", "fill", "promise_in_bounds"


def _mode(mode: Any) -> str:
  name = str(getattr(mode, "name", mode)).lower() if mode is not None else "fill"
  name = {"fill_or_drop": "fill", "drop": "fill", "promise_in_bounds": "clip"}.get(name, name)
  if name not in ("clip", "fill"): raise ValueError(f"gather/scatter: mode must be 'clip', 'fill' or "
                                                    f"'promise_in_bounds', got {mode!r}")
  return name


def _no_batching(dn: Any) -> None:
  if dn[3] or dn[4]: raise NotImplementedError("gather/scatter: batching dims are not supported")


def _window_indices(operand_shape: tuple[int, ...], starts: Array, index_map: Sequence[int],
                    window: dict[int, int], batch_ndim: int, clip: bool) -> tuple[list[Array], Array]:
  """Per operand axis, the index array over (batch..., window axes in operand order), and whether each
  batch element's window fits. `window` maps each non-collapsed operand axis to its window size."""
  starts = starts.astype(dtypes.int32) if starts.dtype.bits < 32 else starts
  window_axes = sorted(window)
  shape_tail = [window[d] for d in window_axes]
  fits = Array.const(True, dtypes.bool, starts.shape[:-1])
  out = []
  for d, n in enumerate(operand_shape):
    size = window.get(d, 1)
    if d in index_map:
      s = starts[..., list(index_map).index(d)]
      fits = fits & (s >= 0) & (s <= n - size)
      if clip: s = tnp.clip(s, 0, max(n - size, 0))
    else: s = Array.const(0, starts.dtype, starts.shape[:-1])
    s = s._reshape(s.shape + (1,) * len(window_axes))
    if d in window:
      k = window_axes.index(d)
      column = [1] * len(window_axes)
      column[k] = window[d]
      offset = tnp.arange(window[d], dtype=starts.dtype)._reshape(tuple([1] * batch_ndim + column))
      s = s + offset
    out.append(s._broadcast_to(tuple(starts.shape[:-1]) + tuple(shape_tail)))
  return out, fits


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, indices_are_sorted: bool = False, unique_indices: bool = False,
           mode: Any = None, fill_value: Any = None) -> Array:
  x, idx = as_array(operand), as_array(start_indices)
  dn = dimension_numbers
  _no_batching(dn)
  m = _mode(mode)
  if len(slice_sizes) != x.ndim:
    raise ValueError(f"gather: need one slice size per operand axis ({x.ndim}), got {slice_sizes}")
  if idx.shape[-1] != len(dn.start_index_map):
    raise ValueError(f"gather: the index vector (last axis, {idx.shape[-1]}) must match start_index_map "
                     f"{dn.start_index_map}")
  for d in dn.collapsed_slice_dims:
    if slice_sizes[d] != 1: raise ValueError(f"gather: collapsed axis {d} must have slice size 1, got {slice_sizes[d]}")
  window = {d: s for d, s in enumerate(slice_sizes) if d not in dn.collapsed_slice_dims}
  batch_ndim = idx.ndim - 1
  index_arrays, fits = _window_indices(x.shape, idx, dn.start_index_map, window, batch_ndim, clip=True)
  out = x[tuple(index_arrays)] if x.ndim else x  # (batch..., window...)
  if m == "fill":
    fill = _default_fill(x.dtype) if fill_value is None else fill_value
    ok = fits._reshape(fits.shape + (1,) * len(window))._broadcast_to(out.shape)
    out = tnp.where(ok, out, Array.const(fill, x.dtype, out.shape))
  # the window axes go to offset_dims, the batch axes fill the other positions in order
  rank = batch_ndim + len(window)
  if len(dn.offset_dims) != len(window):
    raise ValueError(f"gather: offset_dims {dn.offset_dims} must name {len(window)} result axes")
  batch_positions = [p for p in range(rank) if p not in dn.offset_dims]
  order = [0] * rank
  for k, p in enumerate(batch_positions): order[p] = k
  for k, p in enumerate(dn.offset_dims): order[p] = batch_ndim + k
  return tnp.transpose(out, order)


def _scatter(kind: str, operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers,
             mode: Any) -> Array:
  x, idx, u = as_array(operand), as_array(scatter_indices), as_array(updates)
  dn = dimension_numbers
  _no_batching(dn)
  m = _mode(mode)
  window_operand_axes = [d for d in range(x.ndim) if d not in dn.inserted_window_dims]
  if len(window_operand_axes) != len(dn.update_window_dims):
    raise ValueError(f"scatter: update_window_dims {dn.update_window_dims} must name one updates axis per operand "
                     f"axis not in inserted_window_dims {dn.inserted_window_dims}")
  window = {d: u.shape[w] for d, w in zip(window_operand_axes, dn.update_window_dims)}
  scatter_axes = [a for a in range(u.ndim) if a not in dn.update_window_dims]
  u = tnp.transpose(u, scatter_axes + list(dn.update_window_dims))  # (batch..., window...)
  batch_ndim = len(scatter_axes)
  if idx.shape[:-1] != u.shape[:batch_ndim]:
    raise ValueError(f"scatter: indices batch shape {idx.shape[:-1]} must match the updates' {u.shape[:batch_ndim]}")
  index_arrays, fits = _window_indices(x.shape, idx, dn.scatter_dims_to_operand_dims, window, batch_ndim,
                                       clip=m == "clip")
  if m == "fill":  # a window that does not fit is dropped whole: send every index of it out of range
    drop = ~fits._reshape(fits.shape + (1,) * len(window))._broadcast_to(index_arrays[0].shape)
    index_arrays = [tnp.where(drop, n, i) for i, n in zip(index_arrays, x.shape)]
  ref = x.at[tuple(index_arrays)]
  method = {"set": ref.set, "add": ref.add, "mul": ref.multiply, "min": ref.min, "max": ref.max}[kind]
  return method(u, mode="drop")


def scatter(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
            indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
  return _scatter("set", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_add(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
  return _scatter("add", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_mul(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
  return _scatter("mul", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_min(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
  return _scatter("min", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_max(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
  return _scatter("max", operand, scatter_indices, updates, dimension_numbers, mode)

