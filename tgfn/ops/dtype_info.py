"""`finfo` and `iinfo`: the limits of tgfn's float and integer dtypes (bfloat16 and float16 included),
computed from each format's mantissa and exponent widths, so no NumPy extension type is needed."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tgfn.array import Array
from tgfn.dtype import DType, dtypes, real_dtype, to_dtype

__all__ = ["finfo", "iinfo"]

# (mantissa bits without the implicit one, exponent bits) of each IEEE-style binary format
_FORMATS = {dtypes.float16: (10, 5), dtypes.bfloat16: (7, 8), dtypes.float32: (23, 8), dtypes.float64: (52, 11)}


@dataclass(frozen=True)
class finfo_result:
  """As numpy.finfo, with `dtype` a tgfn DType and every limit a Python float (exact in the dtype)."""
  dtype: DType
  bits: int
  nmant: int
  nexp: int
  eps: float
  epsneg: float
  max: float
  min: float
  tiny: float
  smallest_normal: float
  smallest_subnormal: float
  precision: int
  resolution: float
  machep: int
  negep: int
  minexp: int
  maxexp: int


@dataclass(frozen=True)
class iinfo_result:
  dtype: DType
  bits: int
  min: int
  max: int
  kind: str


def _dtype_of(x: Any) -> DType:
  """The dtype itself, or the dtype of an array (tgfn or NumPy)."""
  if isinstance(x, Array): return x.dtype
  if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, type): return to_dtype(x.dtype)
  return to_dtype(x)


def _round_to_bits(x: float, nmant: int) -> float:
  """x rounded to nmant + 1 significant bits (half to even), as the dtype stores it."""
  m, e = math.frexp(x)
  return math.ldexp(round(math.ldexp(m, nmant + 1)), e - nmant - 1)


def finfo(dtype: Any) -> finfo_result:
  """Limits of a float dtype (or of an array's dtype); a complex dtype's are its parts', as NumPy's."""
  dt = real_dtype(_dtype_of(dtype))
  if dt not in _FORMATS: raise TypeError(f"finfo needs a float dtype (float16, bfloat16, float32, float64), got {dt.name}")
  nmant, nexp = _FORMATS[dt]
  max_exp = 2 ** (nexp - 1)             # 2**max_exp is the first power of two that overflows
  biggest = math.ldexp(2.0 - 2.0 ** -nmant, max_exp - 1)
  tiny = math.ldexp(1.0, 2 - max_exp)
  precision = int(nmant * math.log10(2))
  return finfo_result(dt, dt.bits, nmant, nexp, 2.0 ** -nmant, 2.0 ** (-nmant - 1), biggest, -biggest, tiny, tiny,
                      math.ldexp(tiny, -nmant), precision, _round_to_bits(10.0 ** -precision, nmant), -nmant, -nmant - 1, 2 - max_exp,
                      max_exp)


def iinfo(dtype: Any) -> iinfo_result:
  """Limits of an integer dtype (or of an array's dtype)."""
  dt = _dtype_of(dtype)
  if not dt.is_int: raise TypeError(f"iinfo needs an integer dtype, got {dt.name}")
  return iinfo_result(dt, dt.bits, dt.min, dt.max, dt.kind)
