"""Convolutions and windowed reductions: `conv_general_dilated`, `conv`, `conv_transpose`,
`reduce_window`, with JAX's dimension numbers and padding rules.

Both are written as window extraction plus a reduction. Each spatial axis of the padded input (of size P)
becomes two axes (O, K), the output position and the kernel tap, by stacking K strided slices
x[k*d : k*d + (O-1)*s + 1 : s] (movement ops only); a convolution is then one einsum of the windows with
the kernel (the windows are materialized once, an im2col), and a windowed reduction reduces the K axes.
Input (lhs / base) dilation inserts zeros (or the init value) between elements with interior padding;
kernel (rhs / window) dilation is the slice spacing d.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.lax.primitives import _monoid, _reduce_by, pad
from tgfn.ops.shape import _promoted

__all__ = ["ConvDimensionNumbers", "conv_dimension_numbers", "conv_general_dilated", "conv",
           "conv_with_general_padding", "conv_transpose", "reduce_window", "padtype_to_pads"]

Padding = Union[str, Sequence[tuple[int, int]]]


class ConvDimensionNumbers(NamedTuple):
  """Axis positions, each (batch or out-feature, feature or in-feature, spatial...) in that array's layout."""
  lhs_spec: tuple[int, ...]
  rhs_spec: tuple[int, ...]
  out_spec: tuple[int, ...]


def _spec_from_string(spec: str, first: str, second: str, spatial: str) -> tuple[int, ...]:
  if sorted(spec) != sorted(first + second + spatial):
    raise ValueError(f"conv: dimension spec {spec!r} must hold {first!r}, {second!r} and the spatial axes "
                     f"{spatial!r} of the kernel spec")
  return (spec.index(first), spec.index(second)) + tuple(spec.index(c) for c in spatial)


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any
                           ) -> ConvDimensionNumbers:
  """None (NCHW / OIHW / NCHW for any number of spatial axes), three strings such as
  ('NHWC', 'HWIO', 'NHWC'), or a ConvDimensionNumbers."""
  n = len(lhs_shape)
  if len(rhs_shape) != n:
    raise ValueError(f"conv: lhs and rhs need the same rank, got {len(lhs_shape)} and {len(rhs_shape)}")
  if dimension_numbers is None:
    return ConvDimensionNumbers(tuple(range(n)), tuple(range(n)), tuple(range(n)))
  if isinstance(dimension_numbers, ConvDimensionNumbers): return dimension_numbers
  lhs, rhs, out = dimension_numbers
  if all(isinstance(s, str) for s in (lhs, rhs, out)):
    if not len(lhs) == len(rhs) == len(out) == n:
      raise ValueError(f"conv: dimension specs {dimension_numbers} must each have {n} letters")
    spatial = "".join(c for c in rhs if c not in "OI")
    return ConvDimensionNumbers(_spec_from_string(lhs, "N", "C", spatial), _spec_from_string(rhs, "O", "I", spatial),
                                _spec_from_string(out, "N", "C", spatial))
  return ConvDimensionNumbers(tuple(lhs), tuple(rhs), tuple(out))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
  """'VALID': none. 'SAME' (or 'SAME_LOWER'): ceil(in / stride) outputs, the extra padding on the high
  side (low side)."""
  if padding == "VALID": return [(0, 0)] * len(in_shape)
  if padding not in ("SAME", "SAME_LOWER"):
    raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs, got {padding!r}")
  pads = []
  for n, k, s in zip(in_shape, window_shape, window_strides):
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    small = total // 2
    pads.append((small, total - small) if padding == "SAME" else (total - small, small))
  return pads


def _windows(x: Array, first_axis: int, sizes: Sequence[int], strides: Sequence[int],
             dilations: Sequence[int]) -> Array:
  """Axes first_axis.. (sizes P) become (O, K) pairs: out[.., o, k, ..] = x[.., o*s + k*d, ..]."""
  for i in reversed(range(len(sizes))):
    axis, k, s, d = first_axis + i, sizes[i], strides[i], dilations[i]
    span = (k - 1) * d + 1
    count = max((x.shape[axis] - span) // s + 1, 0)
    lead = (slice(None),) * axis
    taps = [x[lead + (slice(t * d, t * d + (count - 1) * s + 1, s),)] if count else x[lead + (slice(0, 0),)]
            for t in range(k)]
    x = tnp.stack(taps, axis=axis + 1)
  return x


def _check_lengths(name: str, n: int, **values: Any) -> None:
  for key, v in values.items():
    if v is not None and len(v) != n:
      raise ValueError(f"{name}: {key} needs {n} entries (one per spatial axis), got {tuple(v)}")


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Padding,
                         lhs_dilation: Optional[Sequence[int]] = None, rhs_dilation: Optional[Sequence[int]] = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None) -> Array:
  """N-d convolution (cross-correlation, as lax: the kernel is not flipped)."""
  if batch_group_count != 1: raise NotImplementedError("conv_general_dilated: batch_group_count > 1 is not supported")
  lhs, rhs = _promoted([lhs, rhs], None)
  dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
  x, w = tnp.transpose(lhs, dn.lhs_spec), tnp.transpose(rhs, dn.rhs_spec)  # N C S..., O I S...
  nsp = x.ndim - 2
  _check_lengths("conv_general_dilated", nsp, window_strides=window_strides, lhs_dilation=lhs_dilation,
                 rhs_dilation=rhs_dilation, padding=None if isinstance(padding, str) else padding)
  lhs_dilation = tuple(lhs_dilation or (1,) * nsp)
  rhs_dilation = tuple(rhs_dilation or (1,) * nsp)
  groups = feature_group_count
  n, c = x.shape[:2]
  o, i = w.shape[:2]
  if c != i * groups or o % groups:
    raise ValueError(f"conv_general_dilated: lhs has {c} features, rhs {i} inputs and {o} outputs: need "
                     f"lhs features = rhs inputs * feature_group_count ({groups}) and outputs divisible by it")
  kernel = w.shape[2:]
  dilated = [(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[2:], lhs_dilation)]
  effective = [(k - 1) * d + 1 for k, d in zip(kernel, rhs_dilation)]
  pads = padtype_to_pads(dilated, effective, window_strides, padding) if isinstance(padding, str) else list(padding)
  config = [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in zip(pads, lhs_dilation)]
  x = pad(x, 0, config)
  win = _windows(x, 2, kernel, window_strides, rhs_dilation)  # N C (O K)...
  win = win._reshape((n, groups, c // groups) + win.shape[2:])
  w = w._reshape((groups, o // groups, i) + kernel)
  letters = "pqrstuvwxyzm"  # spatial outputs and taps; n g c f name the other axes
  outs, taps = letters[:nsp], letters[nsp:2 * nsp]
  spec_x = "ngc" + "".join(p + q for p, q in zip(outs, taps))
  spec_w = "gfc" + taps
  out = tnp.einsum(f"{spec_x},{spec_w}->ngf{outs}", win, w)
  out = out._reshape((n, o) + out.shape[3:])
  out = tnp.transpose(out, tuple(np.argsort(dn.out_spec)))
  return out if preferred_element_type is None else out.astype(preferred_element_type)


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Padding, precision: Any = None,
         preferred_element_type: Any = None) -> Array:
  return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                              preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Padding,
                              lhs_dilation: Optional[Sequence[int]], rhs_dilation: Optional[Sequence[int]],
                              precision: Any = None, preferred_element_type: Any = None) -> Array:
  return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=precision, preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k: int, s: int, padding: str) -> tuple[int, int]:
  """JAX's padding of the stride-dilated input for a transposed convolution of kernel extent k."""
  if padding == "SAME":
    total = k + s - 2
    low = k - 1 if s > k - 1 else -(-total // 2)
  elif padding == "VALID":
    total = k + s - 2 + max(k - s, 0)
    low = k - 1
  else: raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")
  return low, total - low


_TRANSPOSE_DEFAULTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                       5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Padding,
                   rhs_dilation: Optional[Sequence[int]] = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None) -> Array:
  """The transposed ("fractionally strided") convolution: the input dilated by `strides`, then a stride-1
  convolution. With transpose_kernel=True it is the gradient of conv_general_dilated with respect to its
  input (the kernel flipped and its I/O axes swapped). Default layout: NHWC / HWIO / NHWC (JAX's)."""
  lhs, rhs = as_array(lhs), as_array(rhs)
  nd = lhs.ndim
  if dimension_numbers is None:
    if nd not in _TRANSPOSE_DEFAULTS: raise ValueError(f"conv_transpose: no default layout for rank {nd}")
    dimension_numbers = _TRANSPOSE_DEFAULTS[nd]
  dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
  kernel = [rhs.shape[a] for a in dn.rhs_spec[2:]]
  rhs_dilation = tuple(rhs_dilation or (1,) * (nd - 2))
  if isinstance(padding, str):
    pads = [_conv_transpose_padding((k - 1) * d + 1, s, padding) for k, d, s in zip(kernel, rhs_dilation, strides)]
  else: pads = list(padding)
  if transpose_kernel:
    rhs = tnp.flip(rhs, tuple(dn.rhs_spec[2:]))
    rhs = tnp.swapaxes(rhs, dn.rhs_spec[0], dn.rhs_spec[1])
  return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, tuple(strides), rhs_dilation, dn,
                              precision=precision, preferred_element_type=preferred_element_type)


def reduce_window(operand: Any, init_value: Any, computation: Any, window_dimensions: Sequence[int],
                  window_strides: Sequence[int], padding: Padding, base_dilation: Optional[Sequence[int]] = None,
                  window_dilation: Optional[Sequence[int]] = None) -> Array:
  """Reduce each window with a standard monoid (lax.add, lax.max, lax.min, lax.mul); padding and base
  dilation holes hold `init_value`, which is also combined once into each window (lax's semantics).
  Average pooling is the 'add' window divided by the window size."""
  x = as_array(operand)
  kind = _monoid(computation, init_value)
  nd = x.ndim
  _check_lengths("reduce_window", nd, window_dimensions=window_dimensions, window_strides=window_strides,
                 base_dilation=base_dilation, window_dilation=window_dilation,
                 padding=None if isinstance(padding, str) else padding)
  base_dilation = tuple(base_dilation or (1,) * nd)
  window_dilation = tuple(window_dilation or (1,) * nd)
  dilated = [(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape, base_dilation)]
  effective = [(k - 1) * d + 1 for k, d in zip(window_dimensions, window_dilation)]
  pads = padtype_to_pads(dilated, effective, window_strides, padding) if isinstance(padding, str) else list(padding)
  init = as_array(init_value).astype(x.dtype)
  x = pad(x, init, [(lo, hi, d - 1) for (lo, hi), d in zip(pads, base_dilation)])
  win = _windows(x, 0, window_dimensions, window_strides, window_dilation)  # (O, K) per axis
  out = _reduce_by(win, kind, tuple(2 * a + 1 for a in range(nd)))
  combine = {"add": tnp.add, "mul": tnp.multiply, "max": tnp.maximum, "min": tnp.minimum}[kind]
  return combine(out, init).astype(x.dtype)
