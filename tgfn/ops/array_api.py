"""The Python array API standard (2024.12) on tgfn.numpy: the standard's spellings beside NumPy's, its
inspection namespace, and the functions NumPy names differently or tgfn lacked (`copysign`,
`nextafter`, `signbit`, `cumulative_sum`/`cumulative_prod`, `unique_*`, `tril`/`triu`, `diff`,
`meshgrid`, `count_nonzero`, `nonzero`, `unstack`, `vecdot`, `matrix_transpose`, `isdtype`,
`can_cast`). `real`, `imag` and `conj` are tgfn/ops/complex_math.py's. Functions with data-dependent shapes (`unique_*`, `nonzero`) need concrete values, as
boolean masks do (docs/numpy.md); under jit they raise ConcretizationError."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np

from tgfn.array import Array, as_array
from tgfn.device import Device
from tgfn.dtype import ALL_DTYPES, COMPLEX_DTYPES, DType, dtypes, to_dtype
from tgfn.dtype import result_type as _promote
from tgfn.ops.creation import asarray, zeros
from tgfn.ops.elementwise import invert, left_shift, power, right_shift, where
from tgfn.ops.linalg_decomp import vecdot  # noqa: F401  (one vecdot for tnp and tnp.linalg)
from tgfn.ops.shape import concatenate, moveaxis, reshape, swapaxes, transpose
from tgfn.transforms.custom import derivatives
from tgfn.uop.ops import Ops, UOp

__all__ = ["__array_namespace_info__", "acos", "asin", "atan", "atan2", "acosh", "asinh", "atanh", "pow",
           "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift", "concat", "permute_dims",
           "matrix_transpose", "vecdot", "signbit", "copysign", "nextafter",
           "unique_all", "unique_counts", "unique_inverse", "unique_values",
           "isdtype", "can_cast", "result_type", "unstack", "from_dlpack"]

pow = power
bitwise_invert, bitwise_left_shift, bitwise_right_shift = invert, left_shift, right_shift
_UINT = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


# ---- the standard's names for the inverse trigonometric functions (NumPy's arc* names, tgfn/ops)
def _numpy_function(name: str) -> Any:
  import tgfn.numpy as tnp
  return getattr(tnp, name)


def acos(x: Any) -> Array: return _numpy_function("arccos")(x)
def asin(x: Any) -> Array: return _numpy_function("arcsin")(x)
def atan(x: Any) -> Array: return _numpy_function("arctan")(x)
def atan2(x1: Any, x2: Any) -> Array: return _numpy_function("arctan2")(x1, x2)
def acosh(x: Any) -> Array: return _numpy_function("arccosh")(x)
def asinh(x: Any) -> Array: return _numpy_function("arcsinh")(x)
def atanh(x: Any) -> Array: return _numpy_function("arctanh")(x)


def from_dlpack(x: Any, /, *, device: Optional[str] = None, copy: Optional[bool] = None) -> Array:
  """An Array from any object with `__dlpack__` (a NumPy array, a torch tensor, a tgfn Array): its
  values are copied into a new buffer, as every tgfn array owns its memory."""
  out = asarray(np.from_dlpack(x))
  return out if device is None else out.to_device(device)


# ---- inspection
class _Info:
  """What `__array_namespace_info__()` returns: the library's capabilities, devices and dtypes."""

  def capabilities(self) -> dict[str, Any]:
    # boolean indexing needs concrete values (the result's shape depends on them), as unique_* does
    return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

  def default_device(self) -> str: return Device.DEFAULT
  def devices(self) -> list[str]:
    """The backends this machine can run (tgfn.backends()), each a name `device=` takes."""
    from tgfn_drivers import backends
    return [b.name for b in backends() if b.available]

  def default_dtypes(self, *, device: Optional[str] = None) -> dict[str, DType]:
    return {"real floating": dtypes.float32, "complex floating": dtypes.complex64, "integral": dtypes.int32,
            "indexing": dtypes.int32}

  def dtypes(self, *, device: Optional[str] = None, kind: Any = None) -> dict[str, DType]:
    # the standard's dtypes only: float16 and bfloat16 work in tgfn but the standard has no such names
    return {d.name: d for d in ALL_DTYPES + COMPLEX_DTYPES
            if d.name in _STANDARD_DTYPE_NAMES and (kind is None or isdtype(d, kind))}


_STANDARD_DTYPE_NAMES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                         "float32", "float64", "complex64", "complex128"}


def __array_namespace_info__() -> _Info:
  return _Info()


_KINDS = {"bool": lambda d: d.is_bool, "signed integer": lambda d: d.kind == "i",
          "unsigned integer": lambda d: d.kind == "u", "integral": lambda d: d.is_int,
          "real floating": lambda d: d.is_float, "complex floating": lambda d: d.is_complex,
          "numeric": lambda d: d.is_int or d.is_inexact}


def isdtype(dtype: Any, kind: Union[str, Any, tuple]) -> bool:
  """Whether `dtype` is of `kind`: a kind name ('bool', 'signed integer', 'unsigned integer',
  'integral', 'real floating', 'complex floating', 'numeric'), a dtype, or a tuple of those."""
  if not isinstance(dtype, DType): raise TypeError(f"isdtype expects a dtype, got {dtype!r}")
  if isinstance(kind, tuple): return any(isdtype(dtype, k) for k in kind)
  if isinstance(kind, str):
    if kind not in _KINDS: raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {sorted(_KINDS)}")
    return _KINDS[kind](dtype)
  return dtype is to_dtype(kind)


def result_type(*arrays_and_dtypes: Any) -> DType:
  """JAX's promotion of dtypes, arrays (their dtypes; tgfn or NumPy) and Python scalars (weakly typed)."""
  return _promote(*(x.dtype if isinstance(x, (Array, np.ndarray)) else x for x in arrays_and_dtypes))


def can_cast(from_: Any, to: Any) -> bool:
  """Whether type promotion can turn `from_` (a dtype or an array) into `to`: result_type(from_, to) is to."""
  src = from_.dtype if isinstance(from_, Array) else to_dtype(from_)
  dst = to_dtype(to)
  return result_type(src, dst) is dst


# ---- manipulation
def concat(arrays: Sequence[Any], axis: Optional[int] = 0) -> Array:
  """concatenate; axis=None joins the flattened arrays."""
  if axis is None: return concatenate([reshape(as_array(a), (-1,)) for a in arrays], 0)
  return concatenate(arrays, axis)


def permute_dims(x: Any, axes: Sequence[int]) -> Array: return transpose(x, tuple(axes))


def matrix_transpose(x: Any) -> Array:
  x = as_array(x)
  if x.ndim < 2: raise ValueError(f"matrix_transpose needs at least 2 dimensions, got shape {x.shape}")
  return swapaxes(x, -1, -2)


def unstack(x: Any, axis: int = 0) -> tuple[Array, ...]:
  x = moveaxis(as_array(x), axis, 0)
  return tuple(x[i] for i in range(x.shape[0]))


# ---- sign bits
def _bits(x: Array) -> Array: return Array(UOp(Ops.BITCAST, _UINT[x.dtype.bits], (x.uop,)))
def _from_bits(bits: Array, dtype: DType) -> Array: return Array(UOp(Ops.BITCAST, dtype, (bits.uop,)))


def signbit(x: Any) -> Array:
  """True where the sign bit is set: negative numbers, -0.0 and NaNs with the sign bit."""
  x = as_array(x)
  if x.dtype.is_float: return (_bits(x) >> (x.dtype.bits - 1)) == 1
  if x.dtype.kind == "i": return x < 0
  return zeros(x.shape, dtypes.bool)


def _float_pair(x1: Any, x2: Any) -> tuple[Array, Array]:
  x1, x2 = as_array(x1), as_array(x2)
  dt = _promote(x1.dtype, x2.dtype)
  if not dt.is_float: dt = dtypes.float32
  return x1.astype(dt), x2.astype(dt)


def _copysign_slope(out: Array, x1: Any, x2: Any) -> Array:
  """+-1: the sign x2 gives times the sign x1 had (+1 at x1 = -0.0 too, as JAX's derivative of abs)."""
  x1 = as_array(x1)
  return where(x1 >= 0, 1.0, -1.0) * where(signbit(x2), -1.0, 1.0)


@derivatives(_copysign_slope, lambda out, x1, x2: 0.0)
def copysign(x1: Any, x2: Any) -> Array:
  """|x1| with the sign bit of x2 (NaNs included), on the bit patterns."""
  x1, x2 = _float_pair(x1, x2)
  top = 1 << (x1.dtype.bits - 1)
  word = (_bits(x1) & (top - 1)) | (_bits(x2) & top)
  return _from_bits(word, x1.dtype)


def nextafter(x1: Any, x2: Any) -> Array:
  """The next representable float after x1 toward x2 (x2 where they are equal, NaN if either is)."""
  x1, x2 = _float_pair(x1, x2)
  bits = _bits(x1)
  up = x2 > x1
  away = up == (x1 > 0)  # away from zero the pattern grows by one
  stepped = _from_bits(where(away, bits + 1, bits - 1), x1.dtype)
  smallest = _from_bits(Array.const(1, bits.dtype, bits.shape), x1.dtype)
  out = where(x1 == 0, where(up, smallest, -smallest), stepped)
  out = where(x1 == x2, x2, out)
  return where((x1 != x1) | (x2 != x2), x1 + x2, out)


# ---- cumulative
# ---- data-dependent shapes: computed from concrete values on the host
def _host(x: Any, fn: str) -> tuple[Array, np.ndarray]:
  x = as_array(x)
  return x, x.numpy(f"{fn}(x)")


class UniqueAllResult(NamedTuple):
  values: Array
  indices: Array
  inverse_indices: Array
  counts: Array


class UniqueCountsResult(NamedTuple):
  values: Array
  counts: Array


class UniqueInverseResult(NamedTuple):
  values: Array
  inverse_indices: Array


def _unique(x: Any, fn: str) -> tuple[Array, Array, Array, Array]:
  """Sorted distinct values (each NaN distinct, as the standard asks), first indices, inverse, counts."""
  x, host = _host(x, fn)
  flat = host.reshape(-1)
  nan = np.isnan(flat) if flat.dtype.kind == "f" else np.zeros(flat.shape, bool)
  values, index, inverse, counts = np.unique(flat[~nan], return_index=True, return_inverse=True, return_counts=True)
  where_finite = np.flatnonzero(~nan)
  n_nan = int(nan.sum())
  all_values = np.concatenate([values, flat[nan]])
  all_index = np.concatenate([where_finite[index], np.flatnonzero(nan)]).astype(np.int64)
  full_inverse = np.empty(flat.shape, np.int64)
  full_inverse[~nan] = inverse
  full_inverse[nan] = len(values) + np.arange(n_nan)
  all_counts = np.concatenate([counts, np.ones(n_nan, np.int64)])
  return (Array.from_data(all_values.astype(host.dtype), x.dtype, x.device), asarray(all_index.astype(np.int32)),
          asarray(full_inverse.reshape(host.shape).astype(np.int32)), asarray(all_counts.astype(np.int32)))


def unique_values(x: Any) -> Array: return _unique(x, "unique_values")[0]


def unique_counts(x: Any) -> UniqueCountsResult:
  values, _, _, counts = _unique(x, "unique_counts")
  return UniqueCountsResult(values, counts)


def unique_inverse(x: Any) -> UniqueInverseResult:
  values, _, inverse, _ = _unique(x, "unique_inverse")
  return UniqueInverseResult(values, inverse)


def unique_all(x: Any) -> UniqueAllResult:
  return UniqueAllResult(*_unique(x, "unique_all"))


# ---- creation and differences