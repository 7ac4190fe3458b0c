"""Functions that rearrange elements without computing: reshape, transpose, broadcasting, joining,
splitting, padding. All are movement primitives (or sums of padded pieces), so none makes a kernel
of its own: the consumer reads through the new index expressions."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from tgfn.array import Array, as_array
from tgfn.ops.axes import normalize_axes, normalize_axis

__all__ = ["reshape", "ravel", "transpose", "moveaxis", "swapaxes", "expand_dims", "squeeze",
           "broadcast_to", "broadcast_arrays", "atleast_1d", "atleast_2d"]



def reshape(x: Any, shape: Any, order: str = "C") -> Array:
  x = as_array(x)
  shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
  if shape.count(-1) > 1: raise ValueError(f"reshape: only one dimension can be -1, got {shape}")
  known = math.prod(s for s in shape if s != -1)
  if -1 in shape:
    if known == 0 or x.size % known: raise ValueError(f"cannot reshape array of shape {x.shape} (size {x.size}) into shape {shape}")
    shape = tuple(x.size // known if s == -1 else s for s in shape)
  if math.prod(shape) != x.size or any(s < 0 for s in shape):
    raise ValueError(f"cannot reshape array of shape {x.shape} (size {x.size}) into shape {shape}")
  if order == "F": return transpose(transpose(x)._reshape(shape[::-1]))
  if order != "C": raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")
  return x._reshape(shape)


def ravel(x: Any) -> Array: return reshape(x, -1)


def transpose(x: Any, axes: Optional[Sequence[int]] = None) -> Array:
  x = as_array(x)
  if axes is None: return x._permute(tuple(range(x.ndim))[::-1])
  order = tuple(normalize_axis(a, x.ndim) for a in axes)
  if sorted(order) != list(range(x.ndim)):
    raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation of the {x.ndim} axes of shape {x.shape}")
  return x._permute(order)


def moveaxis(x: Any, source: Any, destination: Any) -> Array:
  x = as_array(x)
  src = [normalize_axis(a, x.ndim, "source") for a in (source if isinstance(source, Sequence) else (source,))]
  dst = [normalize_axis(a, x.ndim, "destination") for a in
         (destination if isinstance(destination, Sequence) else (destination,))]
  if len(src) != len(dst): raise ValueError("moveaxis: source and destination must have the same number of axes")
  order = [a for a in range(x.ndim) if a not in src]
  for d, s in sorted(zip(dst, src)): order.insert(d, s)
  return x._permute(tuple(order))


def swapaxes(x: Any, axis1: int, axis2: int) -> Array:
  x = as_array(x)
  a, b = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
  order = list(range(x.ndim))
  order[a], order[b] = order[b], order[a]
  return x._permute(tuple(order))


def expand_dims(x: Any, axis: Any) -> Array:
  x = as_array(x)
  axes = axis if isinstance(axis, Sequence) else (axis,)
  out_ndim = x.ndim + len(axes)
  new_axes = normalize_axes(axes, out_ndim)
  dims = iter(x.shape)
  return x._reshape(tuple(1 if i in new_axes else next(dims) for i in range(out_ndim)))


def squeeze(x: Any, axis: Any = None) -> Array:
  x = as_array(x)
  if axis is None: axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
  else:
    axes = normalize_axes(axis, x.ndim)
    for a in axes:
      if x.shape[a] != 1: raise ValueError(f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1")
  return x._reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))


def broadcast_to(x: Any, shape: Any) -> Array:
  return as_array(x)._broadcast_to((shape,) if isinstance(shape, int) else tuple(shape))


def broadcast_arrays(*xs: Any) -> list[Array]:
  from tgfn.array import broadcast_shapes
  arrays = [as_array(x) for x in xs]
  shape = broadcast_shapes(*[a.shape for a in arrays])
  return [a._broadcast_to(shape) for a in arrays]


def atleast_1d(x: Any) -> Array:
  x = as_array(x)
  return x._reshape((1,)) if x.ndim == 0 else x


def atleast_2d(x: Any) -> Array:
  x = as_array(x)
  return x._reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x
