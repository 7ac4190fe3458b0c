"""`tnp.fft`: discrete Fourier transforms, run on the host by NumPy's pocketfft (as JAX runs ducc on the
CPU), one HOST node per axis transformed (tgfn/ops/host.py).

Three one-axis host functions do all the work, each over the last axis: `fft_c2c` (fft, ifft), `fft_r2c`
(rfft) and `fft_c2r` (irfft). The n-dimensional transforms apply them axis by axis, as NumPy does; `n=`/
`s=` crop or zero-pad the input first, and the transformed axis is moved last and back (movement ops).
Derivatives are JAX's: the transforms are linear, so the JVP transforms the tangent, and the VJP is the
transpose (not the conjugate transpose: JAX's convention for complex cotangents). The DFT matrix is
symmetric, so fft and ifft are their own transposes (with the same norm); rfft's is the real part of
the fft of the zero-padded cotangent, and irfft's the conjugate of a weighted rfft, the weights 2 on the
bins that stand for two (a bin k and its mirror n-k) and 1 on the DC and Nyquist bins.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from tgfn.array import Array, as_array, device_put
from tgfn.dtype import complex_dtype, dtypes, real_dtype, to_dtype
from tgfn.ops.creation import arange
from tgfn.ops.elementwise import where
from tgfn.ops.host import HostFunction, host_call, register
from tgfn.ops.shape import moveaxis, roll

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

Sizes = Optional[Sequence[int]]   # s= and axes= of the n-dimensional transforms
Norm = Optional[str]
_NORMS = ("backward", "ortho", "forward")
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


# ---- the host functions (each over the last axis)
def _c2c_jvp(inputs: list[Array], outs: list[Array], tangents: list[Optional[Array]], *, inverse: bool,
             norm: str) -> list[Optional[Array]]:
  return [None if tangents[0] is None else host_call("fft_c2c", [tangents[0]], inverse=inverse, norm=norm)[0]]


def _c2c_vjp(inputs: list[Array], outs: list[Array], cts: list[Array], *, inverse: bool, norm: str) -> list[Array]:
  return host_call("fft_c2c", [cts[0]], inverse=inverse, norm=norm)  # the DFT matrix is symmetric


def _r2c_jvp(inputs: list[Array], outs: list[Array], tangents: list[Optional[Array]], *,
             norm: str) -> list[Optional[Array]]:
  return [None if tangents[0] is None else host_call("fft_r2c", [tangents[0]], norm=norm)[0]]


def _r2c_vjp(inputs: list[Array], outs: list[Array], cts: list[Array], *, norm: str) -> list[Array]:
  """rfft keeps the first n//2 + 1 bins of the full transform of a real input: the transpose pads the
  cotangent back to n bins, transforms it, and keeps the real part (the transpose of real -> complex)."""
  from tgfn.ops.complex_math import real
  n, ct = inputs[0].shape[-1], cts[0]
  padded = ct._pad(((0, 0),) * (ct.ndim - 1) + ((0, n - ct.shape[-1]),))
  return [real(host_call("fft_c2c", [padded], inverse=False, norm=norm)[0])]


def _c2r_jvp(inputs: list[Array], outs: list[Array], tangents: list[Optional[Array]], *, n: int,
             norm: str) -> list[Optional[Array]]:
  return [None if tangents[0] is None else host_call("fft_c2r", [tangents[0]], n=n, norm=norm)[0]]


def _c2r_vjp(inputs: list[Array], outs: list[Array], cts: list[Array], *, n: int, norm: str) -> list[Array]:
  """irfft reads bin k (0 < k < n/2) twice, as itself and as its mirror: the transpose weighs those bins
  by 2, and conjugates (JAX's convention). The scale of irfft's norm is the rfft's of the swapped norm."""
  from tgfn.ops.complex_math import conj
  spectrum = host_call("fft_r2c", [cts[0]], norm=_SWAPPED[norm])[0]
  m = spectrum.shape[-1]
  k = arange(m)
  weights = where((k == 0) | ((k == m - 1) & (n % 2 == 0)), 1.0, 2.0).astype(real_dtype(spectrum.dtype))
  return [conj(spectrum * weights.astype(spectrum.dtype))]


register(HostFunction("fft_c2c", (1,),
                      lambda x, inverse, norm: ((np.fft.ifft if inverse else np.fft.fft)(x, axis=-1, norm=norm),),
                      lambda s, inverse, norm: [s[0]], _c2c_jvp, _c2c_vjp))
register(HostFunction("fft_r2c", (1,), lambda x, norm: (np.fft.rfft(x, axis=-1, norm=norm),),
                      lambda s, norm: [(s[0][-1] // 2 + 1,)], _r2c_jvp, _r2c_vjp, complex_dtype))
register(HostFunction("fft_c2r", (1,), lambda x, n, norm: (np.fft.irfft(x, n, axis=-1, norm=norm),),
                      lambda s, n, norm: [(n,)], _c2r_jvp, _c2r_vjp, real_dtype))


# ---- argument handling
def _norm(norm: Optional[str]) -> str:
  if norm is None: return "backward"
  if norm not in _NORMS: raise ValueError(f"fft: norm must be one of {_NORMS} or None, got {norm!r}")
  return norm


def _complex_input(a: Any) -> Array:
  x = as_array(a)
  return x.astype(complex_dtype(x.dtype))


def _real_input(name: str, a: Any) -> Array:
  x = as_array(a)
  if x.dtype.is_complex: raise TypeError(f"fft.{name} needs a real input, got {x.dtype.name} (use fft.fft)")
  return x.astype(dtypes.float64 if x.dtype is dtypes.float64 else dtypes.float32)


def _axis(name: str, x: Array, axis: int) -> int:
  if x.ndim == 0: raise ValueError(f"fft.{name} needs an array with at least one axis, got a 0-d array")
  if not -x.ndim <= axis < x.ndim: raise ValueError(f"fft.{name}: axis {axis} is out of range for shape {x.shape}")
  return axis % x.ndim


def _resize(name: str, x: Array, axis: int, n: int) -> Array:
  """x cropped or zero-padded to length n along axis (the `n=` of every transform)."""
  if n < 1: raise ValueError(f"fft.{name}: invalid number of data points ({n}); it must be at least 1")
  have = x.shape[axis]
  if n < have: return x._shrink(tuple((0, n if k == axis else d) for k, d in enumerate(x.shape)))
  return x._pad(tuple((0, n - have if k == axis else 0) for k in range(x.ndim)))


def _along(x: Array, axis: int, name: str, **params: Any) -> Array:
  """The host function `name` applied along `axis`."""
  moved = moveaxis(x, axis, -1)
  return moveaxis(host_call(name, [moved], **params)[0], -1, axis)


def _one_axis(name: str, x: Array, n: Optional[int], axis: int) -> tuple[Array, int]:
  axis = _axis(name, x, axis)
  return _resize(name, x, axis, x.shape[axis] if n is None else int(n)), axis


# ---- one axis
def fft(a: Any, n: Optional[int] = None, axis: int = -1, norm: Norm = None) -> Array:
  """The discrete Fourier transform along `axis` (complex output: complex64, or complex128 for float64)."""
  x, axis = _one_axis("fft", _complex_input(a), n, axis)
  return _along(x, axis, "fft_c2c", inverse=False, norm=_norm(norm))


def ifft(a: Any, n: Optional[int] = None, axis: int = -1, norm: Norm = None) -> Array:
  """The inverse discrete Fourier transform along `axis`."""
  x, axis = _one_axis("ifft", _complex_input(a), n, axis)
  return _along(x, axis, "fft_c2c", inverse=True, norm=_norm(norm))


def rfft(a: Any, n: Optional[int] = None, axis: int = -1, norm: Norm = None) -> Array:
  """The transform of a real input along `axis`: its n//2 + 1 non-negative frequency bins."""
  x, axis = _one_axis("rfft", _real_input("rfft", a), n, axis)
  return _along(x, axis, "fft_r2c", norm=_norm(norm))


def irfft(a: Any, n: Optional[int] = None, axis: int = -1, norm: Norm = None) -> Array:
  """The inverse of rfft: a real signal of length n (default 2 * (bins - 1)) from its non-negative bins.
  As NumPy, the imaginary parts of the DC bin (and of the Nyquist bin for even n) are ignored."""
  x = _complex_input(a)
  axis = _axis("irfft", x, axis)
  n = 2 * (x.shape[axis] - 1) if n is None else int(n)
  if n < 1: raise ValueError(f"fft.irfft: invalid number of data points ({n}); it must be at least 1")
  x = _resize("irfft", x, axis, n // 2 + 1)
  return _along(x, axis, "fft_c2r", n=n, norm=_norm(norm))


# ---- several axes, one at a time
def _axes_and_sizes(name: str, x: Array, s: Sizes, axes: Sizes) -> tuple[list[int], list[Optional[int]]]:
  if axes is None: axes = list(range(x.ndim))[-len(s):] if s is not None else list(range(x.ndim))
  axes = [_axis(name, x, a) for a in axes]
  if len(set(axes)) != len(axes): raise ValueError(f"fft.{name}: repeated axes {axes}")
  if s is not None and len(s) != len(axes):
    raise ValueError(f"fft.{name}: s {tuple(s)} and axes {axes} differ in length")
  return axes, list(s) if s is not None else [None] * len(axes)


def fftn(a: Any, s: Sizes = None, axes: Sizes = None, norm: Norm = None) -> Array:
  """The n-dimensional transform over `axes` (default all), each cropped or padded to `s`."""
  x = _complex_input(a)
  axes_, sizes = _axes_and_sizes("fftn", x, s, axes)
  for axis, n in zip(reversed(axes_), reversed(sizes)): x = fft(x, n, axis, norm)
  return x


def ifftn(a: Any, s: Sizes = None, axes: Sizes = None, norm: Norm = None) -> Array:
  x = _complex_input(a)
  axes_, sizes = _axes_and_sizes("ifftn", x, s, axes)
  for axis, n in zip(reversed(axes_), reversed(sizes)): x = ifft(x, n, axis, norm)
  return x


def rfftn(a: Any, s: Sizes = None, axes: Sizes = None, norm: Norm = None) -> Array:
  """rfft over the last of `axes`, then fft over the others."""
  x = _real_input("rfftn", a)
  axes_, sizes = _axes_and_sizes("rfftn", x, s, axes)
  x = rfft(x, sizes[-1], axes_[-1], norm)
  for axis, n in zip(reversed(axes_[:-1]), reversed(sizes[:-1])): x = fft(x, n, axis, norm)
  return x


def irfftn(a: Any, s: Sizes = None, axes: Sizes = None, norm: Norm = None) -> Array:
  """ifft over all of `axes` but the last, then irfft over the last (its length s[-1], default
  2 * (bins - 1))."""
  x = _complex_input(a)
  axes_, sizes = _axes_and_sizes("irfftn", x, s, axes)
  for axis, n in zip(axes_[:-1], sizes[:-1]): x = ifft(x, n, axis, norm)
  return irfft(x, sizes[-1], axes_[-1], norm)


def fft2(a: Any, s: Sizes = None, axes: Sequence[int] = (-2, -1), norm: Norm = None) -> Array:
  return fftn(a, s, axes, norm)


def ifft2(a: Any, s: Sizes = None, axes: Sequence[int] = (-2, -1), norm: Norm = None) -> Array:
  return ifftn(a, s, axes, norm)


def rfft2(a: Any, s: Sizes = None, axes: Sequence[int] = (-2, -1), norm: Norm = None) -> Array:
  return rfftn(a, s, axes, norm)


def irfft2(a: Any, s: Sizes = None, axes: Sequence[int] = (-2, -1), norm: Norm = None) -> Array:
  return irfftn(a, s, axes, norm)


# ---- Hermitian transforms: the spectrum's half in, a real signal out (hfft), and back (ihfft)
_SWAPPED_NORM = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _swapped(norm: Norm) -> str:
  if norm not in _SWAPPED_NORM: raise ValueError(f"fft: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
  return _SWAPPED_NORM[norm]


def hfft(a: Any, n: Optional[int] = None, axis: int = -1, norm: Norm = None) -> Array:
  """The transform of a signal with a Hermitian-symmetric spectrum given by its first half: real, of
  length n (default 2 * (len - 1)). It is irfft of the conjugate with the scale of the swapped norm."""
  from tgfn.ops.complex_math import conj
  return irfft(conj(_complex_input(a)), n, axis, _swapped(norm))


def ihfft(a: Any, n: Optional[int] = None, axis: int = -1, norm: Norm = None) -> Array:
  """The inverse of hfft: the n//2 + 1 first bins of a real signal's Hermitian spectrum."""
  from tgfn.ops.complex_math import conj
  return conj(rfft(a, n, axis, _swapped(norm)))


# ---- frequencies and shifts
def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Optional[str] = None) -> Array:
  """The sample frequencies of an n-point FFT: [0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d * n)."""
  if int(n) <= 0: raise ValueError(f"fft.fftfreq: n must be positive, got {n}")
  n = int(n)
  k = arange(n)
  freq = where(k < (n + 1) // 2, k, k - n)
  return _placed((freq.astype(to_dtype(dtype) if dtype is not None else dtypes.default_float)) / (d * n), device)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Optional[str] = None) -> Array:
  """The sample frequencies of an n-point real FFT: [0, 1, ..., n//2] / (d * n)."""
  if int(n) <= 0: raise ValueError(f"fft.rfftfreq: n must be positive, got {n}")
  n = int(n)
  return _placed(arange(n // 2 + 1).astype(to_dtype(dtype) if dtype is not None else dtypes.default_float) / (d * n), device)


def _placed(x: Array, device: Optional[str]) -> Array:
  return x if device is None else device_put(x, device)


def _shifts(x: Array, axes: Any, sign: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
  axes = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
  return tuple(sign * (x.shape[a] // 2) for a in axes), axes


def fftshift(x: Any, axes: Any = None) -> Array:
  """Move the zero frequency to the centre: roll each axis by n // 2."""
  x = as_array(x)
  return roll(x, *_shifts(x, axes, 1))


def ifftshift(x: Any, axes: Any = None) -> Array:
  """The inverse of fftshift: roll each axis by -(n // 2)."""
  x = as_array(x)
  return roll(x, *_shifts(x, axes, -1))


from tgfn.viz.locations import name_the_user_line_in  # noqa: E402  (last: wraps what is defined above)
name_the_user_line_in(globals())
