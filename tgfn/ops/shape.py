"""Functions that rearrange elements without computing: reshape, transpose, broadcasting, joining,
splitting, padding, flipping, tiling, rolling.

All are built from the movement primitives (reshape, permute, expand, pad, shrink, flip) plus WHERE to
select between padded pieces, so none makes a kernel of its own: the consumer reads through the new
index expressions. Arguments that decide output shapes (split points, repeats, pad widths, shifts)
must be concrete Python or NumPy values."""
from __future__ import annotations

import math
import operator
from typing import Any, Optional, Sequence

import numpy as np

from tgfn.array import Array, _promotion_type, _weak_scalar, as_array, broadcast_shapes, check_devices
from tgfn.dtype import dtypes, result_type, to_dtype
from tgfn.ops.axes import normalize_axes, normalize_axis
from tgfn.uop.ops import Ops
from tgfn.viz.locations import at_user_line

__all__ = ["reshape", "ravel", "transpose", "moveaxis", "swapaxes", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "atleast_1d", "atleast_2d", "concatenate", "stack", "hstack",
           "vstack", "split", "array_split", "pad", "flip", "fliplr", "flipud", "tile", "repeat", "roll"]


def _shape_arg(shape: Any) -> tuple[int, ...]:
  return (operator.index(shape),) if np.ndim(shape) == 0 else tuple(operator.index(n) for n in shape)


def reshape(x: Any, shape: Any, order: str = "C", *, copy: Optional[bool] = None) -> Array:
  """`x` with a new shape of the same size; one entry may be -1 (inferred). order 'C' reads and writes
  elements in row-major order, 'F' in column-major order. `copy` is the array API's: a reshape never
  needs a copy of a lazy array, so every value is honoured."""
  x = as_array(x)
  shape = _shape_arg(shape)
  if shape.count(-1) > 1: raise ValueError(f"reshape: only one dimension can be -1, got {shape}{at_user_line()}")
  cannot = f"cannot reshape array of shape {x.shape} (size {x.size}) into shape {shape}"
  known = math.prod(s for s in shape if s != -1)
  if -1 in shape:
    if known == 0 or x.size % known: raise ValueError(cannot + at_user_line())
    shape = tuple(x.size // known if s == -1 else s for s in shape)
  if math.prod(shape) != x.size or any(s < 0 for s in shape): raise ValueError(cannot + at_user_line())
  if order == "F": return transpose(transpose(x)._reshape(shape[::-1]))
  if order != "C": raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")
  return x._reshape(shape)


def ravel(x: Any) -> Array:
  """`x` flattened to 1-d in row-major order."""
  return reshape(x, -1)


def transpose(x: Any, axes: Optional[Sequence[int]] = None) -> Array:
  """`x` with its axes permuted: output axis i is input axis axes[i] (None: reversed)."""
  x = as_array(x)
  if axes is None: return x._permute(tuple(range(x.ndim))[::-1])
  order = tuple(normalize_axis(a, x.ndim) for a in axes)
  if sorted(order) != list(range(x.ndim)):
    raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation of the {x.ndim} axes "
                     f"of shape {x.shape}{at_user_line()}")
  return x._permute(order)


def _axis_list(axis: Any, ndim: int, name: str) -> list[int]:
  axes = [normalize_axis(a, ndim, name) for a in (axis if isinstance(axis, Sequence) else (axis,))]
  if len(set(axes)) != len(axes): raise ValueError(f"repeated axis in {name} {axis!r}")
  return axes


def moveaxis(x: Any, source: Any, destination: Any) -> Array:
  """`x` with axes `source` moved to positions `destination` (ints or equal-length sequences); the
  other axes keep their order."""
  x = as_array(x)
  src, dst = _axis_list(source, x.ndim, "source"), _axis_list(destination, x.ndim, "destination")
  if len(src) != len(dst):
    raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} must have the same "
                     f"number of axes")
  order = [a for a in range(x.ndim) if a not in src]
  for d, s in sorted(zip(dst, src)): order.insert(d, s)
  return x._permute(tuple(order))


def swapaxes(x: Any, axis1: int, axis2: int) -> Array:
  """`x` with axes `axis1` and `axis2` exchanged."""
  x = as_array(x)
  a, b = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
  order = list(range(x.ndim))
  order[a], order[b] = order[b], order[a]
  return x._permute(tuple(order))


def expand_dims(x: Any, axis: Any) -> Array:
  """`x` with new size-1 axes at positions `axis` (an int or a sequence) of the result."""
  x = as_array(x)
  axes = axis if isinstance(axis, Sequence) else (axis,)
  out_ndim = x.ndim + len(axes)
  new_axes = normalize_axes(axes, out_ndim)
  dims = iter(x.shape)
  return x._reshape(tuple(1 if i in new_axes else next(dims) for i in range(out_ndim)))


def squeeze(x: Any, axis: Any = None) -> Array:
  """`x` without the size-1 axes `axis` (None: every size-1 axis). Naming a larger axis is an error."""
  x = as_array(x)
  if axis is None: axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
  else:
    axes = normalize_axes(axis, x.ndim)
    for a in axes:
      if x.shape[a] != 1:
        raise ValueError(f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1{at_user_line()}")
  return x._reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))


def broadcast_to(x: Any, shape: Any) -> Array:
  """`x` broadcast to `shape` (NumPy rules: align trailing axes; size-1 axes stretch)."""
  shape = _shape_arg(shape)
  if any(n < 0 for n in shape):
    raise ValueError(f"broadcast_to: negative dimensions are not allowed, got {shape}{at_user_line()}")
  return as_array(x)._broadcast_to(shape)


def broadcast_arrays(*xs: Any) -> list[Array]:
  """The inputs broadcast to their common shape."""
  arrays = [as_array(x) for x in xs]
  shape = broadcast_shapes(*[a.shape for a in arrays])
  return [a._broadcast_to(shape) for a in arrays]


def atleast_1d(x: Any) -> Array:
  """`x`, with a 0-d array made 1-d of size 1."""
  x = as_array(x)
  return x._reshape((1,)) if x.ndim == 0 else x


def atleast_2d(x: Any) -> Array:
  """`x` with leading size-1 axes added up to 2 dimensions (a 1-d array becomes one row)."""
  x = as_array(x)
  return x._reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


# ---- joining
def _with_size(shape: tuple[int, ...], axis: int, n: int) -> tuple[int, ...]:
  return shape[:axis] + (n,) + shape[axis + 1:]


def _slice_axis(x: Array, axis: int, start: int, stop: int) -> Array:
  return x._shrink(tuple((start, stop) if i == axis else (0, n) for i, n in enumerate(x.shape)))


def _join(pieces: list[Array], axis: int) -> Array:
  """Concatenate same-dtype pieces whose shapes agree off `axis`. Each piece is zero-padded to the full
  length and chosen where its padded all-true mask holds. Selecting (not summing) keeps -0.0, NaN and
  bools intact, and the chain of WHEREs over gated loads fuses into the consumer's kernel."""
  nonempty = [p for p in pieces if p.shape[axis]]
  if not nonempty: return pieces[0]
  ends = np.cumsum([p.shape[axis] for p in nonempty]).tolist()
  placements = [tuple((end - p.shape[axis], ends[-1] - end) if i == axis else (0, 0) for i in range(p.ndim))
                for p, end in zip(nonempty, ends)]
  out = nonempty[0]._pad(placements[0])
  for p, widths in zip(nonempty[1:], placements[1:]):
    out = Array.const(True, dtypes.bool, p.shape)._pad(widths)._alu(Ops.WHERE, p._pad(widths), out)
  return out


def _promoted(values: Sequence[Any], dtype: Any) -> list[Array]:
  """`values` as Arrays of `dtype`, or of their JAX-promoted dtype with scalars weakly typed (like
  `promote`, but without broadcasting them together)."""
  xs = [v if isinstance(v, Array) or _weak_scalar(v) is not None else as_array(v) for v in values]
  if not xs: return []
  dt = to_dtype(dtype) if dtype is not None else \
    result_type(*[_promotion_type(x if isinstance(x, Array) else _weak_scalar(x)) for x in xs])
  return [as_array(x, dt) for x in xs]


def concatenate(arrays: Sequence[Any], axis: Optional[int] = 0, dtype: Any = None) -> Array:
  """Join arrays along an existing `axis` (None: flatten each first). Shapes must agree off the axis;
  dtypes promote as in JAX (or cast to `dtype`). Lazy, and fused into one kernel with its inputs."""
  xs = _promoted(list(arrays), dtype)
  if not xs: raise ValueError("concatenate: need at least one array to concatenate, got an empty sequence")
  if axis is None: xs, axis = [x._reshape((x.size,)) for x in xs], 0
  if any(x.ndim == 0 for x in xs):
    raise ValueError(f"concatenate: zero-dimensional arrays cannot be concatenated, got shapes "
                     f"{', '.join(str(x.shape) for x in xs)}{at_user_line()}")
  ax = normalize_axis(axis, xs[0].ndim)
  off_axis = lambda s: s[:ax] + s[ax + 1:]
  if any(x.ndim != xs[0].ndim or off_axis(x.shape) != off_axis(xs[0].shape) for x in xs):
    raise ValueError(f"concatenate: all input shapes must match except along axis {ax}, got shapes "
                     f"{', '.join(str(x.shape) for x in xs)}{at_user_line()}")
  check_devices(xs)
  return _join(xs, ax)


def stack(arrays: Sequence[Any], axis: int = 0, dtype: Any = None) -> Array:
  """Join same-shaped arrays along a new `axis` of the result."""
  xs = _promoted(list(arrays), dtype)
  if not xs: raise ValueError("stack: need at least one array to stack, got an empty sequence")
  if any(x.shape != xs[0].shape for x in xs):
    raise ValueError(f"stack: all input arrays must have the same shape, got shapes "
                     f"{', '.join(str(x.shape) for x in xs)}{at_user_line()}")
  ax = normalize_axis(axis, xs[0].ndim + 1)
  return concatenate([x._reshape(x.shape[:ax] + (1,) + x.shape[ax:]) for x in xs], ax)


def hstack(arrays: Sequence[Any], dtype: Any = None) -> Array:
  """Concatenate along axis 1 (axis 0 for 1-d inputs); scalars count as 1-d."""
  xs = [atleast_1d(x) for x in _promoted(list(arrays), dtype)]
  return concatenate(xs, 0 if xs and xs[0].ndim == 1 else 1)


def vstack(arrays: Sequence[Any], dtype: Any = None) -> Array:
  """Concatenate along axis 0, after making every input at least 2-d (a 1-d array becomes one row)."""
  return concatenate([atleast_2d(x) for x in _promoted(list(arrays), dtype)], 0)


# ---- splitting
def _static_ints(value: Any, name: str) -> np.ndarray:
  """`value` (an int or nested sequence of ints, known now) as a NumPy int array. Arrays are refused:
  reading one would compute it, and these arguments decide output shapes."""
  if isinstance(value, Array):
    raise TypeError(f"{name} must be concrete Python or NumPy integers (it decides the output shape), "
                    f"got an Array; pass np.asarray(...) of it if a host round trip is intended")
  try:
    out = np.asarray(value)
  except ValueError:
    out = np.asarray(None)
  if out.size and out.dtype.kind not in "biu":
    raise ValueError(f"{name} must be integers, got {value!r}")
  return out.astype(np.int64)


def _split_at(x: Array, axis: int, points: Sequence[int]) -> list[Array]:
  # split points act like slice bounds: negative ones count from the end, and out-of-order ones give empties
  n = x.shape[axis]
  edges = [0, *points, n]
  out = []
  for lo, hi in zip(edges, edges[1:]):
    start, stop, _ = slice(lo, hi).indices(n)
    out.append(_slice_axis(x, axis, start, max(start, stop)))
  return out


def _split(x: Any, indices_or_sections: Any, axis: int, even: bool, name: str) -> list[Array]:
  x = as_array(x)
  ax = normalize_axis(axis, x.ndim)
  spec = _static_ints(indices_or_sections, "indices_or_sections")
  if spec.ndim > 1:
    raise ValueError(f"{name}: indices_or_sections must be an int or a 1-d sequence, "
                     f"got {indices_or_sections!r}")
  if spec.ndim == 1: return _split_at(x, ax, spec.tolist())
  n, sections = x.shape[ax], int(spec)
  if sections <= 0: raise ValueError(f"{name}: the number of sections must be larger than 0, got {sections}")
  if even and n % sections:
    raise ValueError(f"split: axis {ax} of size {n} does not divide into {sections} equal sections; "
                     f"use array_split for unequal ones{at_user_line()}")
  # array_split: the first n % sections pieces get one extra element
  sizes = [n // sections + (i < n % sections) for i in range(sections)]
  return _split_at(x, ax, np.cumsum(sizes[:-1]).tolist())


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Array]:
  """Split `x` along `axis` into an int number of equal sections (an error if they are not equal),
  or at a sequence of split points (slice-like: negative points count from the end)."""
  return _split(x, indices_or_sections, axis, True, "split")


def array_split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Array]:
  """Like split, but an int number of sections need not divide the axis: the first pieces are one longer."""
  return _split(x, indices_or_sections, axis, False, "array_split")


# ---- flipping, tiling, repeating, rolling
def flip(x: Any, axis: Any = None) -> Array:
  """Reverse the order of elements along `axis` (an int, a tuple, or None for every axis)."""
  x = as_array(x)
  return x._flip(normalize_axes(axis, x.ndim))


def fliplr(x: Any) -> Array:
  """Reverse axis 1 (left/right); needs at least 2 dimensions."""
  x = as_array(x)
  if x.ndim < 2: raise ValueError(f"fliplr: needs an array with at least 2 dimensions, got shape {x.shape}")
  return x._flip((1,))


def flipud(x: Any) -> Array:
  """Reverse axis 0 (up/down); needs at least 1 dimension."""
  x = as_array(x)
  if x.ndim < 1: raise ValueError(f"flipud: needs an array with at least 1 dimension, got shape {x.shape}")
  return x._flip((0,))


def _nonnegative(values: np.ndarray, name: str, raw: Any) -> list[int]:
  if (values < 0).any(): raise ValueError(f"{name} must be non-negative, got {raw!r}")
  return values.reshape(-1).tolist()


def tile(x: Any, reps: Any) -> Array:
  """`x` repeated `reps[i]` times along each axis i. A shorter `reps` is padded with leading 1s and a
  shorter `x` with leading size-1 axes. Movement only: reshape to (1, n) pairs, broadcast, merge."""
  x = as_array(x)
  spec = _static_ints(reps, "reps")
  if spec.ndim > 1: raise ValueError(f"tile: reps must be an int or a 1-d sequence, got {reps!r}")
  counts = _nonnegative(spec, "tile: reps", reps)
  nd = max(len(counts), x.ndim)
  counts = [1] * (nd - len(counts)) + counts
  shape = (1,) * (nd - x.ndim) + x.shape
  pairs = x._reshape(tuple(d for n in shape for d in (1, n)))
  tiled = pairs._broadcast_to(tuple(d for r, n in zip(counts, shape) for d in (r, n)))
  return tiled._reshape(tuple(r * n for r, n in zip(counts, shape)))


def _repeat_each(x: Array, axis: int, count: int) -> Array:
  """Each element along `axis` `count` times in a row: reshape to (n, 1), broadcast to (n, count), merge."""
  n = x.shape[axis]
  column = x._reshape(x.shape[:axis + 1] + (1,) + x.shape[axis + 1:])
  wide = column._broadcast_to(x.shape[:axis + 1] + (count,) + x.shape[axis + 1:])
  return wide._reshape(_with_size(x.shape, axis, n * count))


def repeat(x: Any, repeats: Any, axis: Optional[int] = None) -> Array:
  """Repeat each element of `x` along `axis` (None: of the flattened `x`): `repeats` times, or
  `repeats[i]` times for element i when it is a sequence (of concrete integers, one per element or one)."""
  x = as_array(x)
  if axis is None: x, axis = x._reshape((x.size,)), 0
  ax = normalize_axis(axis, x.ndim)
  spec = _static_ints(repeats, "repeats")
  if spec.ndim > 1: raise ValueError(f"repeat: repeats must be an int or a 1-d sequence, got {repeats!r}")
  counts = _nonnegative(spec, "repeat: repeats", repeats)
  n = x.shape[ax]
  if spec.ndim == 0 or len(counts) == 1: return _repeat_each(x, ax, counts[0])
  if len(counts) != n:
    raise ValueError(f"repeat: got {len(counts)} repeats for axis {ax} of size {n}; "
                     f"pass one count per element, or a single count{at_user_line()}")
  if n == 0: return x
  # a run of elements with the same count is one reshape-broadcast piece; the pieces are then joined
  pieces, start = [], 0
  for stop in range(1, n + 1):
    if stop == n or counts[stop] != counts[start]:
      pieces.append(_repeat_each(_slice_axis(x, ax, start, stop), ax, counts[start]))
      start = stop
  return _join(pieces, ax)


def _cycle(x: Array, axis: int, start: int, length: int) -> Array:
  """Elements start .. start+length-1 of `x` repeated endlessly along `axis` (movement only)."""
  shape, n = x.shape, x.shape[axis]
  reps = -(-(start + length) // n)
  if reps > 1:
    x = x._reshape(shape[:axis] + (1,) + shape[axis:])._broadcast_to(shape[:axis] + (reps,) + shape[axis:])
    x = x._reshape(_with_size(shape, axis, reps * n))
  return _slice_axis(x, axis, start, start + length)


def roll(x: Any, shift: Any, axis: Any = None) -> Array:
  """Shift elements along `axis` by `shift` places, wrapping around (None: over the flattened array).
  `shift` and `axis` may be sequences, paired up by broadcasting; shifts of a repeated axis add up."""
  x = as_array(x)
  if axis is None: return roll(x._reshape((x.size,)), shift, 0)._reshape(x.shape)
  shifts, axes = _static_ints(shift, "shift"), _static_ints(axis, "axis")
  if shifts.ndim > 1 or axes.ndim > 1:
    raise ValueError(f"roll: shift and axis must be ints or 1-d sequences, "
                     f"got shift={shift!r} and axis={axis!r}")
  try:
    pairs = np.broadcast_arrays(shifts, axes)
  except ValueError:
    raise ValueError(f"roll: shift {shift!r} and axis {axis!r} must have the same length") from None
  total = [0] * x.ndim
  for s, a in zip(pairs[0].reshape(-1).tolist(), pairs[1].reshape(-1).tolist()):
    total[normalize_axis(a, x.ndim)] += s
  for ax, s in enumerate(total):
    n = x.shape[ax]
    if n and s % n: x = _cycle(x, ax, n - s % n, n)
  return x


# ---- padding
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _per_axis_pairs(value: Any, raw: Any, ndim: int, name: str, forms: str) -> list[tuple[Any, Any]]:
  """`value` broadcast to one (before, after) pair per axis, as NumPy's pad reads its arguments."""
  try:
    pairs = np.broadcast_to(value, (ndim, 2))
  except ValueError:
    raise ValueError(f"pad: {name} must be {forms} (for an array with {ndim} dimensions); "
                     f"got {raw!r}") from None
  return [(lo, hi) for lo, hi in pairs.tolist()]


def _pad_constant(x: Array, widths: tuple[tuple[int, int], ...], constant_values: Any) -> Array:
  inside = Array.const(True, dtypes.bool, x.shape)._pad(widths)
  if isinstance(constant_values, Array):
    if constant_values.ndim:
      raise ValueError(f"pad: an Array constant_values must be 0-d, got shape {constant_values.shape}")
    fill = constant_values.astype(x.dtype)._broadcast_to(inside.shape)
    return inside._alu(Ops.WHERE, x._pad(widths), fill)
  forms = "a number, a (before, after) pair, or one (before, after) pair per axis"
  try:
    spec = np.asarray(constant_values)
  except ValueError:
    spec = np.asarray(None)
  if spec.dtype.kind not in "biuf":
    raise ValueError(f"pad: constant_values must be {forms}; got {constant_values!r}")
  values = _per_axis_pairs(spec, constant_values, x.ndim, "constant_values", forms)
  if all(v == 0 and not np.signbit(v) for pair in values for v in pair): return x._pad(widths)
  if spec.ndim == 0:  # one value everywhere: a single WHERE
    fill = Array.const(spec.item(), x.dtype, inside.shape)
    return inside._alu(Ops.WHERE, x._pad(widths), fill)
  # per-axis values: pad one axis at a time, so later axes own the corners, as in NumPy
  for ax, ((lo, hi), (before, after)) in enumerate(zip(widths, values)):
    if not lo and not hi: continue
    axis_widths = tuple((lo, hi) if i == ax else (0, 0) for i in range(x.ndim))
    padded = x._pad(axis_widths)
    fill = Array.const(after, x.dtype, padded.shape)
    if lo:
      in_before = Array.const(True, dtypes.bool, _with_size(x.shape, ax, lo))._pad(
        tuple((0, x.shape[ax] + hi) if i == ax else (0, 0) for i in range(x.ndim)))
      fill = in_before._alu(Ops.WHERE, Array.const(before, x.dtype, padded.shape), fill)
    x = Array.const(True, dtypes.bool, x.shape)._pad(axis_widths)._alu(Ops.WHERE, padded, fill)
  return x


def _pad_axis(x: Array, axis: int, lo: int, hi: int, mode: str) -> Array:
  """Pad one axis in a mode that copies elements of `x`. Output position j (from -lo) reads the periodic
  extension of one period of `x`: itself (wrap), x then x reversed (symmetric), or x then x reversed
  without its end elements (reflect)."""
  n = x.shape[axis]
  if n == 0:
    raise ValueError(f"pad: cannot extend the empty axis {axis} in mode {mode!r}; only mode 'constant' can")
  if mode == "edge" or (mode == "reflect" and n == 1):
    first = _slice_axis(x, axis, 0, 1)._broadcast_to(_with_size(x.shape, axis, lo))
    last = _slice_axis(x, axis, n - 1, n)._broadcast_to(_with_size(x.shape, axis, hi))
    return _join([first, x, last], axis)
  if mode == "wrap": period = x
  elif mode == "symmetric": period = _join([x, x._flip((axis,))], axis)
  else: period = _join([x, _slice_axis(x._flip((axis,)), axis, 1, n - 1)], axis)
  length = period.shape[axis]
  return _cycle(period, axis, -lo % length, lo + n + hi)


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Array:
  """Pad `x` by pad_width: an int (every side), a (before, after) pair (every axis), or one pair per
  axis. Modes: constant (`constant_values`: a scalar, a 0-d Array, or pairs like pad_width), edge,
  reflect, symmetric, wrap (as in NumPy, widths larger than the axis repeat the pattern)."""
  x = as_array(x)
  if mode not in _PAD_MODES:
    raise ValueError(f"pad: mode must be one of {', '.join(_PAD_MODES)}; got {mode!r}")
  forms = "a non-negative int, a (before, after) pair, or one (before, after) pair per axis"
  spec = _static_ints(pad_width, "pad: pad_width")
  widths = tuple(_per_axis_pairs(spec, pad_width, x.ndim, "pad_width", forms))
  if (spec < 0).any(): raise ValueError(f"pad: pad_width must be {forms}; got negative widths {pad_width!r}")
  if mode == "constant": return _pad_constant(x, widths, constant_values)
  for ax, (lo, hi) in enumerate(widths):
    if lo or hi: x = _pad_axis(x, ax, lo, hi, mode)
  return x
