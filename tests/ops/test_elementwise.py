"""Every elementwise function of tgfn against NumPy, driven by tests/op_registry.py: random dtypes (mixed
across operands, and weak Python scalars), broadcasting shapes with 0-d, size-0 and size-1 axes, and
values from each op's domain. The result dtype must be the JAX promotion result; values are compared
with a float64 (or exact integer) NumPy reference. Runs on CPU and on the PYTHON reference device."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tgfn.numpy as tnp
from tgfn.dtype import dtypes, result_type
from tests.conftest import assert_close
from tests.op_registry import BY_NAME, ELEMENTWISE, OpRecord
from tests.strategies import (arrays, assert_matches, device_holds, held_dtypes, lattice_arg, op_settings, reference,
                              shapes, to_tgfn, weak_scalar)


@pytest.mark.parametrize("rec", ELEMENTWISE, ids=str)
@given(data=st.data())
@op_settings(max_examples=25)
def test_matches_numpy(device: str, rec: OpRecord, data: st.DataObject) -> None:
  arg_shapes = data.draw(shapes(rec.nargs), label="shapes")
  hosts, dts = [], []
  for i, shape in enumerate(arg_shapes):
    dt = data.draw(st.sampled_from(held_dtypes(rec.dtypes_of(i))), label=f"dtype{i}")
    if i and rec.nargs == 2 and data.draw(st.integers(0, 3), label="weak?") == 0:
      hosts.append(data.draw(weak_scalar(dts[0], dt, rec.domain(i)), label=f"scalar{i}"))
    else:
      if i and rec.arg_dtypes is None and data.draw(st.booleans(), label="same dtype?"): dt = dts[0]
      hosts.append(data.draw(arrays(dt, shape, rec.domain(i)), label=f"x{i}"))
    dts.append(dt)
  promoted = result_type(*[lattice_arg(h, dt) for h, dt in zip(hosts, dts)])
  assume(device_holds(promoted) and device_holds(rec.result_dtype(promoted)))  # int8 with uint32 is int64
  got = rec.fn(*[to_tgfn(h, dt) for h, dt in zip(hosts, dts)], **rec.kwargs)
  out = rec.result_dtype(promoted)
  operands = ", ".join(type(h).__name__ if isinstance(h, (bool, int, float)) else dt.name
                       for h, dt in zip(hosts, dts))
  assert_matches(got, reference(rec, hosts, dts), out, rec.tol.get(out), f"{rec.name}({operands})")


def test_registry_covers_every_elementwise_function() -> None:
  from tgfn.ops import elementwise
  covered = {rec.fn for rec in ELEMENTWISE}
  missing = [n for n in elementwise.__all__ if getattr(elementwise, n) not in covered and n != "astype"]
  assert not missing, f"add records to tests/op_registry.py for {missing} (astype is tested in test_dtype.py)"


def test_clip_promotes_pairwise_as_jax(device: str) -> None:
  """JAX's clip is maximum(x, lo), then minimum(., hi): each promotes its own two operands, so the
  int16 bound -257 becomes bfloat16 (-256, ties to even) before the maximum, and the result is -256."""
  x, lo, hi = np.array([-258.0], np.float32), np.array([-257], np.int16), np.array([0.0], np.float16)
  want = np.array([-256.0], np.float32)
  assert_close(tnp.clip(tnp.array(x, dtype=tnp.bfloat16), tnp.array(lo), tnp.array(hi)), want)
  assert_close(reference(BY_NAME["clip"], [x, lo, hi], [dtypes.bfloat16, dtypes.int16, dtypes.float16]), want)


# ---- pinned special values and the places where tgfn follows JAX rather than NumPy
def test_float_floor_divide_and_mod_are_exact(device: str) -> None:
  """1.0 // 0.1 is 9 (0.1 is a bit more than 1/10): the quotient comes from the exact remainder, not
  floor(1.0 / 0.1) = 10. Python, NumPy and JAX agree."""
  for dt in (np.float32, np.float64):
    a = np.array([1.0, 5.7, -1.0, 7.0, -7.0, 1e7, -0.5], dt)
    b = np.array([0.1, 0.3, np.inf, -2.0, 2.0, 3.3, np.inf], dt)
    assert_close(tnp.array(a) // tnp.array(b), np.floor_divide(a, b))
    assert_close(tnp.array(a) % tnp.array(b), np.mod(a, b), rtol=0, atol=0)


def test_division_by_zero(device: str) -> None:
  # integers: x // 0 == x % 0 == 0, as NumPy (JAX gives -1 / x; C leaves it undefined)
  a = np.array([7, -7, 0, -2**31], np.int32)
  assert_close(tnp.array(a) // tnp.array(np.zeros(4, np.int32)), np.zeros(4, np.int32))
  assert_close(tnp.array(a) % 0, np.zeros(4, np.int32))
  assert_close(tnp.array(a) // -1, np.array([-7, 7, 0, -2**31], np.int32))  # INT_MIN // -1 wraps
  # floats: x // 0.0 is +-inf (0 // 0.0 NaN), as NumPy, JAX and the array API; x % 0.0 is NaN
  f = np.array([1.0, -1.0, 0.0], np.float32)
  assert_close(tnp.array(f) // 0.0, np.array([np.inf, -np.inf, np.nan], np.float32))
  assert_close(tnp.array(f) % 0.0, np.full(3, np.nan, np.float32))
  assert_close(tnp.array(f) / 0.0, np.array([np.inf, -np.inf, np.nan], np.float32))


def test_power_special_cases(device: str) -> None:
  """C99 pow: x**0 = 1 and 1**y = 1 even for NaN; (-1)**+-inf = 1; (-inf)**0.5 = inf; (-0.0)**-1 = -inf."""
  a = np.array([np.nan, 1.0, -1.0, -np.inf, -0.0, -8.0, -8.0, 0.0, 2.0], np.float32)
  b = np.array([0.0, np.nan, np.inf, 0.5, -1.0, 1 / 3, 3.0, -2.0, -np.inf], np.float32)
  with np.errstate(all="ignore"): want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
  assert_close(tnp.power(tnp.array(a), tnp.array(b)), want)
  assert_close(tnp.array(a) ** 0.5, np.array([np.nan, 1, np.nan, np.inf, 0, np.nan, np.nan, 0, math.sqrt(2)],
                                             np.float32))


def test_integer_power_negative_exponent(device: str) -> None:
  # NumPy raises for negative integer exponents and JAX leaves them implementation-defined; tgfn: 0,
  # except 1 ** n = 1 and (-1) ** n = +-1
  base = tnp.array(np.array([2, 1, -1, -1, 0, 5], np.int32))
  exp = tnp.array(np.array([-1, -5, -3, -2, -1, 0], np.int32))
  assert_close(base ** exp, np.array([0, 1, -1, 1, 0, 1], np.int32))
  assert_close(tnp.array(np.array([3, -2], np.int8)) ** 5, np.array([-13, -32], np.int8))  # wraps


def test_jax_dtypes_where_numpy_differs(device: str) -> None:
  """Bool arithmetic that NumPy keeps as bool or int8 is int32 in JAX; reciprocal and rint of ints
  are floats in JAX (NumPy: integer 1 // x and an integer dtype)."""
  t = tnp.array([True, False])
  assert tnp.square(t).dtype == dtypes.int32
  assert tnp.floor_divide(t, t).dtype == dtypes.int32
  assert tnp.mod(t, t).dtype == dtypes.int32
  assert tnp.power(t, t).dtype == dtypes.int32
  assert tnp.left_shift(t, t).dtype == dtypes.int32
  assert (t + t).dtype == dtypes.bool and (t * t).dtype == dtypes.bool
  assert_close(tnp.reciprocal(tnp.array([2, 4], dtype=tnp.int32)), np.array([0.5, 0.25], np.float32))
  assert tnp.rint(tnp.array([2], dtype=tnp.int8)).dtype == dtypes.float32
  assert tnp.round(tnp.array([2], dtype=tnp.int8)).dtype == dtypes.int8


def test_half_composites_round_once(device: str) -> None:
  """float16 exp/log/... run in float32 and round once, so they are correctly rounded here."""
  x = np.array([0.1, 1.0, 3.0, 9.5, -0.75], np.float16)
  for fn, ref in ((tnp.exp, np.exp), (tnp.tanh, np.tanh), (tnp.log1p, np.log1p), (tnp.cosh, np.cosh)):
    assert_close(fn(tnp.array(x)), ref(x.astype(np.float64)).astype(np.float16), rtol=0, atol=0)


def test_shift_by_out_of_range_amounts(device: str) -> None:
  # shifting by >= the bit width or by a negative amount: 0, or -1 for an arithmetic right shift of a
  # negative number (NumPy's definition; C leaves it undefined)
  x = tnp.array(np.array([5, -5, 5, -5], np.int8))
  s = tnp.array(np.array([8, 9, -1, 100], np.int8))
  assert_close(x << s, np.array([0, 0, 0, 0], np.int8))
  assert_close(x >> s, np.array([0, -1, 0, -1], np.int8))
  assert_close(tnp.array(np.array([0x80], np.uint8)) >> 7, np.array([1], np.uint8))  # logical for unsigned


def test_aliases_and_operators(device: str) -> None:
  a = np.array([[-2.5, 0.5, 3.0]], np.float32)
  b = np.array([[1.5], [-2.0]], np.float32)
  x, y = tnp.array(a), tnp.array(b)
  for alias, name in ((tnp.true_divide, tnp.divide), (tnp.remainder, tnp.mod), (tnp.absolute, tnp.abs)):
    assert alias is name
  assert_close(x - y, a - b)
  assert_close(-x, -a)
  assert_close(abs(x), np.abs(a))
  assert_close(2.0 ** x, np.exp2(a.astype(np.float64)).astype(np.float32), rtol=4e-6)
  assert_close(3 - x, 3 - a)
  assert_close(tnp.around(x), np.round(a))
  assert_close(tnp.bitwise_not(tnp.array([1, 2], dtype=tnp.uint8)), np.invert(np.array([1, 2], np.uint8)))
  assert_close((x < y) | (x == 0.5), (a < b) | (a == 0.5))
  assert_close(tnp.clip(x, None, 1.0), np.minimum(a, 1.0))
  assert_close(tnp.clip(x, -1, None), np.maximum(a, -1.0))
  assert_close(tnp.add(1, 2.5), np.float32(3.5))  # two Python scalars: weak + weak, defaults


# ---- bad input
def test_broadcast_error_names_both_shapes(device: str) -> None:
  with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\) cannot be broadcast"):
    tnp.add(tnp.zeros((2, 3)), tnp.zeros((4,)))
  with pytest.raises(ValueError, match=r"\(3,\) and \(2, 1\) and \(5,\)"):
    tnp.where(tnp.zeros((3,), dtype=tnp.bool_), tnp.zeros((2, 1)), tnp.zeros((5,)))


@pytest.mark.parametrize("fn", [tnp.bitwise_and, tnp.bitwise_or, tnp.bitwise_xor, tnp.left_shift,
                                tnp.right_shift])
def test_bitwise_ops_reject_floats(device: str, fn) -> None:
  with pytest.raises(TypeError, match=rf"{fn.__name__} needs integer or bool arrays, got float32"):
    fn(tnp.array([1, 2]), tnp.array([1.0, 2.0]))
  with pytest.raises(TypeError, match="invert needs integer or bool arrays, got float16"):
    tnp.invert(tnp.zeros(2, dtype=tnp.float16))


def test_bool_arithmetic_that_jax_rejects(device: str) -> None:
  t = tnp.array([True, False])
  with pytest.raises(TypeError, match="subtract does not accept bool"):
    t - t
  with pytest.raises(TypeError, match="negative does not accept bool"):
    -t


def test_python_int_overflow(device: str) -> None:
  with pytest.raises(OverflowError, match=r"Python int 300 does not fit in uint8 \(range 0..255\)"):
    tnp.array([1, 2], dtype=tnp.uint8) + 300
  with pytest.raises(OverflowError, match=r"-129 does not fit in int8"):
    tnp.maximum(tnp.array([1], dtype=tnp.int8), -129)
  with pytest.raises(OverflowError, match="does not fit in int32"):
    tnp.array([True]) + 2**31  # bool + Python int is int32
