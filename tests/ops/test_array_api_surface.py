"""What the array API conformance suite (data-apis/array-api-tests) found missing or wrong on tgfn.numpy:
keywords the standard's signatures name, the inspection namespace's contents, DLPack, special cases."""
import inspect

import numpy as np
import pytest

import tgfn.numpy as tnp

CREATION = ["arange", "asarray", "empty", "empty_like", "eye", "full", "full_like", "linspace", "ones",
            "ones_like", "zeros", "zeros_like"]


@pytest.mark.parametrize("name", CREATION)
def test_creation_signatures_show_device(name):
  param = inspect.signature(getattr(tnp, name)).parameters["device"]
  assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None


def test_copy_and_device_keywords():
  x = tnp.arange(6)
  assert "copy" in inspect.signature(tnp.astype).parameters and "copy" in inspect.signature(tnp.reshape).parameters
  assert tnp.astype(x, tnp.float32, copy=False).dtype is tnp.float32
  assert tnp.astype(x, tnp.float32, device="PYTHON").device == "PYTHON"
  assert tnp.reshape(x, (2, 3), copy=False).shape == (2, 3)
  assert tnp.fft.fftfreq(4, device="PYTHON").device == "PYTHON"
  assert tnp.fft.rfftfreq(4, device="PYTHON").device == "PYTHON"


def test_info_dtypes_are_the_standards():
  names = set(tnp.__array_namespace_info__().dtypes())
  assert "float16" not in names and "bfloat16" not in names
  assert {"bool", "int8", "uint64", "float32", "float64", "complex64", "complex128"} <= names


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_hermitian_ffts_match_numpy(norm):
  spectrum = np.array([1 + 2j, 3 - 1j, 2 + 0.5j, 1j])
  signal = np.array([0.5, -1.0, 2.0, 3.0, 0.25])
  np.testing.assert_allclose(np.asarray(tnp.fft.hfft(tnp.asarray(spectrum), norm=norm)),
                             np.fft.hfft(spectrum, norm=norm), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(tnp.fft.hfft(tnp.asarray(spectrum), n=5, norm=norm)),
                             np.fft.hfft(spectrum, n=5, norm=norm), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(tnp.fft.ihfft(tnp.asarray(signal), norm=norm)),
                             np.fft.ihfft(signal, norm=norm), rtol=1e-12)
  with pytest.raises(ValueError, match="norm"):
    tnp.fft.hfft(tnp.asarray(spectrum), norm="both")


def test_dlpack_round_trip():
  x = tnp.asarray([1.0, 2.0, 3.0])
  assert x.__dlpack_device__() == (1, 0)
  np.testing.assert_array_equal(np.from_dlpack(x), [1.0, 2.0, 3.0])
  x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
  y = tnp.from_dlpack(np.arange(4, dtype=np.int16))
  assert y.dtype is tnp.int16 and y.tolist() == [0, 1, 2, 3]
  assert tnp.from_dlpack(x, device="PYTHON").device == "PYTHON"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floor_divide_special_cases_are_the_standards(dtype):
  inf = np.inf
  a = np.array([-0.0, -0.0, 0.0, inf, -inf, inf, 1.0, -1.0, 1.0, -1.0, 7.0, 1.0, 0.0], dtype)
  b = np.array([2.0, -2.0, -2.0, 2.0, 2.0, -3.0, -inf, inf, inf, -inf, 2.0, -0.0, 0.0], dtype)
  # finite // inf keeps NumPy's and JAX's -1 (the standard's -0 would break a == (a // b) * b + a % b)
  want = np.array([-0.0, 0.0, -0.0, inf, -inf, -inf, -1.0, -1.0, 0.0, 0.0, 3.0, -inf, np.nan], dtype)
  got = np.asarray(tnp.floor_divide(tnp.asarray(a), tnp.asarray(b)))
  np.testing.assert_array_equal(got, want)
  zeros = want == 0   # assert_array_equal takes -0 == 0: compare their signs too
  np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


def test_atan_keeps_the_sign_of_zero():
  got = np.asarray(tnp.atan(tnp.asarray([-0.0, 0.0], tnp.float32)))
  assert list(np.signbit(got)) == [True, False] and not got.any()


def test_vecdot_conjugates_checks_lengths_and_keeps_the_dtype():
  assert tnp.linalg.vecdot is tnp.vecdot
  assert complex(tnp.linalg.vecdot(tnp.asarray([1j, 2j, 3j]), tnp.asarray([1, 2j, 3]))) == 4 - 10j
  out = tnp.vecdot(tnp.asarray([100, 2], tnp.uint8), tnp.asarray([[3, 4]], tnp.uint8))
  assert out.dtype is tnp.uint8 and out.tolist() == [(300 + 8) % 256]
  assert tnp.vecdot(tnp.ones((3, 2)), tnp.ones((3, 1)), axis=0).tolist() == [3.0, 3.0]
  with pytest.raises(ValueError, match="same length"):
    tnp.vecdot(tnp.ones(0), tnp.ones(1))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_zero_remainder_has_the_divisors_sign(dtype):
  a, b = np.array([-0.0, 0.0, 4.0, -4.0, 4.0], dtype), np.array([2.0, -2.0, 2.0, 2.0, -2.0], dtype)
  got = np.asarray(tnp.remainder(tnp.asarray(a), tnp.asarray(b)))
  assert not got.any() and list(np.signbit(got)) == [False, True, False, False, True]   # as NumPy's


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_acosh_below_one_is_nan(dtype):
  got = np.asarray(tnp.acosh(tnp.asarray([-7.6e30, -2.0, 0.5, 1.0], dtype)))
  assert np.isnan(got[:3]).all() and got[3] == 0.0
