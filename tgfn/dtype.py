"""Data types and JAX's type-promotion lattice.

A `DType` is a small frozen record; every dtype is a module-level singleton, so `is` and `==` agree.
Promotion follows JAX: a lattice where Python scalars are *weakly typed* (`int32_array * 2.0` is
float32, `uint8_array + 1` is uint8) and mixed signed/unsigned ints widen instead of going to float.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfn.package_check import check_tgfn_not_shadowed

check_tgfn_not_shadowed()


@dataclass(frozen=True, eq=False)
class DType:
  name: str
  itemsize: int
  kind: str          # 'b' bool, 'i' signed int, 'u' unsigned int, 'f' float, 'c' complex (interleaved re, im)
  cname: str         # the C spelling; bfloat16 is stored as its bit pattern (uint16) in memory
  count: int = 1     # lanes: > 1 for the vector dtypes kernels use after vectorization (never in buffers)

  def __repr__(self) -> str: return f"dtypes.{self.name}" if self.count == 1 else f"dtypes.{self.scalar().name}.vec({self.count})"

  def vec(self, count: int) -> DType:
    """The `count`-lane vector of this scalar dtype (one object per (dtype, count), so `is` still works)."""
    assert self.count == 1, f"{self} is already a vector"
    if count == 1: return self
    key = (self.name, count)
    if key not in _VECTORS:
      _VECTORS[key] = DType(f"{self.name}x{count}", self.itemsize, self.kind, f"tg_{self.name}x{count}", count)
    return _VECTORS[key]

  def __call__(self, value: Any) -> Any:
    """`tnp.float32(3.0)`: the value as an Array of this dtype (0-d for a scalar), as jnp's scalar types."""
    if self.count != 1: raise TypeError(f"the vector dtype {self!r} is not a constructor")
    from tgfn.ops.creation import asarray
    return asarray(value, self)

  def scalar(self) -> DType: return self if self.count == 1 else _BY_NAME[self.name.rsplit("x", 1)[0]]
  def _repr_pretty_(self, p: Any, cycle: bool) -> None: p.text(repr(self))  # pretty printers (hypothesis)
  def __reduce__(self): return (dtype_from_name, (self.name,))

  @property
  def is_float(self) -> bool: return self.kind == "f"
  @property
  def is_int(self) -> bool: return self.kind in "iu"
  @property
  def is_unsigned(self) -> bool: return self.kind == "u"
  @property
  def is_bool(self) -> bool: return self.kind == "b"
  @property
  def is_complex(self) -> bool: return self.kind == "c"
  @property
  def is_inexact(self) -> bool:
    """Float or complex: the dtypes transforms differentiate."""
    return self.kind in "fc"
  @property
  def bits(self) -> int: return self.itemsize * 8

  @property
  def np(self) -> np.dtype:
    """The NumPy dtype used to hold this dtype's values in host memory (bfloat16: its uint16 bits)."""
    return np.dtype("uint16") if self is dtypes.bfloat16 else np.dtype(self.name)

  @property
  def min(self) -> Any:
    if self.is_bool: return False
    if self.is_int: return 0 if self.is_unsigned else -(1 << (self.bits - 1))
    return -float("inf")

  @property
  def max(self) -> Any:
    if self.is_bool: return True
    if self.is_int: return (1 << self.bits) - 1 if self.is_unsigned else (1 << (self.bits - 1)) - 1
    return float("inf")


class dtypes:
  bool = DType("bool", 1, "b", "_Bool")
  int8 = DType("int8", 1, "i", "signed char")
  int16 = DType("int16", 2, "i", "short")
  int32 = DType("int32", 4, "i", "int")
  int64 = DType("int64", 8, "i", "long long")
  uint8 = DType("uint8", 1, "u", "unsigned char")
  uint16 = DType("uint16", 2, "u", "unsigned short")
  uint32 = DType("uint32", 4, "u", "unsigned int")
  uint64 = DType("uint64", 8, "u", "unsigned long long")
  float16 = DType("float16", 2, "f", "_Float16")
  bfloat16 = DType("bfloat16", 2, "f", "unsigned short")
  float32 = DType("float32", 4, "f", "float")
  float64 = DType("float64", 8, "f", "double")
  # complex values never reach a renderer (tgfn/codegen/complex_lower.py makes them pairs of reals): the
  # C spelling is the real part's, which is how kernels see a complex buffer
  complex64 = DType("complex64", 8, "c", "float")
  complex128 = DType("complex128", 16, "c", "double")
  # the dtype of index arithmetic inside kernels: 64 bits, so sizes and offsets past 2**31 never wrap
  index = int64
  default_float = float32
  default_int = int32
  default_complex = complex64


ALL_DTYPES: tuple[DType, ...] = (dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
                                 dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64,
                                 dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
# kept apart: ALL_DTYPES are the real dtypes every op takes (fuzzers, serializers iterate over them)
COMPLEX_DTYPES: tuple[DType, ...] = (dtypes.complex64, dtypes.complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES + COMPLEX_DTYPES}
# the IEEE-754 layout of the float types whose bits ops build or read (2^n from the exponent field, frexp):
# (the same-size integer type the bits are handled in, explicit mantissa bits, exponent bias)
FLOAT_LAYOUT: dict[DType, tuple[DType, int, int]] = {dtypes.float32: (dtypes.int32, 23, 127),
                                                     dtypes.float64: (dtypes.int64, 52, 1023)}
_VECTORS: dict[tuple[str, int], DType] = {}


def dtype_from_name(name: str) -> DType:
  if name in _BY_NAME: return _BY_NAME[name]
  base, count = name.rsplit("x", 1)  # a vector dtype, e.g. float32x8
  return _BY_NAME[base].vec(int(count))


def _at_user_line() -> str:
  from tgfn.viz.locations import at_user_line  # imported late: tgfn.viz imports this module
  return at_user_line()


def to_dtype(x: Any) -> DType:
  """Accept a DType, a NumPy dtype or type, a name ('float32'), or the Python types bool/int/float."""
  if isinstance(x, DType): return x
  if x is bool: return dtypes.bool
  if x is int: return dtypes.default_int
  if x is float: return dtypes.default_float
  if x is complex: return dtypes.default_complex
  if isinstance(x, str) and x in _BY_NAME: return _BY_NAME[x]
  name = getattr(x, "name", None) or getattr(x, "__name__", None)
  if name in _BY_NAME: return _BY_NAME[name]
  try:
    npd = np.dtype(x)
  except TypeError:
    raise TypeError(f"expected a dtype (e.g. tgfn.float32, 'int32', np.uint8), got {x!r}{_at_user_line()}") from None
  if npd.name not in _BY_NAME:
    raise TypeError(f"dtype {npd.name} is not supported; supported: {', '.join(_BY_NAME)}{_at_user_line()}")
  return _BY_NAME[npd.name]


# ---- promotion: JAX's lattice. 'i*', 'f*' and 'c*' are the weak types of Python int, float and complex scalars.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"
_LATTICE: dict[Any, tuple[Any, ...]] = {
  dtypes.bool: (_WEAK_INT,),
  _WEAK_INT: (dtypes.uint8, dtypes.int8),
  dtypes.uint8: (dtypes.uint16, dtypes.int16),
  dtypes.uint16: (dtypes.uint32, dtypes.int32),
  dtypes.uint32: (dtypes.uint64, dtypes.int64),
  dtypes.uint64: (_WEAK_FLOAT,),
  dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,), dtypes.int32: (dtypes.int64,),
  dtypes.int64: (_WEAK_FLOAT,),
  _WEAK_FLOAT: (dtypes.bfloat16, dtypes.float16, _WEAK_COMPLEX),
  dtypes.bfloat16: (dtypes.float32,), dtypes.float16: (dtypes.float32,),
  dtypes.float32: (dtypes.float64, dtypes.complex64), dtypes.float64: (dtypes.complex128,),
  _WEAK_COMPLEX: (dtypes.complex64,), dtypes.complex64: (dtypes.complex128,), dtypes.complex128: (),
}


@functools.cache
def _upper_bounds(node: Any) -> frozenset:
  return frozenset({node}).union(*(_upper_bounds(n) for n in _LATTICE[node]))


@functools.cache
def _join(a: Any, b: Any) -> Any:
  common = _upper_bounds(a) & _upper_bounds(b)
  # the least upper bound is the common node whose own upper set holds every other common node
  return next(n for n in common if _upper_bounds(n) >= common)


def _lattice_node(x: Any) -> Any:
  if isinstance(x, DType): return x
  if isinstance(x, bool) or x is bool: return dtypes.bool
  if isinstance(x, int) or x is int: return _WEAK_INT
  if isinstance(x, float) or x is float: return _WEAK_FLOAT
  if isinstance(x, complex) or x is complex: return _WEAK_COMPLEX
  return to_dtype(x)


def result_type(*args: Any) -> DType:
  """The dtype of an operation on `args`: DTypes, or Python scalars (weakly typed), as in JAX."""
  if not args: raise TypeError("result_type needs at least one argument")
  node = functools.reduce(_join, (_lattice_node(a) for a in args))
  if node == _WEAK_INT: return dtypes.default_int
  if node == _WEAK_FLOAT: return dtypes.default_float
  if node == _WEAK_COMPLEX: return dtypes.default_complex
  return node


def sum_dtype(dt: DType) -> DType:
  """Accumulation dtype of sum/prod/cumsum, as in JAX: small ints widen to 32 bits, bool counts as int."""
  if dt.is_bool: return dtypes.default_int
  if dt.kind == "i" and dt.itemsize < 4: return dtypes.int32
  if dt.kind == "u" and dt.itemsize < 4: return dtypes.uint32
  return dt


def float_dtype(dt: DType) -> DType:
  """The inexact dtype an op like exp or mean produces from `dt` (ints and bools become float32; complex stays)."""
  return dt if dt.is_inexact else dtypes.default_float


_REAL_OF = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def real_dtype(dt: DType) -> DType:
  """The dtype of a complex dtype's real and imaginary parts (complex64 -> float32); other dtypes as they are."""
  return _REAL_OF.get(dt, dt)


def complex_dtype(dt: DType) -> DType:
  """The complex dtype holding `dt`'s values, as JAX: float64 -> complex128, everything else -> complex64."""
  if dt.is_complex: return dt
  return _COMPLEX_OF.get(dt, dtypes.complex64)
