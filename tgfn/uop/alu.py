"""The exact meaning of every ALU op on scalars: the reference all renderers must agree with.

Used to fold constants during simplification and by the PYTHON reference interpreter.
Floats are NumPy scalars of their dtype (so float32 rounds like float32); bools and ints are Python
values wrapped to their dtype's width. Half types never reach here as arithmetic: codegen computes
them in float32 and rounds at each op, so only CAST touches float16/bfloat16.

Semantics chosen where C leaves them undefined (and the C renderer implements the same):
  integer x // 0 and x % 0 are 0 (as NumPy); IDIV truncates toward zero and MOD takes the sign of x;
  shifts by >= the bit width give 0 (or -1 for an arithmetic right shift of a negative number);
  float -> int casts truncate toward zero, saturate out of range, and send NaN to 0;
  MAX propagates NaN.
EXP2, LOG2, SIN and COS are computed in float64 by the C library and rounded to the dtype (see _libm).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tgfn.dtype import DType, dtypes
from tgfn.uop.ops import Ops, normalize_const


def float_to_bf16(x: float) -> float:
  """Round a float to the nearest bfloat16 value (ties to even), returned as a float32 scalar."""
  bits = int(np.float32(x).view(np.uint32))
  if math.isnan(x): return np.float32("nan")
  bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
  return np.uint32(bits).view(np.float32)


def bf16_bits_to_float(bits: int) -> np.float32: return np.uint32(int(bits) << 16).view(np.float32)
def float_to_bf16_bits(x: float) -> int: return int(np.float32(float_to_bf16(x)).view(np.uint32)) >> 16


def _scalar_type(dtype: DType) -> Any:
  return np.float32 if dtype is dtypes.bfloat16 else dtype.np.type


def _int_as_double(v: int) -> float:
  """An int as a double that rounds to float32 or float16 as the int itself does (as C converts): exact
  up to 53 bits; beyond, the dropped bits leave a sticky 1 in the lowest kept bit (round to odd), so a
  tie in the narrow type is never made by the double rounding."""
  k = abs(v).bit_length() - 53
  if k <= 0: return float(v)
  kept = (abs(v) >> k) | (1 if abs(v) & ((1 << k) - 1) else 0)
  return math.copysign(float(kept << k), v)


def cast(value: Any, src: DType, dst: DType) -> Any:
  # a folded CONST holds a Python float: round it to its own dtype first (overflowing to inf), as C does
  if src.is_float:
    with np.errstate(over="ignore"):
      value = float_to_bf16(value) if src is dtypes.bfloat16 else _scalar_type(src)(value)
  if dst.is_bool: return bool(value != 0)
  if dst.is_float:
    if src.is_bool: value = int(value)
    elif dst is not dtypes.float64 and not src.is_float: value = _int_as_double(int(value))
    if dst is dtypes.bfloat16: return float_to_bf16(np.float64(value))
    return _scalar_type(dst)(value)
  if src.is_float:  # truncate toward zero, saturate, NaN -> 0
    f = float(value)
    if math.isnan(f): return 0
    return int(max(min(math.trunc(f) if not math.isinf(f) else (dst.max if f > 0 else dst.min), dst.max), dst.min))
  return normalize_const(int(value), dst)


def bitcast(value: Any, src: DType, dst: DType) -> Any:
  if src is dtypes.bfloat16: raw = np.array([float_to_bf16_bits(value)], np.uint16)
  else: raw = np.array([value], src.np)
  out = raw.view(np.uint16 if dst is dtypes.bfloat16 else dst.np)[0]
  if dst is dtypes.bfloat16: return bf16_bits_to_float(out)
  return out if dst.is_float else (bool(out) if dst.is_bool else int(out))


def _idiv(a: int, b: int) -> int:
  if b == 0: return 0
  q = abs(a) // abs(b)
  return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int: return 0 if b == 0 else a - b * _idiv(a, b)


def _shift(op: Ops, a: int, b: int, dtype: DType) -> int:
  if b < 0 or b >= dtype.bits:
    return -1 if op is Ops.SHR and a < 0 else 0
  # Python's >> is arithmetic on negative ints (signed dtypes) and logical on unsigned values (never < 0)
  return a << b if op is Ops.SHL else a >> b


def _fmax(a: Any, b: Any) -> Any:
  if a != a: return a
  if b != b: return b
  return a if a > b else b


def _exp2(x: float) -> float:
  try: return math.pow(2.0, x)
  except OverflowError: return math.inf


def _log2(x: float) -> float:
  if x > 0 or x != x: return math.log2(x)
  return -math.inf if x == 0 else math.nan


_LIBM = {Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: math.sin, Ops.COS: math.cos}


def _libm(op: Ops, x: float) -> float:
  """A transcendental in float64 through the C library (Python's math), so the reference does not depend on
  which SIMD path NumPy picks on this CPU; rounded once more to float32 it is within about half an ulp."""
  if math.isinf(x) and op in (Ops.SIN, Ops.COS): return math.nan
  return _LIBM[op](x)


def exec_alu(op: Ops, dtype: DType, srcs: tuple[Any, ...], src_dtypes: tuple[DType, ...]) -> Any:
  """Apply `op` to Python/NumPy scalar `srcs` of `src_dtypes`, producing a value of `dtype`."""
  if op is Ops.CAST: return cast(srcs[0], src_dtypes[0], dtype)
  if op is Ops.BITCAST: return bitcast(srcs[0], src_dtypes[0], dtype)
  if op is Ops.WHERE: return srcs[1] if srcs[0] else srcs[2]
  if op in (Ops.CMPLT, Ops.CMPNE) and src_dtypes[0].is_float:  # folded CONSTs: compare at their precision
    srcs = tuple(cast(s, d, d) for s, d in zip(srcs, src_dtypes))
  if op is Ops.CMPLT: return bool(srcs[0] < srcs[1])
  if op is Ops.CMPNE: return bool(srcs[0] != srcs[1])
  if dtype.is_float: return _float_alu(op, dtype, *srcs)
  if dtype.is_bool:
    a = srcs[0]
    if op in (Ops.AND, Ops.MUL): return bool(a and srcs[1])
    if op in (Ops.OR, Ops.MAX, Ops.ADD): return bool(a or srcs[1])
    if op is Ops.XOR: return bool(a) != bool(srcs[1])
    raise ValueError(f"{op} is not defined on bool")
  a = int(srcs[0])
  b = int(srcs[1]) if len(srcs) > 1 else 0
  if op is Ops.ADD: r = a + b
  elif op is Ops.SUB: r = a - b
  elif op is Ops.MUL: r = a * b
  elif op is Ops.IDIV: r = _idiv(a, b)
  elif op is Ops.MOD: r = _mod(a, b)
  elif op is Ops.MAX: r = max(a, b)
  elif op is Ops.NEG: r = -a
  elif op is Ops.AND: r = a & b
  elif op is Ops.OR: r = a | b
  elif op is Ops.XOR: r = a ^ b
  elif op in (Ops.SHL, Ops.SHR): r = _shift(op, a, b, dtype)
  else: raise ValueError(f"{op} is not defined on {dtype}")
  return normalize_const(r, dtype)


def _float_alu(op: Ops, dtype: DType, *srcs: Any) -> Any:
  t = _scalar_type(dtype)
  with np.errstate(all="ignore"):  # overflow to inf and NaN results are values here, not errors
    v = [t(s) for s in srcs]
    if op is Ops.ADD: r = v[0] + v[1]
    elif op is Ops.SUB: r = v[0] - v[1]
    elif op is Ops.MUL: r = v[0] * v[1]
    elif op is Ops.FDIV: r = v[0] / v[1]
    elif op is Ops.MAX: r = _fmax(v[0], v[1])
    elif op is Ops.NEG: r = -v[0]
    elif op is Ops.RECIP: r = t(1) / v[0]
    elif op is Ops.SQRT: r = np.sqrt(v[0])
    elif op in _LIBM: r = _libm(op, float(v[0]))
    elif op is Ops.TRUNC: r = np.trunc(v[0])
    else: raise ValueError(f"{op} is not defined on {dtype}")
  r = t(r)
  return float_to_bf16(r) if dtype is dtypes.bfloat16 else r
