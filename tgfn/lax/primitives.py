"""`tgfn.lax`: JAX's lax primitives, each composed from tgfn.numpy and the primitive layer (no new IR
ops), so grad, vmap and jit apply to them by composition.

Elementwise aliases take arrays of one dtype as lax does (no implicit promotion is checked here: they
call the tgfn.numpy function, which promotes). Dynamic slices accept traced start indices and clamp them
so the slice fits, as JAX does; they read with a one-hot gather along each sliced axis.
"""
from __future__ import annotations

import inspect

import builtins as _builtins
from typing import Any, Optional, Sequence

import numpy as np

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.dtype import dtypes, to_dtype
from tgfn.ops.reduction import _iota_along
from tgfn.ops.reduction_extra import _cumulative
from tgfn.ops.sorting import sort_multiple
from tgfn.transforms.api import stop_gradient  # noqa: F401
from tgfn.uop.ops import Ops, UOp

# ---- elementwise aliases (lax names for tgfn.numpy functions)
add, sub, mul, div, rem, neg = tnp.add, tnp.subtract, tnp.multiply, tnp.divide, tnp.mod, tnp.negative
max, min, abs, sign, pow = tnp.maximum, tnp.minimum, tnp.abs, tnp.sign, tnp.power
exp, exp2, log, log1p, expm1, sqrt, rsqrt, cbrt = tnp.exp, tnp.exp2, tnp.log, tnp.log1p, tnp.expm1, tnp.sqrt, \
  tnp.rsqrt, tnp.cbrt
sin, cos, tan, tanh, sinh, cosh = tnp.sin, tnp.cos, tnp.tan, tnp.tanh, tnp.sinh, tnp.cosh
asin, acos, atan, atan2, asinh, acosh, atanh = tnp.arcsin, tnp.arccos, tnp.arctan, tnp.arctan2, tnp.arcsinh, \
  tnp.arccosh, tnp.arctanh
floor, ceil, round, is_finite = tnp.floor, tnp.ceil, tnp.round, tnp.isfinite
eq, ne, lt, le, gt, ge = tnp.equal, tnp.not_equal, tnp.less, tnp.less_equal, tnp.greater, tnp.greater_equal
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = tnp.bitwise_and, tnp.bitwise_or, tnp.bitwise_xor, tnp.invert
shift_left, shift_right_arithmetic = tnp.left_shift, tnp.right_shift
square, reciprocal = tnp.square, tnp.reciprocal
integer_pow = tnp.power


def logistic(x: Any) -> Array:
  """1 / (1 + exp(-x)), without overflow for large |x|."""
  x = as_array(x)
  e = tnp.exp(-tnp.abs(x))
  return tnp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def shift_right_logical(x: Any, y: Any) -> Array:
  """Shift right filling with zeros, also for signed integers (through the unsigned type of the width)."""
  x = as_array(x)
  if x.dtype.is_unsigned: return tnp.right_shift(x, y)
  word = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}[x.dtype.bits]
  u = Array(UOp(Ops.BITCAST, word, (x.uop,)))
  out = tnp.right_shift(u, as_array(y).astype(word))
  return Array(UOp(Ops.BITCAST, x.dtype, (out.uop,)))


def select(pred: Any, on_true: Any, on_false: Any) -> Array:
  """on_true where pred, else on_false; pred must be bool and the branches must share shape and dtype."""
  pred, a, b = as_array(pred), as_array(on_true), as_array(on_false)
  if not pred.dtype.is_bool: raise TypeError(f"select: pred must be bool, got {pred.dtype.name}")
  if a.shape != b.shape or a.dtype != b.dtype:
    raise TypeError(f"select: branches must match, got {a.dtype.name}{list(a.shape)} and {b.dtype.name}{list(b.shape)}")
  if pred.shape not in ((), a.shape): raise TypeError(f"select: pred shape {pred.shape} must be () or {a.shape}")
  return tnp.where(pred, a, b)


def clamp(min: Any, x: Any, max: Any) -> Array:  # noqa: A002  (lax's argument order)
  return tnp.minimum(tnp.maximum(x, min), max)


def convert_element_type(operand: Any, new_dtype: Any) -> Array: return as_array(operand).astype(new_dtype)


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Array:
  """Reinterpret the bits. Same width: same shape; to a narrower type: a new last axis of the ratio;
  from a narrower type: the last axis (of the ratio) is consumed. Little-endian, as on every CPU."""
  x, dt = as_array(operand), to_dtype(new_dtype)
  if x.dtype.bits == dt.bits or x.dtype.is_bool or dt.is_bool:
    if x.dtype.is_bool or dt.is_bool:
      if x.dtype != dt: raise TypeError("bitcast_convert_type: bool can only be bitcast to bool")
      return x
    return Array(UOp(Ops.BITCAST, dt, (x.uop,)))
  if x.dtype.bits > dt.bits:  # split each value into ratio narrower ones, low bits first
    ratio = x.dtype.bits // dt.bits
    word = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}
    u = Array(UOp(Ops.BITCAST, word[x.dtype.bits], (x.uop,)))
    parts = [(tnp.right_shift(u, k * dt.bits) & ((1 << dt.bits) - 1)).astype(word[dt.bits]) for k in range(ratio)]
    return bitcast_convert_type(tnp.stack(parts, axis=-1), dt)
  ratio = dt.bits // x.dtype.bits
  if not x.shape or x.shape[-1] != ratio:
    raise ValueError(f"bitcast_convert_type: {x.dtype.name} to {dt.name} needs a last axis of size {ratio}, "
                     f"got shape {x.shape}")
  word = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}
  u = Array(UOp(Ops.BITCAST, word[x.dtype.bits], (x.uop,))).astype(word[dt.bits])
  total = None
  for k in range(ratio):
    part = tnp.left_shift(u[..., k], k * x.dtype.bits)
    total = part if total is None else total | part
  assert total is not None
  return Array(UOp(Ops.BITCAST, dt, (total.uop,)))


def iota(dtype: Any, size: int, dimension: int = 0, sharding: Any = None) -> Array:
  return tnp.arange(size, dtype=dtype)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Array:
  return _iota_along(tuple(shape), dimension).astype(dtype)


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Array:
  """Place operand axis i at result axis broadcast_dimensions[i], then broadcast to `shape`."""
  x = as_array(operand)
  shape = tuple(shape)
  if len(broadcast_dimensions) != x.ndim:
    raise ValueError(f"broadcast_in_dim: need one broadcast dimension per operand axis ({x.ndim}), got "
                     f"{tuple(broadcast_dimensions)}")
  if list(broadcast_dimensions) != sorted(broadcast_dimensions):
    raise ValueError(f"broadcast_in_dim: broadcast_dimensions must be increasing, got {tuple(broadcast_dimensions)}")
  column = [1] * len(shape)
  for i, d in enumerate(broadcast_dimensions):
    if x.shape[i] not in (1, shape[d]):
      raise ValueError(f"broadcast_in_dim: operand axis {i} of size {x.shape[i]} cannot become axis {d} "
                       f"of size {shape[d]}")
    column[d] = x.shape[i]
  return x._reshape(tuple(column))._broadcast_to(shape)


def broadcast(operand: Any, sizes: Sequence[int]) -> Array:
  x = as_array(operand)
  return x._broadcast_to(tuple(sizes) + x.shape)


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Optional[Sequence[int]] = None) -> Array:
  x = as_array(operand)
  if dimensions is not None: x = tnp.transpose(x, dimensions)
  return tnp.reshape(x, tuple(new_sizes))


def transpose(operand: Any, permutation: Sequence[int]) -> Array: return tnp.transpose(operand, permutation)
def rev(operand: Any, dimensions: Sequence[int]) -> Array: return tnp.flip(operand, tuple(dimensions))
def squeeze(array: Any, dimensions: Sequence[int]) -> Array: return tnp.squeeze(array, tuple(dimensions))
def expand_dims(array: Any, dimensions: Sequence[int]) -> Array: return tnp.expand_dims(array, tuple(dimensions))
def concatenate(operands: Sequence[Any], dimension: int) -> Array: return tnp.concatenate(operands, dimension)


def _interior(x: Array, axis: int, k: int) -> Array:
  """Insert k zeros between neighbours along `axis`."""
  n = x.shape[axis]
  if k == 0 or n <= 1: return x
  moved = tnp.moveaxis(x, axis, -1)
  spread = moved._reshape(moved.shape + (1,))._pad(tuple([(0, 0)] * moved.ndim + [(0, k)]))
  flat = spread._reshape(moved.shape[:-1] + (n * (k + 1),))
  flat = flat._shrink(tuple([(0, s) for s in moved.shape[:-1]] + [(0, n + (n - 1) * k)]))
  return tnp.moveaxis(flat, -1, axis)


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Array:
  """(low, high, interior) per axis: interior values between elements, then low/high at the ends; a
  negative low/high removes elements."""
  x = as_array(operand)
  if len(padding_config) != x.ndim:
    raise ValueError(f"pad: need one (low, high, interior) per axis ({x.ndim}), got {len(padding_config)}")
  value = as_array(padding_value).astype(x.dtype)
  mask = Array.const(True, dtypes.bool, x.shape)
  for axis, (lo, hi, interior) in enumerate(padding_config):
    if interior < 0: raise ValueError(f"pad: interior padding must be non-negative, got {interior}")
    x, mask = _interior(x, axis, interior), _interior(mask, axis, interior)
  widths = tuple((_builtins.max(lo, 0), _builtins.max(hi, 0)) for lo, hi, _ in padding_config)
  x, mask = x._pad(widths), mask._pad(widths)
  bounds = tuple((-_builtins.min(lo, 0), n + _builtins.min(hi, 0)) for (lo, hi, _), n in zip(padding_config, x.shape))
  if any(b < a for a, b in bounds): raise ValueError("pad: negative padding removes more than the axis holds")
  x, mask = x._shrink(bounds), mask._shrink(bounds)
  return tnp.where(mask, x, value._broadcast_to(x.shape) if value.ndim == 0 else value)



# ---- reductions
def _monoid(computation: Any, init: Any) -> str:
  named = {add: "add", tnp.add: "add", mul: "mul", max: "max", min: "min", tnp.max: "max", tnp.min: "min",
           tnp.logical_or: "or", tnp.logical_and: "and", bitwise_or: "or", bitwise_and: "and"}
  if callable(computation): computation = inspect.unwrap(computation)  # tgfn.lax's exports wrap these (errors name the user's line)
  if computation in named: return named[computation]
  if isinstance(computation, str) and computation in ("add", "mul", "max", "min"): return computation
  raise NotImplementedError(f"reduce: only the monoids add, mul, max, min (lax.add, lax.mul, lax.max, lax.min) "
                            f"are supported, got {computation!r}")


def _reduce_by(x: Array, kind: str, axes: tuple[int, ...]) -> Array:
  if kind == "add": return tnp.sum(x, axes, dtype=x.dtype)
  if kind == "mul": return tnp.prod(x, axes, dtype=x.dtype)
  if kind in ("max", "or"): return tnp.max(x, axes) if axes else x
  return tnp.min(x, axes) if axes else x


def reduce(operands: Any, init_values: Any, computation: Any, dimensions: Sequence[int]) -> Any:
  """Reduce over `dimensions` with a standard monoid; the init value is combined once (lax's identity)."""
  if isinstance(operands, (tuple, list)):
    return type(operands)(reduce(o, i, computation, dimensions) for o, i in zip(operands, init_values))
  x = as_array(operands)
  kind = _monoid(computation, init_values)
  out = _reduce_by(x, kind, tuple(dimensions))
  init = as_array(init_values).astype(x.dtype)
  combine = {"add": tnp.add, "mul": tnp.multiply, "max": tnp.maximum, "min": tnp.minimum, "or": tnp.logical_or,
             "and": tnp.logical_and}[kind]
  return combine(out, init).astype(x.dtype)


def reduce_sum(x: Any, axes: Sequence[int]) -> Array: return tnp.sum(x, tuple(axes), dtype=as_array(x).dtype)
def reduce_prod(x: Any, axes: Sequence[int]) -> Array: return tnp.prod(x, tuple(axes), dtype=as_array(x).dtype)
def reduce_max(x: Any, axes: Sequence[int]) -> Array: return tnp.max(x, tuple(axes))
def reduce_min(x: Any, axes: Sequence[int]) -> Array: return tnp.min(x, tuple(axes))
def argmax(x: Any, axis: int, index_dtype: Any) -> Array: return tnp.argmax(x, axis).astype(index_dtype)
def argmin(x: Any, axis: int, index_dtype: Any) -> Array: return tnp.argmin(x, axis).astype(index_dtype)


# ---- cumulative
def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
  x = as_array(operand)
  return _cumulative(x, axis, Ops.ADD, 0, reverse)


def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
  x = as_array(operand)
  return _cumulative(x, axis, Ops.MUL, 1, reverse)


def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
  return tnp.cummax(operand, axis, reverse=reverse)


def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
  return tnp.cummin(operand, axis, reverse=reverse)


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
  x = as_array(operand)
  top = tnp.max(x, axis, keepdims=True)
  top = tnp.where(tnp.isfinite(top), top, 0.0)
  return tnp.log(cumsum(tnp.exp(x - top), axis, reverse)) + top


# ---- sorting
def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
  """Sort one array, or a sequence of same-shaped arrays ordered by the first `num_keys` (the rest move
  with them). Always stable."""
  if isinstance(operand, (tuple, list)): return type(operand)(sort_multiple(list(operand), dimension, num_keys))
  return sort_multiple([operand], dimension)[0]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Array, Array]:
  k, v = sort_multiple([keys, values], dimension)
  return k, v


def top_k(operand: Any, k: int) -> tuple[Array, Array]:
  """The k largest entries along the last axis, largest first (ties: lower index first), and their int32
  indices."""
  x = as_array(operand)
  if not 0 <= k <= (x.shape[-1] if x.ndim else 0): raise ValueError(f"top_k: k={k} out of range for shape {x.shape}")
  order = tnp.argsort(x, axis=-1, descending=True)[..., :k]
  return tnp.take_along_axis(x, order, -1), order


# ---- dot_general
def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Array:
  """Contract lhs_contracting with rhs_contracting, batch over the batch axes: the result has the batch
  axes, then lhs's free axes, then rhs's free axes (lax's layout)."""
  (lc, rc), (lb, rb) = dimension_numbers
  a, b = as_array(lhs), as_array(rhs)
  if len(lc) != len(rc) or len(lb) != len(rb):
    raise ValueError(f"dot_general: contracting and batch dimensions must pair up, got {dimension_numbers}")
  letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
  sa, sb = [""] * a.ndim, [""] * b.ndim
  batch = []
  for i, j in zip(lb, rb):
    sa[i] = sb[j] = next(letters)
    batch.append(sa[i])
  for i, j in zip(lc, rc):
    if a.shape[i] != b.shape[j]:
      raise ValueError(f"dot_general: contracting axes {i} and {j} differ in size: {a.shape[i]} vs {b.shape[j]}")
    sa[i] = sb[j] = next(letters)
  free_a = [next(letters) if not s else None for s in sa]
  free_b = [next(letters) if not s else None for s in sb]
  sa = [s or f for s, f in zip(sa, free_a)]
  sb = [s or f for s, f in zip(sb, free_b)]
  out = "".join(batch) + "".join(f for f in free_a if f) + "".join(f for f in free_b if f)
  result = tnp.einsum(f"{''.join(sa)},{''.join(sb)}->{out}", a, b)
  return result if preferred_element_type is None else result.astype(preferred_element_type)


def dot(lhs: Any, rhs: Any, precision: Any = None, preferred_element_type: Any = None) -> Array:
  out = tnp.dot(lhs, rhs)
  return out if preferred_element_type is None else out.astype(preferred_element_type)


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Array: return tnp.matmul(lhs, rhs)


# ---- dynamic slicing: traced starts, clamped so the slice fits
def _start(index: Any, n: int, size: int) -> Any:
  """A static int start clamped into [0, n - size], or a traced int32 one."""
  if isinstance(index, (int, np.integer)): return _builtins.max(0, _builtins.min(int(index), n - size))
  i = as_array(index)
  if i.ndim: raise TypeError(f"dynamic_slice: start indices must be scalars, got shape {i.shape}")
  if not i.dtype.is_int: raise TypeError(f"dynamic_slice: start indices must be integers, got {i.dtype.name}")
  return tnp.clip(i.astype(dtypes.int64 if i.dtype.bits == 64 else dtypes.int32), 0, n - size)


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Array:
  x = as_array(operand)
  if len(start_indices) != x.ndim or len(slice_sizes) != x.ndim:
    raise ValueError(f"dynamic_slice: need one start and size per axis ({x.ndim}), got {len(start_indices)} "
                     f"and {len(slice_sizes)}")
  for axis, (index, size) in enumerate(zip(start_indices, slice_sizes)):
    n = x.shape[axis]
    if not 0 <= size <= n:
      raise ValueError(f"dynamic_slice: slice size {size} out of range for axis {axis} of size {n}")
    s = _start(index, n, size)
    if isinstance(s, int):
      x = x._shrink(tuple((s, s + size) if a == axis else (0, m) for a, m in enumerate(x.shape)))
    else:
      positions = tnp.arange(size, dtype=s.dtype) + s
      x = x.at[(_builtins.slice(None),) * axis + (positions,)].get(mode="clip")
  return x


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Array:
  """operand with `update` written at the (clamped) start; everything else unchanged."""
  x, u = as_array(operand), as_array(update).astype(as_array(operand).dtype)
  if u.ndim != x.ndim or len(start_indices) != x.ndim:
    raise ValueError(f"dynamic_update_slice: update {u.shape} and starts must match operand rank {x.ndim}")
  inside = Array.const(True, dtypes.bool, x.shape)
  for axis, (index, size, n) in enumerate(zip(start_indices, u.shape, x.shape)):
    if size > n: raise ValueError(f"dynamic_update_slice: update axis {axis} ({size}) exceeds the operand's ({n})")
    s = _start(index, n, size)
    if isinstance(s, int):
      u = u._pad(tuple((s, n - s - size) if a == axis else (0, 0) for a in range(u.ndim)))
      column = tuple(n if a == axis else 1 for a in range(x.ndim))
      hit = Array.from_data(((np.arange(n) >= s) & (np.arange(n) < s + size)).reshape(column), device=x.device)
    else:
      offset = tnp.arange(n, dtype=s.dtype) - s
      if size: u = u.at[(_builtins.slice(None),) * axis + (tnp.clip(offset, 0, size - 1),)].get(mode="clip")
      else: u = u._pad(tuple((0, n) if a == axis else (0, 0) for a in range(u.ndim)))
      column = tuple(n if a == axis else 1 for a in range(x.ndim))
      hit = ((offset >= 0) & (offset < size))._reshape(column)
    inside = inside & hit._broadcast_to(x.shape)
  return tnp.where(inside, u, x)


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0) -> Array:
  x = as_array(operand)
  axis %= x.ndim
  starts = [0] * x.ndim
  starts[axis] = start_index
  return dynamic_slice(x, starts, [slice_size if a == axis else n for a, n in enumerate(x.shape)])


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Array:
  out = dynamic_slice_in_dim(operand, index, 1, axis)
  return out if keepdims else tnp.squeeze(out, axis)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int) -> Array:
  x = as_array(operand)
  axis %= x.ndim
  starts: list[Any] = [0] * x.ndim
  starts[axis] = start_index
  return dynamic_update_slice(x, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Array:
  u = as_array(update)
  if u.ndim == as_array(operand).ndim - 1: u = tnp.expand_dims(u, axis)
  return dynamic_update_slice_in_dim(operand, u, index, axis)


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Optional[Sequence[int]] = None) -> Array:
  x = as_array(operand)
  steps = strides or [1] * x.ndim
  return x[tuple(_builtins.slice(s, e, k) for s, e, k in zip(start_indices, limit_indices, steps))]


def slice_in_dim(operand: Any, start_index: Optional[int], limit_index: Optional[int], stride: int = 1,
                 axis: int = 0) -> Array:
  x = as_array(operand)
  axis %= x.ndim
  return x[(_builtins.slice(None),) * axis + (_builtins.slice(start_index, limit_index, stride),)]


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Array:
  out = slice_in_dim(operand, index, index + 1 if index != -1 else None, 1, axis)
  return out if keepdims else tnp.squeeze(out, axis)



# every public lax name defined above (not the modules and helpers this file imports)
__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and n not in
           {"annotations", "np", "tnp", "Array", "as_array", "dtypes", "to_dtype", "Any", "Optional", "Sequence",
            "Ops", "UOp", "sort_multiple"}]
