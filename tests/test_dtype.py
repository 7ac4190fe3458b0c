"""dtypes and promotion: `result_type` against JAX's published promotion table for every pair of dtypes
and weak Python scalars, the lattice's algebra, dtype parsing, and casts (astype) on each device."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tgfn.numpy as tnp
from tgfn.dtype import ALL_DTYPES, DType, dtypes, float_dtype, result_type, sum_dtype, to_dtype
from tests.conftest import assert_close
from tests.op_registry import ALL, Domain, Tol
from tests.strategies import arrays, array_shapes, assert_matches, cast_host, op_settings

# JAX's type promotion table (docs/type_promotion.rst, complex types left out). i* and f* are the weak
# types of Python int and float scalars. Where JAX's answer is weak, tgfn gives its defaults int32 and
# float32 (JAX gives int32/float32, or int64/float64 under jax_enable_x64).
_CODES = "b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*".split()
_JAX_TABLE = """
b1  b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*
u1  u1 u1 u2 u4 u8 i2 i2 i4 i8 bf f2 f4 f8 u1 f*
u2  u2 u2 u2 u4 u8 i4 i4 i4 i8 bf f2 f4 f8 u2 f*
u4  u4 u4 u4 u4 u8 i8 i8 i8 i8 bf f2 f4 f8 u4 f*
u8  u8 u8 u8 u8 u8 f* f* f* f* bf f2 f4 f8 u8 f*
i1  i1 i2 i4 i8 f* i1 i2 i4 i8 bf f2 f4 f8 i1 f*
i2  i2 i2 i4 i8 f* i2 i2 i4 i8 bf f2 f4 f8 i2 f*
i4  i4 i4 i4 i8 f* i4 i4 i4 i8 bf f2 f4 f8 i4 f*
i8  i8 i8 i8 i8 f* i8 i8 i8 i8 bf f2 f4 f8 i8 f*
bf  bf bf bf bf bf bf bf bf bf bf f4 f4 f8 bf bf
f2  f2 f2 f2 f2 f2 f2 f2 f2 f2 f4 f2 f4 f8 f2 f2
f4  f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f8 f4 f4
f8  f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8
i*  i* u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*
f*  f* f* f* f* f* f* f* f* f* bf f2 f4 f8 f* f*
"""
_OPERAND = {"b1": dtypes.bool, "u1": dtypes.uint8, "u2": dtypes.uint16, "u4": dtypes.uint32,
            "u8": dtypes.uint64, "i1": dtypes.int8, "i2": dtypes.int16, "i4": dtypes.int32,
            "i8": dtypes.int64, "bf": dtypes.bfloat16, "f2": dtypes.float16, "f4": dtypes.float32,
            "f8": dtypes.float64, "i*": 1, "f*": 1.0}
_RESULT = {**_OPERAND, "i*": dtypes.int32, "f*": dtypes.float32}
_PAIRS = [(row[0], col, want) for row in (line.split() for line in _JAX_TABLE.strip().splitlines())
          for col, want in zip(_CODES, row[1:])]


@pytest.mark.parametrize("a, b, want", _PAIRS, ids=[f"{a}+{b}" for a, b, _ in _PAIRS])
def test_result_type_matches_jax_table(a: str, b: str, want: str) -> None:
  assert result_type(_OPERAND[a], _OPERAND[b]) is _RESULT[want]


def test_representative_promotions() -> None:
  assert result_type(dtypes.int32, dtypes.float16) is dtypes.float16
  assert result_type(dtypes.uint8, dtypes.int8) is dtypes.int16
  assert result_type(dtypes.uint32, dtypes.int32) is dtypes.int64
  # no integer holds both int64 and uint64: the join is the weak float, float32 here (float64 in JAX x64)
  assert result_type(dtypes.int64, dtypes.uint64) is dtypes.float32
  assert result_type(dtypes.bfloat16, dtypes.float16) is dtypes.float32
  assert result_type(dtypes.bool, 1) is dtypes.int32
  assert result_type(dtypes.int8, 2) is dtypes.int8
  assert result_type(dtypes.uint8, 1.0) is dtypes.float32
  assert result_type(dtypes.float16, 1.0) is dtypes.float16
  assert result_type(dtypes.uint64, dtypes.float16) is dtypes.float16
  assert result_type(True, False) is dtypes.bool
  assert result_type(1, 2.0) is dtypes.float32
  assert result_type(dtypes.int8, dtypes.uint8, 3) is dtypes.int16
  assert result_type("int16", np.uint8, float) is dtypes.float32  # names, NumPy types, Python types


_NODES = list(ALL_DTYPES) + [1, 1.0]


def test_lattice_is_a_join() -> None:
  """result_type is a join: idempotent, and the order of its arguments never matters. Chaining two
  calls is associative for dtypes, except through a weak result (u8 with a signed int joins at f*),
  which comes back as the strong float32, as in JAX."""
  weak_float = {(_OPERAND[a], _OPERAND[b]) for a, b, want in _PAIRS if want == "f*"}
  for a in _NODES: assert result_type(a, a) is result_type(a)
  for a, b, c in itertools.product(_NODES, repeat=3):
    want = result_type(a, b, c)
    assert all(result_type(*p) is want for p in itertools.permutations((a, b, c)))
    if not any(isinstance(v, (int, float)) for v in (a, b, c)) and (a, b) not in weak_float:
      assert result_type(result_type(a, b), c) is want


def test_helper_dtypes() -> None:
  assert [sum_dtype(d) for d in (dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.int64, dtypes.float16)] == \
    [dtypes.int32, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.float16]
  assert [float_dtype(d) for d in (dtypes.bool, dtypes.int64, dtypes.bfloat16)] == \
    [dtypes.float32, dtypes.float32, dtypes.bfloat16]


@pytest.mark.parametrize("spec, want", [
  ("float32", dtypes.float32), (np.int8, dtypes.int8), (np.dtype("uint16"), dtypes.uint16),
  (bool, dtypes.bool),
  (int, dtypes.int32), (float, dtypes.float32), (tnp.bfloat16, dtypes.bfloat16), (np.float64, dtypes.float64),
])
def test_to_dtype(spec, want: DType) -> None:
  assert to_dtype(spec) is want


def test_dtype_errors() -> None:
  with pytest.raises(TypeError, match=r"dtype datetime64\[s\] is not supported; supported: bool, int8"):
    to_dtype(np.dtype("datetime64[s]"))
  with pytest.raises(TypeError, match="expected a dtype"):
    to_dtype(object())
  with pytest.raises(TypeError, match="result_type needs at least one argument"):
    result_type()


# ---- promotion in real ops, on each device
@pytest.mark.parametrize("make, other, want_dtype", [
  (lambda: tnp.array([1, -2], dtype=tnp.int8), 2, dtypes.int8),
  (lambda: tnp.array([1, 200], dtype=tnp.uint8), 1, dtypes.uint8),
  (lambda: tnp.array([1, 200], dtype=tnp.uint8), 1.0, dtypes.float32),
  (lambda: tnp.array([1, 7], dtype=tnp.int32), 2.5, dtypes.float32),
  (lambda: tnp.array([True, False]), 3, dtypes.int32),
  (lambda: tnp.array([1.5, 2.0], dtype=tnp.float16), 3, dtypes.float16),
  (lambda: tnp.array([1, 2], dtype=tnp.uint32), np.array([-1, 2], np.int32), dtypes.int64),
  (lambda: tnp.array([1, 2], dtype=tnp.int64), np.array([3, 4], np.uint64), dtypes.float32),
  (lambda: tnp.array([1, 2], dtype=tnp.bfloat16), np.array([3, 4], np.float16), dtypes.float32),
])
def test_weak_and_mixed_promotion_in_ops(device: str, make, other, want_dtype: DType) -> None:
  x = make()
  got = x * other
  assert got.dtype is want_dtype
  wide = np.asarray(x).astype(np.float64) * np.asarray(other).astype(np.float64)
  assert_close(got, wide.astype(want_dtype.np), check_dtype=False)


# ---- casts
@given(data=st.data())
@op_settings(max_examples=25)
def test_astype_matches_numpy(device: str, data: st.DataObject) -> None:
  """Every pair of dtypes, with values NumPy converts without undefined behaviour: float -> int only
  for values inside the target range (tgfn saturates outside it; pinned below)."""
  src = data.draw(st.sampled_from(ALL), label="src")
  dst = data.draw(st.sampled_from(ALL), label="dst")
  domain = Domain(float(dst.min), float(dst.max), specials=False) if src.is_float and dst.is_int else Domain()
  host = data.draw(arrays(src, data.draw(array_shapes(), label="shape"), domain), label="x")
  got = tnp.array(host, dtype=src).astype(dst)
  want = np.trunc(host) if src.is_float and dst.is_int else host
  # a cast rounds once (to bfloat16: through float32, in tgfn and in cast_host alike): exact equality
  assert_matches(got, cast_host(want, dst), dst, Tol(0.0, 0.0), f"{src.name} -> {dst.name}")


def test_float_to_int_casts_saturate(device: str) -> None:
  """C leaves out-of-range float -> int undefined; tgfn truncates toward zero, saturates, sends NaN to 0."""
  x = tnp.array([300.5, -300.0, np.nan, np.inf, -np.inf, 2.9, -2.9, 1e30], dtype=tnp.float32)
  assert_close(x.astype(tnp.int8), np.array([127, -128, 0, 127, -128, 2, -2, 127], np.int8))
  assert_close(x.astype(tnp.uint8), np.array([255, 0, 0, 255, 0, 2, 0, 255], np.uint8))
  assert_close(x.astype(tnp.int64)[-1:], np.array([2**63 - 1], np.int64))
  assert_close(x.astype(tnp.bool_), np.array([True, True, True, True, True, True, True, True]))
  assert_close(tnp.array([0.0, -0.0]).astype(tnp.bool_), np.array([False, False]))
