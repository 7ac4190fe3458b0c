"""Convolutions and windowed reductions: `conv_general_dilated`, `conv`, `conv_transpose`,
`reduce_window`, with JAX's dimension numbers and padding rules.

Both are written as window extraction plus a reduction. Each spatial axis of the padded input (of size P)
becomes two axes (O, K), the output position and the kernel tap, by movement ops only (`_window_axis`:
the axis tiled and re-read in rows of length P + d); a convolution is then one einsum of the windows with
the kernel, and a windowed reduction reduces the K axes. Input (lhs / base) dilation inserts zeros (or the
init value) between elements with interior padding; kernel (rhs / window) dilation is the tap spacing d.
A convolution's reverse mode is a rule (`conv_nchw`): its input gradient is another convolution.
"""
from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.lax.primitives import _interior, _monoid, _reduce_by, pad
from tgfn.ops.shape import _promoted
from tgfn.transforms.custom import custom_vjp_primal_jvp
from tgfn.uop.ops import Ops, UOp

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


def _window_axis(x: Array, ax: int, k: int, s: int, d: int) -> Array:
  """Axis `ax` of size n replaced by two axes (o, k) holding x[j * s + t * d] at [j, t], where
  o = (n - d (k - 1) - 1) // s + 1, from movement ops alone.

  The axis is tiled R times and re-read as k rows of length L = n + d: row t starts at t * L, which
  is t * d modulo n, so row t is x shifted by t * d (tinygrad's pooling trick). Taking every s-th of
  the first o * s columns of each row gives the windows. The axis is first padded at the end so that
  a row holds o * s columns (only matters when s > d k); the padding is never read."""
  n = x.shape[ax]
  o = (n - d * (k - 1) - 1) // s + 1
  if o < 1:
    raise ValueError(f"the (padded) input size {n} is smaller than the dilated kernel size "
                     f"{d * (k - 1) + 1}")
  pre, post = x.shape[:ax], x.shape[ax + 1:]
  full = lambda axis_shape: pre + axis_shape + post
  if n < o * s - d: x = tnp.pad(x, [(0, 0)] * len(pre) + [(0, o * s - d - n)] + [(0, 0)] * len(post))
  n = x.shape[ax]
  row = n + d
  repeats = -(-k * row // n)
  tiled = tnp.broadcast_to(x.reshape(full((1, n))), full((repeats, n))).reshape(full((repeats * n,)))
  keep = (slice(None),) * len(pre)
  rows = tiled[keep + (slice(0, k * row),)].reshape(full((k, row)))
  strided = rows[keep + (slice(None), slice(0, o * s))].reshape(full((k, o, s)))
  windows = strided[keep + (slice(None), slice(None), slice(0, 1))].reshape(full((k, o)))
  return tnp.swapaxes(windows, len(pre), len(pre) + 1)


def _windows(x: Array, first_axis: int, sizes: Sequence[int], strides: Sequence[int],
             dilations: Sequence[int]) -> Array:
  """Axes first_axis.. (sizes P) become (O, K) pairs: out[.., o, k, ..] = x[.., o*s + k*d, ..] (O may be 0)."""
  for i in reversed(range(len(sizes))):
    axis, k, s, d = first_axis + i, sizes[i], strides[i], dilations[i]
    if x.shape[axis] < (k - 1) * d + 1:  # no window fits
      x = Array.const(0, x.dtype, x.shape[:axis] + (0, k) + x.shape[axis + 1:])
    else: x = _window_axis(x, axis, k, s, d)
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
  c, (o, i) = x.shape[1], w.shape[:2]
  if c != i * groups or o % groups:
    raise ValueError(f"conv_general_dilated: lhs has {c} features, rhs {i} inputs and {o} outputs: need "
                     f"lhs features = rhs inputs * feature_group_count ({groups}) and outputs divisible by it")
  kernel = w.shape[2:]
  dilated = [(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[2:], lhs_dilation)]
  effective = [(k - 1) * d + 1 for k, d in zip(kernel, rhs_dilation)]
  pads = padtype_to_pads(dilated, effective, window_strides, padding) if isinstance(padding, str) else list(padding)
  out = conv_nchw(x, w, window_strides, pads, lhs_dilation, rhs_dilation, groups)
  out = tnp.transpose(out, tuple(np.argsort(dn.out_spec)))
  return out if preferred_element_type is None else out.astype(preferred_element_type)


# ---- the convolution in NC(spatial) / OI(spatial) layout, with its reverse-mode rule
def conv_nchw(x: Array, w: Array, strides: Sequence[int], pads: Sequence[tuple[int, int]],
              lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], groups: int) -> Array:
  """x (N, C, S...) and w (O, C // groups, K...) of one float dtype -> (N, O, OS...). `pads` are (low, high)
  per spatial axis (negative crops), applied after the lhs dilation. Shared by `conv_general_dilated` and
  `tgfn.nn.functional.conv2d`.

  Reverse mode does what XLA does rather than transposing the window gather (a reduction whose every
  element searches the windows that read it): the input's cotangent is itself a convolution, of the
  output's cotangent dilated by the strides with the kernel flipped and its in/out axes swapped
  (`_input_gradient`), and the kernel's cotangent is the windows of the input contracted with the
  output's cotangent (`_kernel_gradient`), both forward-style gathers. Forward mode and vmap go through
  the windowed definition (`custom_vjp_primal_jvp`). Inside the rule the convolutions are plain, so
  derivatives of the rule (grad of grad) are the automatic ones: correct, not tuned."""
  config = (tuple(strides), tuple((int(lo), int(hi)) for lo, hi in pads), tuple(lhs_dilation), tuple(rhs_dilation), groups)
  if _rule_depth.value: return _conv_by_windows(x, w, *config)
  return _conv_with_rule(*config)(x, w)


class _RuleDepth(threading.local):
  value = 0  # > 0 while a convolution's backward rule is being traced: convolutions there are plain


_rule_depth = _RuleDepth()


@functools.lru_cache(maxsize=256)
def _conv_with_rule(*config: Any) -> custom_vjp_primal_jvp:
  def conv(x: Array, w: Array) -> Array: return _conv_by_windows(x, w, *config)

  def fwd(x: Array, w: Array) -> tuple[Array, tuple[Array, Array]]: return conv(x, w), (x, w)

  def bwd(residuals: tuple[Array, Array], ct: Array) -> tuple[Array, Array]:
    x, w = residuals
    _rule_depth.value += 1
    try:
      return _input_gradient(ct, w, x.shape, *config), _kernel_gradient(ct, x, w.shape, *config)
    finally:
      _rule_depth.value -= 1

  rule = custom_vjp_primal_jvp(conv)
  rule.defvjp(fwd, bwd)
  return rule


def _zero_pad(x: Array, pads: Sequence[tuple[int, int]], dilation: Sequence[int]) -> Array:
  """Zeros between neighbours (dilation - 1) and (low, high) at the ends of each spatial axis (from axis 2
  on; negative crops), by movement ops alone."""
  for axis, d in enumerate(dilation, 2): x = _interior(x, axis, d - 1)
  grow = ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads)
  x = x._pad(grow) if any(g != (0, 0) for g in grow) else x
  keep = ((0, x.shape[0]), (0, x.shape[1])) + tuple((-min(lo, 0), n + min(hi, 0)) for (lo, hi), n in zip(pads, x.shape[2:]))
  if any(hi < lo for lo, hi in keep): raise ValueError(f"conv: negative padding {list(pads)} removes more than the input holds")
  return x._shrink(keep) if keep != tuple((0, n) for n in x.shape) else x


_LETTERS = "pqrstuvwxyzm"  # spatial outputs and taps; n g c f name the other axes


def _grouped_windows(x: Array, config: tuple, kernel: Sequence[int]) -> tuple[Array, str, str, str]:
  """The windows of the padded, dilated x as (N, G, C/G, (O K)...) and its einsum spec, with the letters
  of the output positions and of the taps."""
  strides, pads, lhs_dilation, rhs_dilation, groups = config
  n, c = x.shape[:2]
  win = _windows(_zero_pad(x, pads, lhs_dilation), 2, kernel, strides, rhs_dilation)  # N C (O K)...
  win = win._reshape((n, groups, c // groups) + win.shape[2:])
  nsp = len(kernel)
  outs, taps = _LETTERS[:nsp], _LETTERS[nsp:2 * nsp]
  return win, "ngc" + "".join(p + q for p, q in zip(outs, taps)), outs, taps


def _conv_by_windows(x: Array, w: Array, *config: Any) -> Array:
  """The definition: the windows (movement ops only) contracted with the kernel in one einsum."""
  groups = config[-1]
  n, (o, i), kernel = x.shape[0], w.shape[:2], w.shape[2:]
  win, spec_x, outs, taps = _grouped_windows(x, config, kernel)
  out = tnp.einsum(f"{spec_x},gfc{taps}->ngf{outs}", win, w._reshape((groups, o // groups, i) + kernel))
  return out._reshape((n, o) + out.shape[3:])


def _input_gradient(ct: Array, w: Array, x_shape: tuple[int, ...], strides: tuple[int, ...], pads: tuple,
                    lhs_dilation: tuple[int, ...], rhs_dilation: tuple[int, ...], groups: int) -> Array:
  """The cotangent of x, as stride-1 convolutions of ct ("sub-pixel" convolutions).

  Per spatial axis the padded input P is read at o*s + k*d, so dP[j] = sum over o*s + k*d = j of
  ct[o] w[k]. XLA computes that as a convolution of ct dilated by s (zeros between its elements) with
  the flipped kernel; here the phases are split instead, so that no zero is read and no index is
  divided: with j = s*m + r (0 <= r < s), dP[s*m + r] = sum over t of ct[m - t] * wd[s*t + r], wd being
  the kernel dilated by d (zeros between taps) and padded to U*s, U = (K-1)d // s + 1 taps per phase.
  The s phases become output channels of the convolution, with the kernel Wsub[r, u] = wd[s*(U-1-u) + r]
  (movement ops on w, copied once), and a reshape interleaves them back. Where s = 1 this is the usual
  flipped kernel with dilation d. x[i] sits at P[lo + i*ld]: the lhs dilation ld is a strided slice at
  the end. Groups: each group's (O/G, I) kernel becomes (I * phases, O/G). Without lhs dilation and with
  d = 1 on the strided axes, `_input_gradient_by_phase` runs each phase with only its own taps."""
  o, i, kernel = w.shape[0], w.shape[1], w.shape[2:]
  if ct.size == 0 or 0 in x_shape: return Array.const(0, ct.dtype, x_shape)
  nsp, og = len(kernel), o // groups
  sub = w._reshape((groups, og, i) + kernel)._permute((0, 2, 1) + tuple(range(3, 3 + nsp)))  # G I O/G K...
  phases, taps, sub_dilation, ct_pads, firsts = [], [], [], [], []
  for ax, (n, out, k, s, (lo, _), ld, d) in enumerate(zip(x_shape[2:], ct.shape[2:], kernel, strides, pads,
                                                           lhs_dilation, rhs_dilation)):
    axis = 3 + 2 * ax  # the axis of this kernel dimension; the phase axes of earlier ones sit before it
    if s == 1: u, dd, sub = k, d, tnp.flip(sub, axis)._reshape(sub.shape[:axis] + (1, k) + sub.shape[axis + 1:])
    else:
      u, dd = (k - 1) * d // s + 1, 1
      wd = _interior(sub, axis, d - 1)
      wd = wd._pad(tuple((0, u * s - wd.shape[axis]) if a == axis else (0, 0) for a in range(wd.ndim)))
      wd = wd._reshape(wd.shape[:axis] + (u, s) + wd.shape[axis + 1:])  # [t, r] = wd[s*t + r]
      sub = tnp.flip(tnp.swapaxes(wd, axis, axis + 1), axis + 1)      # [r, u] = wd[s*(U-1-u) + r]
    first, last = lo // s, (lo + (n - 1) * ld) // s  # the phase rows m that hold the needed j
    phases.append(s)
    taps.append(u)
    sub_dilation.append(dd)
    ct_pads.append(((u - 1) * dd - first, last + 1 - out))
    firsts.append(lo - s * first)
  # (G, I, s1, U1, s2, U2, ...) -> (G*I*s1*s2..., O/G, U1, U2, ...)
  phase_axes, tap_axes = tuple(3 + 2 * a for a in range(nsp)), tuple(4 + 2 * a for a in range(nsp))
  sub = sub._permute((0, 1) + phase_axes + (2,) + tap_axes)
  # a buffer of its own (it is small): read through the views inside the contraction's loops, each tap
  # would cost a chain of divisions. Copied before the axes merge, so that the copy divides nothing either.
  sub = Array(UOp(Ops.CONTIGUOUS, sub.dtype, (sub.uop,)))
  c = groups * i
  if all(ld == 1 for ld in lhs_dilation) and all(s == 1 or d == 1 for s, d in zip(strides, rhs_dilation)):
    return _input_gradient_by_phase(ct, sub, x_shape, kernel, strides, pads, sub_dilation, groups)
  sub = sub._reshape((c * int(np.prod(phases)), og) + tuple(taps))
  dp = conv_nchw(ct, sub, (1,) * nsp, ct_pads, (1,) * nsp, sub_dilation, groups)  # N (C s...) M...
  rows = dp.shape[2:]
  dp = dp._reshape((dp.shape[0], c) + tuple(phases) + rows)
  dp = dp._permute((0, 1) + tuple(a for ax in range(nsp) for a in (2 + nsp + ax, 2 + ax)))  # N C (M s)...
  dp = dp._reshape((dp.shape[0], c) + tuple(m * s for m, s in zip(rows, phases)))
  keep = tuple(slice(e, e + (n - 1) * ld + 1, ld) for e, n, ld in zip(firsts, x_shape[2:], lhs_dilation))
  return dp[(slice(None), slice(None)) + keep]


def _input_gradient_by_phase(ct: Array, sub: Array, x_shape: tuple[int, ...], kernel: Sequence[int],
                             strides: tuple[int, ...], pads: tuple, sub_dilation: Sequence[int], groups: int) -> Array:
  """`_input_gradient` without the taps a phase never uses (no rhs dilation on a strided axis, no lhs
  dilation): one convolution per combination of phases of the input's positions, each with only its own
  taps (a slice of the rearranged kernel `sub`, (G, I, s..., O/G, U...)), and only the rows it needs,
  stacked and interleaved back by a reshape. A 3x3 stride-2 kernel then multiplies 9 taps per 4 inputs,
  not 16."""
  nsp = len(strides)
  g, i, og, full = sub.shape[0], sub.shape[1], sub.shape[2 + nsp], sub.shape[3 + nsp:]
  n_batch, c = ct.shape[0], g * i
  rows = tuple(-(-n // s) for n, s in zip(x_shape[2:], strides))  # positions per phase, the first phase's
  parts = []
  for phase in itertools.product(*(range(s) for s in strides)):
    select, ct_pads, counts = [], [], []
    for n, out, k, s, (lo, _), ph, u_all, dd in zip(x_shape[2:], ct.shape[2:], kernel, strides, pads, phase, full,
                                                    sub_dilation):
      r, first = (lo + ph) % s, (lo + ph) // s  # x[ph + s*q] sits at P[s*(first + q) + r]
      count = len(range(ph, n, s))               # the positions q of this phase
      used = len(range(r, k, s))                 # its taps k = r + s*t (d = 1 where s > 1)
      select.append((r, u_all - used))
      counts.append((count, used))
      low = (used - 1) * dd - first  # reads ct[first + q - t*dd] for t < used, flipped into a correlation
      ct_pads.append((low, count + (used - 1) * dd - out - low))
    if any(u == 0 for _, u in counts) or any(q == 0 for q, _ in counts):  # no tap reaches it, or no position
      parts.append(Array.const(0, ct.dtype, (n_batch, c) + rows))
      continue
    index = (slice(None), slice(None)) + tuple(slice(r, r + 1) for r, _ in select) + (slice(None),) + \
      tuple(slice(start, None) for _, start in select)
    own_taps = sub[index]._reshape((g * i, og) + tuple(u for _, u in counts))
    part = conv_nchw(ct, own_taps, (1,) * nsp, ct_pads, (1,) * nsp, sub_dilation, groups)
    if all(s == 1 for s in strides): return part  # one phase: nothing to interleave
    # a buffer of its own: inlined into the interleaving below, its reduction would run at every position
    part = Array(UOp(Ops.CONTIGUOUS, part.dtype, (part.uop,)))
    parts.append(part._pad(((0, 0), (0, 0)) + tuple((0, m - q) for m, (q, _) in zip(rows, counts))))
  # (phases..., N, C, Q...) -> (N, C, Q1, s1, Q2, s2, ...) -> (N, C, Q1*s1, ...), cut to the input's size
  stacked = tnp.stack(parts)._reshape(tuple(strides) + (n_batch, c) + rows)
  stacked = stacked._permute((nsp, nsp + 1) + tuple(a for ax in range(nsp) for a in (nsp + 2 + ax, ax)))
  stacked = stacked._reshape((n_batch, c) + tuple(m * s for m, s in zip(rows, strides)))
  return stacked._shrink(((0, n_batch), (0, c)) + tuple((0, n) for n in x_shape[2:]))


def _kernel_gradient(ct: Array, x: Array, w_shape: tuple[int, ...], *config: Any) -> Array:
  """The cotangent of w: the windows of the padded input contracted with ct over the batch and the
  output positions."""
  groups = config[-1]
  n, (o, i), kernel = x.shape[0], w_shape[:2], w_shape[2:]
  win, spec_x, outs, taps = _grouped_windows(x, config, kernel)
  ct = ct._reshape((n, groups, o // groups) + ct.shape[2:])
  dw = tnp.einsum(f"{spec_x},ngf{outs}->gfc{taps}", win, ct)
  return dw._reshape(tuple(w_shape))


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
