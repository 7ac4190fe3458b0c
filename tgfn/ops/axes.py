"""Axis-argument normalization shared by every function that takes `axis`."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from tgfn.viz.locations import at_user_line


def normalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
  if not isinstance(axis, (int,)) or isinstance(axis, bool):
    try:
      axis = int(axis.__index__())
    except AttributeError:
      raise TypeError(f"{name} must be an integer, got {axis!r}{at_user_line()}") from None
  if not -ndim <= axis < ndim:
    raise ValueError((f"{name} {axis} is out of bounds for an array of dimension {ndim} (valid: {-ndim}..{ndim - 1})"
                      if ndim else f"{name} {axis} is out of bounds for a 0-d array") + at_user_line())
  return axis % ndim


def normalize_axes(axis: Optional[Any], ndim: int) -> tuple[int, ...]:
  """None -> every axis; an int or a sequence of ints -> sorted non-negative axes, no repeats."""
  if axis is None: return tuple(range(ndim))
  axes = [normalize_axis(a, ndim) for a in (axis if isinstance(axis, Sequence) else (axis,))]
  if len(set(axes)) != len(axes): raise ValueError(f"repeated axis in {axis!r}{at_user_line()}")
  return tuple(sorted(axes))
