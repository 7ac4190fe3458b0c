"""NumPy-style indexing `x[idx]` and JAX-style functional updates `x.at[idx].set(v)` and friends.

Index forms (NumPy semantics):
  - ints (negative count from the end), slices with any start/stop/step (negative steps too),
    `None` (a new axis of size 1), one `...` (as many full slices as needed);
  - integer arrays (tgfn Arrays, NumPy arrays, lists): all of them, and every int in the same index,
    broadcast together to the shape B. The B axes replace the indexed axes: in place when the advanced
    indices are adjacent in the index tuple (anything between them, even a `...` that expands to no
    axes, separates them), else in front of the result;
  - boolean masks whose values are concrete (NumPy data, or a tgfn Array, realized to read its values:
    a host sync; inside jit or vmap that raises ConcretizationError) act as the integer arrays of
    `np.nonzero(mask)`.
    A scalar bool adds an axis of size 1 (True) or 0 (False) indexed by an integer array.

Bounds:
  - a static Python int out of range raises IndexError: it is known when the index is built;
  - integer-ARRAY values follow JAX: negative values wrap once (add the axis size), then out-of-range
    values are CLAMPED to the axis on read and their updates DROPPED on write. `.get(mode=...)` and
    the update methods take `mode`: None (the default above), 'clip' (clamp, on writes too), 'fill' or
    'drop' (reads of out-of-range positions give `fill_value`; writes are dropped), 'promise_in_bounds'
    (the indices are not clamped one by one: an out-of-range read gives some element of x, never
    memory outside it; writes are dropped as by default).
    Clamping into an axis of size 0 is impossible and raises IndexError.
  - `take` and `take_along_axis` follow JAX's defaults instead: mode 'fill' (after wrapping once).

Updates (`x.at[idx].op(v, mode=None)`, each returning a new Array): `v` is cast to x's dtype and
broadcast to the shape of `x[idx]`. With repeated positions, add/multiply/min/max accumulate every
update (for bool, add is OR and multiply is AND); set takes the LAST update in the row-major order of
the indexed shape (JAX leaves it unspecified; NumPy's `x[idx] = v` happens to agree). divide and power
follow JAX: `x / ones.at[idx].multiply(v)` and `x ** ones.at[idx].multiply(v)`, so an int x gives a
float result for divide.

Implementation (no host round trip for traced values):
  - basic indexing is movement ops: SHRINK for slices and ints, FLIP for negative steps, strides as
    PAD to a multiple of the step, RESHAPE to (n / step, step), SHRINK the second axis to [0, 1);
  - integer-array reads are one GATHER (the data-dependent read primitive, which clamps each index
    into its axis in the kernel): the index arrays are wrapped, combined into one linear index L over
    the indexed axes (each clamped into its own axis first when there are several), and x, viewed as
    (kept axes..., N indexed positions), is read at L. O(x[idx].size) work, one fused kernel;
  - updates through a purely basic index run the movement ops backwards (PAD for SHRINK and so on),
    one elementwise kernel. Updates through an integer-array index gather the flat positions
    `arange(x.size)[idx]` (-1 where dropped) and reduce a one-hot match of x's positions against
    them: O(x.size * v.size) work, fine for the moderate sizes indexed updates are used with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from tgfn.array import Array, as_array, broadcast_shapes, holds_arrays
from tgfn.dtype import DType, dtypes
from tgfn.ops import elementwise as el
from tgfn.ops import reduction as red
from tgfn.ops.axes import normalize_axis
from tgfn.uop.ops import Ops
from tgfn.viz.locations import at_user_line

__all__ = ["take", "take_along_axis"]

_MODES = (None, "clip", "fill", "drop", "promise_in_bounds")


# ---- parsing the index into movement steps plus advanced (integer-array) indices
@dataclass(frozen=True)
class _Advanced:
  axis: int      # the axis it indexes, in the array after the basic steps
  index: Array   # int32 values, not yet wrapped or bounds-checked
  item: int      # position in the user's index tuple (masks give several indices with one position)


@dataclass(frozen=True)
class _Plan:
  steps: tuple[tuple[Ops, Any, tuple[int, ...]], ...]  # (op, arg, input shape) movement steps
  advanced: tuple[_Advanced, ...]

  @property
  def adjacent(self) -> bool:
    items = sorted({a.item for a in self.advanced})
    return items == list(range(items[0], items[-1] + 1))


_VALID = "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean arrays are valid indices"


def _static_int(value: Any) -> Optional[int]:
  if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)): return int(value)
  return None


def _host_mask(mask: Array) -> np.ndarray:
  """The mask's values: its number of True values sets the result's shape. Inside jit or vmap the mask
  is abstract and this raises ConcretizationError."""
  return mask.numpy("a boolean mask index (its number of True values sets the result's shape)")


def _classify(item: Any) -> tuple[str, Any]:
  """One user index item -> (kind, value): 'new', 'ellipsis', 'slice', 'int', 'bool0' (a scalar bool),
  'mask' (an N-d NumPy bool array) or 'array' (an int tgfn Array or NumPy array)."""
  if item is None: return "new", None
  if item is Ellipsis: return "ellipsis", None
  if isinstance(item, slice):
    for part in (item.start, item.stop, item.step):
      if part is not None and _static_int(part) is None:
        hint = "; an Array cannot set a shape, read it with int(...) first" if isinstance(part, Array) else ""
        raise IndexError(f"slice bounds must be static ints or None, got {part!r} in {item!r}{hint}")
    return "slice", item
  if isinstance(item, (bool, np.bool_)): return "bool0", bool(item)
  if (i := _static_int(item)) is not None: return "int", i
  if isinstance(item, Array):
    if item.dtype.is_bool: return _classify(_host_mask(item))
    if not item.dtype.is_int:
      raise IndexError(f"arrays used as indices must be of integer or boolean type, got {item.dtype.name}{at_user_line()}")
    return "array", item
  if holds_arrays(item): return _classify(as_array(item))  # built in the graph: traced elements stay traced
  if isinstance(item, (np.ndarray, list, tuple, range)):
    host = np.asarray(item)
    if host.size == 0 and host.dtype.kind == "f": host = host.astype(np.int32)  # `[]` means no indices
    if host.dtype.kind == "b": return ("bool0", bool(host)) if host.ndim == 0 else ("mask", host)
    if host.dtype.kind not in "iu":
      raise IndexError(f"arrays used as indices must be of integer or boolean type, got {host.dtype} "
                       f"from {item!r}{at_user_line()}")
    return ("int", int(host)) if host.ndim == 0 else ("array", host)
  raise IndexError(f"{_VALID}; got {type(item).__name__} {item!r}")


class _Builder:
  """Applies movement steps to an array, recording them so they can be replayed or inverted."""

  def __init__(self, x: Array):
    self.y = x
    self.steps: list[tuple[Ops, Any, tuple[int, ...]]] = []

  def apply(self, method: Callable[..., Array], arg: Any) -> None:
    before = self.y
    self.y = method(before, arg)
    if self.y is not before: self.steps.append((self.y.uop.op, self.y.uop.arg, before.shape))

  def take(self, axis: int, start: int) -> None:
    """Keep index `start` of `axis` and drop the axis."""
    shape = self.y.shape
    self.apply(Array._shrink, tuple((start, start + 1) if a == axis else (0, n) for a, n in enumerate(shape)))
    self.apply(Array._reshape, shape[:axis] + shape[axis + 1:])

  def new_axis(self, axis: int) -> None:
    shape = self.y.shape
    self.apply(Array._reshape, shape[:axis] + (1,) + shape[axis:])

  def slice(self, axis: int, s: slice) -> None:
    shape = self.y.shape
    n = shape[axis]
    start, stop, step = s.indices(n)
    length = len(range(start, stop, step))
    bounds = lambda lo, hi: tuple((lo, hi) if a == axis else (0, m) for a, m in enumerate(self.y.shape))
    if length == 0: return self.apply(Array._shrink, bounds(0, 0))
    if step < 0:  # element i is start + i*step; counted from the end, that is (n-1-start) + i*|step|
      self.apply(Array._flip, (axis,))
      start, step = n - 1 - start, -step
    self.apply(Array._shrink, bounds(start, start + (length - 1) * step + 1))
    if step == 1 or length == 1: return
    # stride: pad to length*step, view as (length, step), keep column 0
    self.apply(Array._pad, tuple((0, step - 1) if a == axis else (0, 0) for a in range(len(shape))))
    self.apply(Array._reshape, shape[:axis] + (length, step) + shape[axis + 1:])
    self.apply(Array._shrink, tuple((0, 1) if a == axis + 1 else (0, m) for a, m in enumerate(self.y.shape)))
    self.apply(Array._reshape, shape[:axis] + (length,) + shape[axis + 1:])


def _index_array(value: Any, n: int, device: str) -> Array:
  """An index array as int32 with the same wrap/bounds behaviour as `value` on an axis of size `n`."""
  # clipping to [-n-1, n] first keeps every value's meaning: out-of-range values stay out of range
  if isinstance(value, np.ndarray):
    return Array.from_data(np.clip(value, -n - 1, n).astype(np.int32), device=device)
  if value.dtype in (dtypes.int64, dtypes.uint32, dtypes.uint64):
    value = el.clip(value, None if value.dtype.is_unsigned else -n - 1, n)
  return value.astype(dtypes.int32)


def _axes_used(kind: str, value: Any) -> int:
  return 1 if kind in ("int", "slice", "array") else value.ndim if kind == "mask" else 0


def _parse(x: Array, idx: Any) -> tuple[Array, _Plan]:
  """Apply the basic part of `idx` to `x`; return the result and the plan (steps + advanced indices)."""
  items = idx if isinstance(idx, tuple) else (idx,)
  entries = [(*_classify(item), pos) for pos, item in enumerate(items)]
  if sum(kind == "ellipsis" for kind, _, _ in entries) > 1:
    raise IndexError("an index can only have a single ellipsis ('...')")
  used = sum(_axes_used(kind, value) for kind, value, _ in entries)
  if used > x.ndim:
    raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed{at_user_line()}")
  at = next((i for i, (kind, _, _) in enumerate(entries) if kind == "ellipsis"), None)
  if at is None: entries += [("slice", slice(None), len(items))] * (x.ndim - used)
  else: entries[at:at + 1] = [("slice", slice(None), at)] * (x.ndim - used)
  has_advanced = any(kind in ("array", "mask", "bool0") for kind, _, _ in entries)

  build = _Builder(x)
  advanced: list[_Advanced] = []
  axis = x_axis = 0  # the axis of build.y the next entry indexes, and the axis of x
  for kind, value, pos in entries:
    n = build.y.shape[axis] if axis < build.y.ndim else 0
    if kind == "new": build.new_axis(axis)
    elif kind == "slice": build.slice(axis, value)
    elif kind == "int":
      if not -n <= value < n:
        raise IndexError(f"index {value} is out of bounds for axis {x_axis} with size {n}{at_user_line()}")
      if has_advanced:  # with array indices present, ints are 0-d index arrays (NumPy's rule)
        advanced.append(_Advanced(axis, _index_array(np.array(value % n), n, x.device), pos))
      else: build.take(axis, value % n)
    elif kind == "bool0":  # a new axis of size 1, indexed by [0] (True) or by no index at all (False)
      build.new_axis(axis)
      advanced.append(_Advanced(axis, _index_array(np.zeros(int(value), np.int32), 1, x.device), pos))
    elif kind == "mask":
      have = build.y.shape[axis:axis + value.ndim]
      if have != value.shape:
        raise IndexError(f"boolean index of shape {value.shape} does not match the indexed axes of "
                         f"shape {have}{at_user_line()}")
      for k, nz in enumerate(np.nonzero(value)):
        advanced.append(_Advanced(axis + k, _index_array(nz, have[k], x.device), pos))
    else: advanced.append(_Advanced(axis, _index_array(value, n, x.device), pos))
    axis += value.ndim if kind == "mask" else 0 if kind == "int" and not has_advanced else 1
    x_axis += _axes_used(kind, value)
  return build.y, _Plan(tuple(build.steps), tuple(advanced))


def _replay(a: Array, plan: _Plan) -> Array:
  """Apply the plan's movement steps to `a`, an array of the shape the plan was made for."""
  for op, arg, _ in plan.steps: a = a._movement(op, arg)
  return a


def _unreplay(a: Array, plan: _Plan) -> Array:
  """Undo the plan's movement steps: `a` has the basic-indexed shape, the result x's shape, with zeros
  (False) at the positions the basic index does not reach."""
  for op, arg, shape in reversed(plan.steps):
    if op is Ops.RESHAPE: a = a._reshape(shape)
    elif op is Ops.SHRINK: a = a._pad(tuple((s, n - e) for (s, e), n in zip(arg, shape)))
    elif op is Ops.PAD: a = a._shrink(tuple((lo, lo + n) for (lo, _), n in zip(arg, shape)))
    else: a = a._flip(arg)
  return a


def _check_mode(mode: Optional[str]) -> None:
  if mode not in _MODES: raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")


def _default_fill(dtype: DType) -> Any:
  """JAX's fill for out-of-range reads: NaN, the lowest signed int, the highest unsigned int, True."""
  if dtype.is_float: return float("nan")
  return dtype.min if dtype.is_int and not dtype.is_unsigned else dtype.max


def _gather(y: Array, plan: _Plan, mode: Optional[str], fill_value: Any) -> Array:
  """Index the advanced axes of `y` (the basic-indexed array) with the plan's integer arrays."""
  adv = plan.advanced
  try:
    batch = broadcast_shapes(*[a.index.shape for a in adv])
  except ValueError:
    raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                     + " ".join(str(a.index.shape) for a in adv) + at_user_line()) from None
  sizes = [y.shape[a.axis] for a in adv]
  if mode in (None, "clip") and 0 in sizes and math.prod(batch):
    raise IndexError(f"cannot clamp indices into an axis of size 0 (indexed axes of sizes {tuple(sizes)}); "
                     "use .at[...].get(mode='fill') to read a fill value instead")
  # one linear index over the indexed axes, row-major
  terms: list[Array] = []
  valid: Optional[Array] = None
  for k, (a, n) in enumerate(zip(adv, sizes)):
    i = el.where(a.index < 0, a.index + n, a.index)
    # GATHER clamps the linear index; with several indexed axes each one is clamped into its own axis first
    if mode in (None, "clip") and len(adv) > 1: i = el.clip(i, 0, n - 1)
    elif mode in ("fill", "drop"):
      ok = (i >= 0) & (i < n)
      valid = ok if valid is None else valid & ok
    stride = math.prod(sizes[k + 1:])
    terms.append(i if stride == 1 else i * stride)
  linear = sum(terms[1:], terms[0])
  if len(adv) == 1:  # read along the axis where it is: no transpose of the source (nor of its gradient)
    return _gather_along(y, adv[0].axis, linear._broadcast_to(batch), valid, fill_value)
  rest = [ax for ax in range(y.ndim) if ax not in {a.axis for a in adv}]
  kept = tuple(y.shape[ax] for ax in rest)
  src = y._permute(tuple(rest) + tuple(a.axis for a in adv))._reshape(kept + (math.prod(sizes),))
  out = _gather_along(src, len(kept), linear._broadcast_to(batch), valid, fill_value)
  at = adv[0].axis if plan.adjacent else 0
  order = list(range(at)) + list(range(len(kept), len(kept) + len(batch))) + list(range(at, len(kept)))
  return out._permute(tuple(order))


def _gather_along(src: Array, axis: int, index: Array, valid: Optional[Array], fill_value: Any) -> Array:
  """`src` read along `axis` at every position of `index` (shape B, wrapped, clamped by GATHER): src's
  shape with that axis replaced by B. Where `valid` (shape B) is False, the fill."""
  before, n, after, batch = src.shape[:axis], src.shape[axis], src.shape[axis + 1:], index.shape
  full = before + batch + after
  if n == 0: out = Array.const(0, src.dtype, full)  # only reached with every position invalid (or none)
  else:
    lanes = batch or (1,)  # GATHER keeps the rank: the batch axes stand where `axis` was, the source
    wide = src._reshape(before + (1,) * (len(lanes) - 1) + (n,) + after)  # is read at 0 along all but the last
    at = index._reshape((1,) * len(before) + lanes + (1,) * len(after))._broadcast_to(before + lanes + after)
    out = wide._gather(at, len(before) + len(lanes) - 1)._reshape(full)
  if valid is None: return out
  fill = Array.const(_default_fill(src.dtype) if fill_value is None else fill_value, src.dtype, full)
  gate = valid._reshape((1,) * len(before) + batch + (1,) * len(after))._broadcast_to(full)
  return gate._alu(Ops.WHERE, out, fill)


def _get(x: Array, idx: Any, mode: Optional[str] = None, fill_value: Any = None) -> Array:
  _check_mode(mode)
  y, plan = _parse(x, idx)
  return _gather(y, plan, mode, fill_value) if plan.advanced else y


def getitem(x: Array, idx: Any) -> Array:
  """`x[idx]` with NumPy's indexing rules; integer-array values are wrapped once and clamped (see the
  module docstring). Raises IndexError for malformed indices and static ints out of range."""
  return _get(x, idx)


def _int_indices(indices: Any, name: str) -> Array:
  index = as_array(indices)
  if not index.dtype.is_int: raise TypeError(f"{name}: indices must be integers, got {index.dtype.name}")
  return index


def take(a: Any, indices: Any, axis: Optional[int] = None, mode: Optional[str] = None,
         fill_value: Any = None) -> Array:
  """`a` read at `indices` along `axis` (the flattened `a` when None): `a[:, ..., indices]`. As JAX, the
  default mode is 'fill' (out-of-range indices, after negative ones wrap once, read `fill_value`);
  mode='clip' clamps them instead (see `.at[...].get`)."""
  x = as_array(a)
  index = _int_indices(indices, "take")
  if axis is None: x, axis = x._reshape((x.size,)), 0
  axis = normalize_axis(axis, x.ndim)
  return _get(x, (slice(None),) * axis + (index,), "fill" if mode is None else mode, fill_value)


def take_along_axis(arr: Any, indices: Any, axis: Optional[int] = -1, mode: Optional[str] = None,
                    fill_value: Any = None) -> Array:
  """`out[..., j, ...] = arr[..., indices[..., j, ...], ...]` along `axis` (NumPy's take_along_axis):
  `indices` has arr's rank, and the other axes broadcast against arr's. Bounds as `take` (JAX): negative
  indices wrap once, then out-of-range ones read `fill_value` by default, or are clamped with mode='clip'."""
  _check_mode(mode)
  x = as_array(arr)
  index = _int_indices(indices, "take_along_axis")
  if axis is None:
    if index.ndim != 1: raise ValueError(f"take_along_axis: with axis=None indices must be 1-d, got shape {index.shape}")
    x, axis = x._reshape((x.size,)), 0
  if index.ndim != x.ndim:
    raise ValueError(f"take_along_axis: indices of shape {index.shape} must have the array's rank {x.ndim} "
                     f"(array shape {x.shape}){at_user_line()}")
  axis = normalize_axis(axis, x.ndim)
  try:
    others = broadcast_shapes(x.shape[:axis] + (1,) + x.shape[axis + 1:], index.shape[:axis] + (1,) + index.shape[axis + 1:])
  except ValueError:
    raise ValueError(f"take_along_axis: indices of shape {index.shape} do not broadcast against the array's "
                     f"shape {x.shape} outside axis {axis}{at_user_line()}") from None
  n, m = x.shape[axis], index.shape[axis]
  x = x._broadcast_to(others[:axis] + (n,) + others[axis + 1:])
  shape = others[:axis] + (m,) + others[axis + 1:]
  i = _index_array(index, n, x.device)._broadcast_to(shape)
  i = el.where(i < 0, i + n, i)
  fill = mode in (None, "fill", "drop")
  if n == 0 and math.prod(shape) and not fill:
    raise IndexError(f"take_along_axis: cannot clamp indices into axis {axis} of size 0; use mode='fill'")
  out = Array.const(0, x.dtype, shape) if n == 0 else x._gather(i, axis)
  if not fill: return out
  fills = Array.const(_default_fill(x.dtype) if fill_value is None else fill_value, x.dtype, shape)
  return ((i >= 0) & (i < n))._alu(Ops.WHERE, out, fills)


# ---- functional updates
_Accumulator = tuple[Any, Callable[[Array], Array], Callable[[Array, Array], Array]]


def _accumulator(kind: str, dtype: DType) -> _Accumulator:
  """For 'add', 'multiply', 'min' or 'max': (the identity, a reduction over the last axis that keeps
  it, and how x combines with the reduced updates). Bool add is OR and bool multiply is AND."""
  along = lambda op: (lambda a: a._reduce(op, (a.ndim - 1,)))
  smallest = lambda a: red.min(a, -1, keepdims=True)
  if kind == "add":
    if dtype.is_bool: return False, along(Ops.MAX), el.logical_or
    return 0, along(Ops.ADD), lambda x, u: x._alu(Ops.ADD, u)
  if kind == "multiply":
    if dtype.is_bool: return True, smallest, el.logical_and
    return 1, along(Ops.MUL), lambda x, u: x._alu(Ops.MUL, u)
  if kind == "max": return dtype.min, along(Ops.MAX), el.maximum
  return dtype.max, smallest, el.minimum


def _scatter(x: Array, idx: Any, values: Any, kind: str, mode: Optional[str]) -> Array:
  """`x` with the positions `idx` selects updated by `values`: kind is 'set', 'add', 'multiply', 'min'
  or 'max'. Out-of-range integer-array positions are dropped, or clamped with mode='clip'."""
  _check_mode(mode)
  y, plan = _parse(x, idx)
  positions = None
  if plan.advanced:  # the flat position in x of every element of x[idx]; -1 where it is dropped
    flat = Array.from_data(np.arange(x.size, dtype=np.int32).reshape(x.shape), device=x.device)
    positions = _gather(_replay(flat, plan), plan, "clip" if mode == "clip" else "fill", -1)
  shape = y.shape if positions is None else positions.shape
  updates = as_array(values, x.dtype)
  while updates.ndim > len(shape) and updates.shape[0] == 1: updates = updates._reshape(updates.shape[1:])
  try:
    updates = updates._broadcast_to(shape)
  except ValueError:
    raise ValueError(f"updates of shape {updates.shape} cannot be broadcast to the indexed shape "
                     f"{shape}{at_user_line()}") from None
  if updates.size == 0: return x
  if positions is None:  # a basic index reaches each position at most once: scatter by moving back
    back = _unreplay(updates, plan)
    reached = _unreplay(Array.const(True, dtypes.bool, shape), plan)
    return reached._alu(Ops.WHERE, back if kind == "set" else _accumulator(kind, x.dtype)[2](x, back), x)
  if kind == "set" or (kind == "add" and not x.dtype.is_bool):  # one sequential pass over the updates
    return x._scatter(positions, updates, None if kind == "set" else Ops.ADD)
  # multiply, min, max (whose derivatives SCATTER has no rule for) and bool add: match each position of x
  # (rows) against the updates' positions (columns)
  n, count = x.size, updates.size
  grid = (n, count)
  cells = Array.from_data(np.arange(n, dtype=np.int32).reshape(n, 1), device=x.device)
  match = el.equal(positions._reshape((1, count)), cells)
  vals = updates._reshape((1, count))._broadcast_to(grid)
  identity, reduce, combine = _accumulator(kind, x.dtype)
  out = combine(x._reshape((n, 1)), reduce(match._alu(Ops.WHERE, vals, Array.const(identity, x.dtype, grid))))
  return out._reshape(x.shape)


class _IndexUpdateRef:
  """`x.at[idx]`: the update methods return a new Array; `x` itself never changes."""

  def __init__(self, array: Array, index: Any):
    self.array, self.index = array, index

  def __repr__(self) -> str: return f"_IndexUpdateRef(shape={self.array.shape}, index={self.index!r})"

  def get(self, mode: Optional[str] = None, fill_value: Any = None) -> Array:
    """`x[idx]`; with mode='fill' (or 'drop') out-of-range integer-array positions read `fill_value`."""
    return _get(self.array, self.index, mode, fill_value)

  def set(self, values: Any, mode: Optional[str] = None) -> Array:
    """x[idx] = values; at a repeated position the last update wins."""
    return _scatter(self.array, self.index, values, "set", mode)

  def add(self, values: Any, mode: Optional[str] = None) -> Array:
    """x[idx] += values, accumulating repeated positions (np.add.at)."""
    return _scatter(self.array, self.index, values, "add", mode)

  def multiply(self, values: Any, mode: Optional[str] = None) -> Array:
    """x[idx] *= values, accumulating repeated positions (np.multiply.at)."""
    return _scatter(self.array, self.index, values, "multiply", mode)

  mul = multiply

  def divide(self, values: Any, mode: Optional[str] = None) -> Array:
    """x / ones_like(x).at[idx].multiply(values): true division, so int arrays give floats (as JAX)."""
    return el.divide(self.array, _scatter(_ones_like(self.array), self.index, values, "multiply", mode))

  def power(self, values: Any, mode: Optional[str] = None) -> Array:
    """x ** ones_like(x).at[idx].multiply(values) (as JAX)."""
    return el.power(self.array, _scatter(_ones_like(self.array), self.index, values, "multiply", mode))

  def min(self, values: Any, mode: Optional[str] = None) -> Array:
    """x[idx] = minimum(x[idx], values), accumulating repeated positions (np.minimum.at)."""
    return _scatter(self.array, self.index, values, "min", mode)

  def max(self, values: Any, mode: Optional[str] = None) -> Array:
    """x[idx] = maximum(x[idx], values), accumulating repeated positions (np.maximum.at)."""
    return _scatter(self.array, self.index, values, "max", mode)


def _ones_like(x: Array) -> Array: return Array.const(1, x.dtype, x.shape)


class _IndexUpdateHelper:
  """`x.at`: index it to get the functional-update methods, as in `x.at[idx].add(1)`."""

  def __init__(self, array: Array):
    self.array = array

  def __getitem__(self, index: Any) -> _IndexUpdateRef: return _IndexUpdateRef(self.array, index)
