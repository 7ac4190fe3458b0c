"""The array API standard's surface on tgfn.numpy, dtype constructors and finfo/iinfo."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp


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
