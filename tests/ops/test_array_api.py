"""The array API standard's surface on tgfn.numpy, dtype constructors and finfo/iinfo."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import TEST_DEVICE


@pytest.mark.parametrize("dt", [tnp.float32, tnp.float16, tnp.bfloat16, tnp.int8, tnp.uint32, tnp.bool_, tnp.float64])
def test_dtype_objects_are_constructors(dt):
  x = dt(1)
  assert isinstance(x, tgfn.Array) and x.shape == () and x.dtype is dt and bool(x)
  assert dt([1, 0]).shape == (2,)


def test_dtype_constructor_values_and_range_check():
  assert float(tnp.float32(3.0)) == 3.0 and float(tnp.bfloat16(1.0 / 3)) == 0.333984375
  with pytest.raises(OverflowError):
    tnp.int8(300)


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_finfo_matches_numpy(name):
  ours, ref = tnp.finfo(getattr(tnp, name)), np.finfo(name)
  for field in ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal", "smallest_subnormal",
                "resolution", "precision", "nmant", "nexp", "machep", "minexp", "maxexp"]:
    assert float(getattr(ours, field)) == float(getattr(ref, field)), field
  assert ours.dtype is getattr(tnp, name)


def test_finfo_bfloat16_and_arrays():
  f = tnp.finfo(tnp.bfloat16)   # ml_dtypes.finfo(bfloat16)'s values
  assert (f.bits, f.eps, f.max, f.tiny, f.smallest_subnormal, f.precision) == \
    (16, 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126, 2.0 ** -133, 2)
  assert f.resolution == 0.010009765625 and f.min == -f.max
  assert tnp.finfo(tnp.zeros(2, tnp.float16)).eps == 2.0 ** -10 and tnp.finfo(np.float32).bits == 32
  with pytest.raises(TypeError, match="float dtype"):
    tnp.finfo(tnp.int32)


def test_iinfo():
  for name in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]:
    ours, ref = tnp.iinfo(name), np.iinfo(name)
    assert (ours.bits, ours.min, ours.max) == (ref.bits, ref.min, ref.max)
  assert tnp.iinfo(tnp.arange(3)).dtype is tnp.int32
  with pytest.raises(TypeError, match="integer dtype"):
    tnp.iinfo(tnp.float32)


# ---- the array API standard's surface
def test_namespace_hooks():
  x = tnp.ones((2, 3))
  assert tnp.__array_api_version__ == "2024.12" and x.__array_namespace__() is tnp
  assert x.mT.shape == (3, 2) and x.to_device("PYTHON").device == "PYTHON" and x.device == TEST_DEVICE
  info = tnp.__array_namespace_info__()
  assert info.default_dtypes()["real floating"] is tnp.float32 and TEST_DEVICE in info.devices()
  assert set(info.dtypes(kind="signed integer")) == {"int8", "int16", "int32", "int64"}
  with pytest.raises(ValueError, match="2024.12"):
    x.__array_namespace__(api_version="2099.01")


def test_aliases():
  assert tnp.pow is tnp.power and tnp.bitwise_invert is tnp.invert
  assert tnp.bitwise_left_shift is tnp.left_shift and tnp.bitwise_right_shift is tnp.right_shift
  a = np.arange(6.0).reshape(2, 3)
  np.testing.assert_array_equal(np.asarray(tnp.concat([tnp.array(a), tnp.array(a)], axis=None)),
                                np.concatenate([a.ravel(), a.ravel()]))
  np.testing.assert_array_equal(np.asarray(tnp.permute_dims(tnp.array(a), (1, 0))), a.T)
  np.testing.assert_array_equal(np.asarray(tnp.matrix_transpose(tnp.ones((4, 2, 3)))), np.ones((4, 3, 2)))
  np.testing.assert_allclose(np.asarray(tnp.vecdot(tnp.array(a), tnp.array(a), axis=0)), (a * a).sum(0))
  assert [u.tolist() for u in tnp.unstack(tnp.array(a), axis=1)] == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_arc_functions_use_the_arc_spellings():
  if not hasattr(tnp, "arcsin"):
    pytest.skip("tnp.arcsin and friends come from tgfn/ops/math_extra.py (another branch)")
  x = np.array([-0.5, 0.25, 0.9])
  for ours, ref in [(tnp.asin, np.arcsin), (tnp.acos, np.arccos), (tnp.atan, np.arctan), (tnp.asinh, np.arcsinh),
                    (tnp.atanh, np.arctanh)]:
    np.testing.assert_allclose(np.asarray(ours(tnp.array(x))), ref(x), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(tnp.acosh(tnp.array(x + 2))), np.arccosh(x + 2), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(tnp.atan2(tnp.array(x), tnp.array(-x))), np.arctan2(x, -x), rtol=1e-12)


def test_sign_bit_functions():
  x = np.array([1.5, -0.0, 0.0, -np.inf, np.nan, -np.nan, -3.0], np.float32)
  np.testing.assert_array_equal(np.asarray(tnp.signbit(tnp.array(x))), np.signbit(x))
  y = np.array([-1.0, 1.0, -0.0, 2.0, -1.0, 1.0, np.nan], np.float32)
  np.testing.assert_array_equal(np.asarray(tnp.copysign(tnp.array(x), tnp.array(y))).view(np.uint32),
                                np.copysign(x, y).view(np.uint32))
  assert tnp.signbit(tnp.array([-2, 3])).tolist() == [True, False]
  a = np.array([1.0, 1.0, 0.0, 0.0, -0.0, 3.0, np.inf, 2.0, np.nan], np.float64)
  b = np.array([2.0, 0.0, 1.0, -1.0, 0.0, 3.0, 0.0, np.nan, 1.0], np.float64)
  np.testing.assert_array_equal(np.asarray(tnp.nextafter(tnp.array(a), tnp.array(b))), np.nextafter(a, b))
  f16 = np.array([1.0, 0.0, -2.0], np.float16)
  np.testing.assert_array_equal(np.asarray(tnp.nextafter(tnp.array(f16), tnp.array(np.zeros(3, np.float16)))),
                                np.nextafter(f16, np.float16(0)))


def test_cumulative_sum_and_prod():
  x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
  assert tnp.cumulative_sum(tnp.array(x), axis=1, include_initial=True).tolist() == [[0, 1, 3, 6], [0, 4, 9, 15]]
  assert tnp.cumulative_prod(tnp.array(x), axis=0).tolist() == [[1, 2, 3], [4, 10, 18]]
  assert tnp.cumulative_prod(tnp.arange(1, 10)).tolist() == np.cumprod(np.arange(1, 10)).tolist()
  assert tnp.cumulative_prod(tnp.array([2.0, 3.0]), include_initial=True).tolist() == [1.0, 2.0, 6.0]
  assert tnp.cumulative_prod(tnp.array([1, 2], tnp.int8)).dtype is tnp.int32  # as sum's accumulator
  with pytest.raises(ValueError, match="axis is required"):
    tnp.cumulative_sum(tnp.ones((2, 2)))


def test_unique_family_and_nonzero():
  x = np.array([[3.0, 1.0], [np.nan, 3.0], [np.nan, 1.0]], np.float32)
  res = tnp.unique_all(tnp.array(x))
  np.testing.assert_array_equal(np.asarray(res.values), [1.0, 3.0, np.nan, np.nan])   # NaNs are distinct
  assert res.counts.tolist() == [2, 2, 1, 1] and res.indices.tolist() == [1, 0, 2, 4]
  np.testing.assert_array_equal(np.asarray(res.values)[np.asarray(res.inverse_indices)], x)
  assert tnp.unique_values(tnp.array([2, 2, 1])).tolist() == [1, 2]
  assert tnp.unique_counts(tnp.array([2, 2, 1])).counts.tolist() == [1, 2]
  assert tnp.unique_inverse(tnp.array([5, 2, 5])).inverse_indices.tolist() == [1, 0, 1]
  assert [i.tolist() for i in tnp.nonzero(tnp.array([[0, 1], [2, 0]]))] == [[0, 1], [1, 0]]
  assert tnp.count_nonzero(tnp.array([[0, 1], [2, 3]]), axis=1).tolist() == [1, 2]
  with pytest.raises(tgfn.ConcretizationError):
    tgfn.jit(tnp.unique_values)(tnp.array([1, 2]))


def test_isdtype_can_cast_result_type():
  assert tnp.isdtype(tnp.int8, "signed integer") and tnp.isdtype(tnp.uint8, ("bool", "integral"))
  assert tnp.isdtype(tnp.bfloat16, "real floating") and not tnp.isdtype(tnp.float32, "complex floating")
  assert tnp.isdtype(tnp.float32, tnp.float32) and not tnp.isdtype(tnp.float32, "integral")
  with pytest.raises(ValueError, match="kind"):
    tnp.isdtype(tnp.float32, "floating")
  assert tnp.can_cast(tnp.int8, tnp.int16) and not tnp.can_cast(tnp.int16, tnp.int8)
  assert tnp.can_cast(tnp.uint8, tnp.int16) and not tnp.can_cast(tnp.float32, tnp.int32)
  assert tnp.can_cast(tnp.zeros(2, tnp.bool_), tnp.float16)
  assert tnp.result_type(tnp.ones(2), tnp.float64) is tnp.float64
  assert tnp.result_type(tnp.ones(2, tnp.int8), "int16", 1) is tnp.int16


def test_creation_keywords_and_triangles():
  assert tnp.zeros(3, device="PYTHON").device == "PYTHON" and tnp.eye(2, device="PYTHON").device == "PYTHON"
  assert tnp.asarray([1, 2], copy=False).tolist() == [1, 2] and tnp.arange(3, device="CPU").tolist() == [0, 1, 2]
  np.testing.assert_allclose(float(tnp.var(tnp.arange(4.0), correction=1)), np.var(np.arange(4.0), ddof=1))
  np.testing.assert_allclose(float(tnp.std(tnp.arange(4.0), correction=1.5)), np.std(np.arange(4.0), ddof=1.5))
  a = np.arange(12.0).reshape(3, 4)
  np.testing.assert_array_equal(np.asarray(tnp.tril(tnp.array(a), k=1)), np.tril(a, 1))
  np.testing.assert_array_equal(np.asarray(tnp.triu(tnp.array(a), k=-1)), np.triu(a, -1))
  np.testing.assert_array_equal(np.asarray(tnp.diff(tnp.array(a), n=2)), np.diff(a, n=2))
  np.testing.assert_array_equal(np.asarray(tnp.diff(tnp.array(a), axis=0, prepend=0.0)), np.diff(a, axis=0, prepend=0.0))
  for indexing in ("xy", "ij"):
    ours = tnp.meshgrid(tnp.arange(2), tnp.arange(3), tnp.arange(4), indexing=indexing)
    for o, r in zip(ours, np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing=indexing)):
      np.testing.assert_array_equal(np.asarray(o), r)


def test_special_cases():
  got = np.asarray(tnp.floor_divide(tnp.array([1.0, -1.0, 0.0, 1.0, 7.0]), tnp.array([0.0, 0.0, 0.0, -0.0, 2.0])))
  np.testing.assert_array_equal(got, [np.inf, -np.inf, np.nan, -np.inf, 3.0])
  assert np.signbit(float(tnp.tanh(tnp.array(-0.0)))) and float(tgfn.grad(tnp.tanh)(0.0)) == 1.0
  assert tnp.eye(3, k=10 ** 20).tolist() == [[0.0] * 3] * 3 and tnp.eye(2, 3, k=-5).shape == (2, 3)
  assert tnp.eye(3, k=2).tolist() == np.eye(3, k=2).tolist()
  assert tnp.real(tnp.arange(2)).tolist() == [0, 1] and tnp.imag(tnp.ones(2)).tolist() == [0.0, 0.0]
