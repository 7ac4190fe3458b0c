"""Python scalars passed to jit: traced (no retrace per value), weakly typed and range-checked as eager."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp

scale = lambda x, s: x * s  # noqa: E731


def test_a_large_int_raises_as_eager_after_a_small_one_compiled():
  jf = tgfn.jit(scale)
  ints = tnp.ones(2, dtype=tnp.int32)
  np.testing.assert_array_equal(np.asarray(jf(ints, 3)), [3, 3])
  for big in (2 ** 40, 2 ** 31 + 5, -2 ** 31 - 1):
    with pytest.raises(OverflowError, match=f"{big} does not fit in int32"):
      ints * big
    with pytest.raises(OverflowError, match=f"{big} does not fit in int32"):
      jf(ints, big)
  with pytest.raises(OverflowError, match="300 does not fit in int8"):
    jf(tnp.ones(2, dtype=tnp.int8), 300)
  assert jf.trace_count == 2  # one trace per array dtype; the values never retraced


def test_a_large_int_next_to_a_float_array_is_a_float_as_eager():
  jf = tgfn.jit(scale)
  jf(tnp.ones(2), 3)
  for big in (2 ** 40, 2 ** 31 + 5, 2 ** 70):
    np.testing.assert_array_equal(np.asarray(jf(tnp.ones(2), big)), np.asarray(tnp.ones(2) * big))
  assert jf.trace_count == 1


def test_a_scalar_used_on_its_own_has_the_default_dtype_and_is_range_checked():
  twice = tgfn.jit(lambda s: s * 2)
  assert twice(3).dtype == tnp.int32 and twice(3.0).dtype == tnp.float32
  with pytest.raises(OverflowError, match="does not fit in int32"):
    twice(2 ** 40)
  with pytest.raises(OverflowError, match="does not fit in int8"):
    tgfn.jit(lambda s: tnp.asarray(s, dtype=tnp.int8))(200)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("scalar", [0.1, 3, 1e-30, 2.5])
def test_scalars_are_weakly_typed_and_exact_as_eager(dtype, scalar):
  x = tnp.arange(1, 4).astype(dtype)
  jf = tgfn.jit(scale)
  eager, jitted = x * scalar, jf(x, scalar)
  assert jitted.dtype == eager.dtype
  np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))


def test_float64_times_a_python_float_keeps_every_bit():
  x = tnp.ones(2, dtype=tnp.float64)
  jf = tgfn.jit(scale)
  jf(x, 0.5)
  out = jf(x, 0.1)
  assert out.dtype == tnp.float64 and np.asarray(out)[0] == 0.1
  assert jf(tnp.ones(2), 0.1).dtype == tnp.float32
  assert jf.trace_count == 2  # float64 and float32 arrays; the new value 0.1 did not retrace


def test_one_scalar_used_at_two_dtypes_and_in_other_ops():
  f = lambda a, b, s: (a * s + s, b - s, tnp.where(a > 1, s, a), tnp.concatenate([b, tnp.stack([s])]))  # noqa: E731
  a, b = tnp.array([1.0, 2.0], dtype=tnp.float64), tnp.array([1.0, 2.0], dtype=tnp.float16)
  jf = tgfn.jit(f)
  for s in (0.1, 1 / 3):
    for got, want in zip(jf(a, b, s), f(a, b, s)):
      assert got.dtype == want.dtype
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert jf.trace_count == 1


def test_numpy_scalars_are_weak_as_in_eager_and_bools_strong():
  x = tnp.ones(2)
  jf = tgfn.jit(scale)
  assert jf(x, np.float64(0.1)).dtype == (x * np.float64(0.1)).dtype == tnp.float32
  assert jf(tnp.ones(2, dtype=tnp.int8), True).dtype == tnp.int8
  assert jf(x, 2).dtype == tnp.float32
