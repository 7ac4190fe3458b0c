"""Array creation: array/asarray, zeros/ones/full/empty, the *_like family, arange, linspace, eye.
Default dtypes follow JAX (Python floats -> float32, Python ints -> int32, NumPy data keeps its dtype);
values are compared with NumPy. Runs on CPU and on the PYTHON reference device."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tgfn.numpy as tnp
from tgfn.dtype import DType, dtypes
from tests.conftest import assert_close
from tests.op_registry import ALL
from tests.strategies import array_shapes, op_settings


@pytest.mark.parametrize("data, dtype", [
  ([1, 2, 3], dtypes.int32), ([1.0, 2], dtypes.float32), ([True, False], dtypes.bool), (2.5, dtypes.float32),
  (7, dtypes.int32), ([[1, 2**40]], dtypes.int64),  # an int that needs 64 bits gets them
  ([], dtypes.float32), (np.arange(3, dtype=np.uint16), dtypes.uint16), (np.float16(1.5), dtypes.float16),
  (np.array([1, 2], np.int64), dtypes.int64), (np.array(True), dtypes.bool),
])
def test_array_default_dtypes(device: str, data, dtype: DType) -> None:
  x = tnp.array(data)
  assert x.dtype == dtype and x.shape == np.shape(data)
  assert_close(x, np.asarray(data).astype(dtype.np), check_dtype=False)
  assert x.device == device


@given(data=st.data())
@op_settings(max_examples=15)
def test_array_round_trips(device: str, data: st.DataObject) -> None:
  dt = data.draw(st.sampled_from([d for d in ALL if d is not dtypes.bfloat16]), label="dtype")
  shape = data.draw(array_shapes(), label="shape")
  host = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 7 - 3
  x = tnp.asarray(host.astype(dt.np))
  assert x.dtype == dt
  assert_close(x, host.astype(dt.np))
  # + 0 (a weak int) keeps the dtype; bool + 0 is int32
  want = host.astype(bool).astype(np.int32) if dt.is_bool else host.astype(dt.np)
  assert_close(tnp.array(host, dtype=dt) + 0, want)


def test_bfloat16_data(device: str) -> None:
  # bfloat16 keeps 8 significant bits: ties round to even, 3e38 rounds to 0x1.c4p+127
  x = tnp.array([1.0, 1.00390625, 1.01171875, 3.0e38, -2.0**-130], dtype=tnp.bfloat16)
  assert x.dtype == dtypes.bfloat16
  want = np.array([1.0, 1.0, 1.015625, float.fromhex("0x1.c4p+127"), -2.0**-130], np.float32)
  assert_close(x.astype(tnp.float32), want, rtol=0, atol=0)


# Lists and tuples holding Arrays are built in the graph and promoted as jnp.array promotes them (dtypes
# from JAX 0.10), Python scalars weak. NumPy scalars are weak too, as in tgfn's operators (JAX: float32).
@pytest.mark.parametrize("data, dtype", [
  (lambda: [tnp.ones((), tnp.float16), 1.0], dtypes.float16),
  (lambda: [tnp.ones((), tnp.int8), 3], dtypes.int8),
  (lambda: [True, tnp.ones((), tnp.int8)], dtypes.int8),
  (lambda: [tnp.ones((), tnp.bfloat16), 1], dtypes.bfloat16),
  (lambda: [tnp.ones(2, tnp.int8), np.array([2, 3], np.int16)], dtypes.int16),
  (lambda: [[tnp.ones((), tnp.int8), 2], (3, np.int8(4))], dtypes.int8),
  (lambda: (tnp.ones((), tnp.float16), np.float32(2.5)), dtypes.float16),
], ids=["f16,1.0", "i8,3", "True,i8", "bf16,1", "i8[2],np.int16[2]", "nested-i8", "f16,np.float32"])
def test_array_of_arrays_promotes_as_jax(device: str, data, dtype: DType) -> None:
  data = data()
  x = tnp.array(data)
  assert x.dtype == dtype and x.device == device
  want = np.array([[float(v) for v in np.ravel(np.asarray(item, np.float64))] for item in data])
  assert_close(x.astype(tnp.float32), want.reshape(x.shape).astype(np.float32))


def test_array_of_arrays_checks_shapes_and_ranges() -> None:
  with pytest.raises(ValueError, match=r"(?s)uneven shape: data\[0\] has shape \(2,\) but data\[1\] has shape "
                                       r"\(3,\).*test_creation.py:\d+"):
    tnp.array([tnp.ones(2), [1.0, 2.0, 3.0]])
  with pytest.raises(ValueError, match=r"data\[1\]\[0\] has shape \(\) but data\[1\]\[1\] has shape \(1,\)"):
    tnp.array([(1.0, 2.0), [tnp.ones(()), [3.0]]])
  with pytest.raises(OverflowError, match="Python int -1 does not fit in uint8"):
    tnp.array([tnp.ones((), tnp.uint8), -1])


@pytest.mark.parametrize("fn, fill", [(tnp.zeros, 0), (tnp.ones, 1), (tnp.empty, 0)])
def test_filled(device: str, fn, fill) -> None:
  assert_close(fn((2, 3)), np.full((2, 3), fill, np.float32))  # float32 by default
  assert_close(fn(4, dtype=tnp.int8), np.full(4, fill, np.int8))
  assert_close(fn((), dtype=tnp.bool_), np.full((), fill, bool))
  assert_close(fn((0, 5), dtype=tnp.uint32), np.zeros((0, 5), np.uint32))
  assert fn(3, dtype=tnp.bfloat16).dtype == dtypes.bfloat16


def test_full(device: str) -> None:
  assert_close(tnp.full((2,), 7), np.full(2, 7, np.int32))
  assert_close(tnp.full((2,), 2.5), np.full(2, 2.5, np.float32))
  assert_close(tnp.full((2, 2), True), np.full((2, 2), True))
  assert_close(tnp.full(3, -1, dtype=tnp.int64), np.full(3, -1, np.int64))
  row = np.array([1, 2, 3], np.int16)
  assert_close(tnp.full((2, 3), row), np.full((2, 3), row))
  assert_close(tnp.full((2,), 0.1, dtype=tnp.float16), np.full(2, 0.1, np.float16))


def test_like(device: str) -> None:
  a = np.array([[1, 2], [3, 4]], np.uint8)
  x = tnp.array(a)
  assert_close(tnp.zeros_like(x), np.zeros_like(a))
  assert_close(tnp.ones_like(x, dtype=tnp.float32), np.ones_like(a, np.float32))
  assert_close(tnp.full_like(x, 9), np.full_like(a, 9))
  assert_close(tnp.full_like(a, 1.5), np.full_like(a, 1))  # the fill converts to the array's dtype
  assert_close(tnp.empty_like(x, shape=(3,)), np.zeros(3, np.uint8))
  assert_close(tnp.ones_like([1.0, 2.0]), np.ones(2, np.float32))


@pytest.mark.parametrize("args, kwargs, dtype", [
  ((5,), {}, np.int32), ((2, 11, 3), {}, np.int32), ((5, 0, -2), {}, np.int32), ((0,), {}, np.int32),
  ((0, 1, 0.25), {}, np.float32), ((-1.5, 2.0), {}, np.float32),
  ((2, 11, 3), {"dtype": tnp.float16}, np.float16),
  ((3,), {"dtype": tnp.int64}, np.int64), ((1, 2, 0.1), {}, np.float32),
])
def test_arange(device: str, args, kwargs, dtype) -> None:
  x = tnp.arange(*args, **kwargs)
  assert_close(x, np.arange(*args).astype(dtype))


@pytest.mark.parametrize("args, kwargs", [
  ((0, 1, 5), {}), ((2, 3, 1), {}), ((2, 3, 0), {}), ((0, 1, 4), {"endpoint": False}), ((-1, 1), {}),
  ((1, 0, 7), {}), ((0, 10, 4), {"dtype": tnp.int32}), ((0, 1, 3), {"dtype": tnp.float64}),
])
def test_linspace(device: str, args, kwargs) -> None:
  dt = kwargs.get("dtype", tnp.float32)
  want = np.linspace(*args, endpoint=kwargs.get("endpoint", True))
  # integer dtypes round toward -inf, as JAX
  want = (np.floor(want) if dt.is_int else want).astype(dt.np)
  assert_close(tnp.linspace(*args, **kwargs), want)


@pytest.mark.parametrize("args, kwargs", [
  ((3,), {}), ((2, 4), {"k": 1}), ((4, 2), {"k": -1}), ((3,), {"k": -2, "dtype": tnp.int32}),
  ((3,), {"k": 5}),
  ((0,), {}), ((1, 3), {"k": -3}), ((2,), {"dtype": tnp.bool_}),
])
def test_eye(device: str, args, kwargs) -> None:
  dt = kwargs.pop("dtype", tnp.float32)
  assert_close(tnp.eye(*args, **kwargs, dtype=dt), np.eye(*args, **kwargs, dtype=dt.np))
  assert_close(tnp.identity(3, dtype=dt), np.identity(3, dt.np))


# ---- bad input
def test_creation_errors(device: str) -> None:
  with pytest.raises(OverflowError, match=r"Python int 300 does not fit in int8 \(range -128..127\)"):
    tnp.array([1, 300], dtype=tnp.int8)
  with pytest.raises(OverflowError, match="Python int -1 does not fit in uint8"):
    tnp.asarray(-1, dtype=tnp.uint8)
  with pytest.raises(OverflowError, match="Python int 300 does not fit in int8"):
    tnp.full((2,), 300, dtype=tnp.int8)
  with pytest.raises(ValueError, match=r"negative dimensions are not allowed, got shape \(2, -1\)"):
    tnp.zeros((2, -1))
  with pytest.raises(ValueError, match="arange: step must not be zero"):
    tnp.arange(0, 5, 0)
  with pytest.raises(ValueError, match="linspace: num must be non-negative, got -1"):
    tnp.linspace(0, 1, -1)
  with pytest.raises(TypeError, match=r"dtype timedelta64\[s\] is not supported"):
    tnp.zeros(2, dtype="timedelta64[s]")
  with pytest.raises(TypeError, match="cannot make an array from list data of NumPy dtype <U1"):
    tnp.array(["a"])
