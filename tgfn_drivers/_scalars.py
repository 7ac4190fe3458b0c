"""Scalar kernel parameters (PARAM values) as ctypes values, for the drivers that launch through ctypes.

Drivers differ only in how their kernels declare a bool (C's `_Bool` or a byte) and a float16 (a double
in C, its bits where the dialect has no half type); bfloat16 always travels as its bits, rounded here
once, exactly as a constant of that dtype is when rendered."""
from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from tgfn.dtype import DType, dtypes
from tgfn.uop.alu import float_to_bf16_bits

_CTYPES = {dtypes.int8: ctypes.c_int8, dtypes.int16: ctypes.c_int16, dtypes.int32: ctypes.c_int32,
           dtypes.int64: ctypes.c_int64, dtypes.uint8: ctypes.c_uint8, dtypes.uint16: ctypes.c_uint16,
           dtypes.uint32: ctypes.c_uint32, dtypes.uint64: ctypes.c_uint64, dtypes.float32: ctypes.c_float,
           dtypes.float64: ctypes.c_double}


def _half_bits(value: Any) -> ctypes.c_uint16:
  with np.errstate(over="ignore"): return ctypes.c_uint16(int(np.array([value], np.float16).view(np.uint16)[0]))


def scalar_arg_converter(bool_type: Any, half_as_bits: bool) -> Callable[[Any, DType], Any]:
  """`scalar_arg(value, dtype)` for kernels that declare bool as `bool_type` and float16 as its bits
  (`half_as_bits`) or as a double."""
  types = {**_CTYPES, dtypes.bool: bool_type}
  if not half_as_bits: types[dtypes.float16] = ctypes.c_double

  def scalar_arg(value: Any, dtype: DType) -> Any:
    if dtype is dtypes.bfloat16: return ctypes.c_uint16(float_to_bf16_bits(value))
    if dtype is dtypes.float16 and half_as_bits: return _half_bits(value)
    return types[dtype](value)
  return scalar_arg
