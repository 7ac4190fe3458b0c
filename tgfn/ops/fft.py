"""`tnp.fft`: only the real-valued helpers. The transforms themselves need complex dtypes, which tgfn
does not have yet: asking for one raises NotImplementedError saying so."""
from __future__ import annotations

from typing import Any, Optional

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes, to_dtype
from tgfn.ops.creation import arange
from tgfn.ops.elementwise import where
from tgfn.ops.shape import roll

__all__ = ["fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_COMPLEX = {"fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
            "hfft", "ihfft"}


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None) -> Array:
  """The sample frequencies of an n-point FFT: [0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d * n)."""
  if int(n) <= 0: raise ValueError(f"fft.fftfreq: n must be positive, got {n}")
  n = int(n)
  k = arange(n)
  freq = where(k < (n + 1) // 2, k, k - n)
  return (freq.astype(to_dtype(dtype) if dtype is not None else dtypes.default_float)) / (d * n)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None) -> Array:
  """The sample frequencies of an n-point real FFT: [0, 1, ..., n//2] / (d * n)."""
  if int(n) <= 0: raise ValueError(f"fft.rfftfreq: n must be positive, got {n}")
  n = int(n)
  return arange(n // 2 + 1).astype(to_dtype(dtype) if dtype is not None else dtypes.default_float) / (d * n)


def _shifts(x: Array, axes: Any, sign: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
  axes = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
  return tuple(sign * (x.shape[a] // 2) for a in axes), axes


def fftshift(x: Any, axes: Any = None) -> Array:
  """Move the zero frequency to the centre: roll each axis by n // 2 (real-valued, so it exists)."""
  x = as_array(x)
  return roll(x, *_shifts(x, axes, 1))


def ifftshift(x: Any, axes: Any = None) -> Array:
  """The inverse of fftshift: roll each axis by -(n // 2)."""
  x = as_array(x)
  return roll(x, *_shifts(x, axes, -1))


def __getattr__(name: str) -> Optional[Any]:
  if name in _COMPLEX:
    raise NotImplementedError(f"tnp.fft.{name}: FFTs need complex dtypes, which tgfn does not support yet "
                              "(only fftfreq, rfftfreq, fftshift and ifftshift exist)")
  raise AttributeError(f"module 'tgfn.numpy.fft' has no attribute {name!r}")
