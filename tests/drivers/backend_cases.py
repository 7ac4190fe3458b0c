"""A broad sample of the op suite for checking a backend against the PYTHON reference interpreter: the ops
whose meaning C leaves open (division by zero, float -> int casts, NaN in max, shifts past the width), half
types, reductions, contractions, gathers and a jitted MLP training step. Each case is a function of NumPy
inputs that returns tgfn arrays; tests/drivers/test_opencl.py runs them on OPENCL and PYTHON and compares,
tests/drivers/test_cuda.py compiles every kernel they make for CUDA."""
from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tgfn.engine import realize as realize_mod

SPECIAL_F32 = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.7, -2.7, 255.9, 256.0,
                        -129.0, 65520.0, 1e-7, 3e9, -3e9, 2.0 ** 31, -2.0 ** 31, 9.3e18, -9.3e18, 1e30], np.float32)


def _ints(dtype: str, n: int, seed: int) -> np.ndarray:
  info = np.iinfo(dtype)
  rng = np.random.default_rng(seed)
  edges = np.array([v for v in (info.min, info.min + 1, -1, 0, 1, 2, info.max - 1, info.max) if info.min <= v <= info.max], dtype)
  return np.concatenate([edges, rng.integers(info.min, info.max, n - len(edges), dtype=dtype, endpoint=True)])


def _floats(shape: tuple[int, ...], seed: int, dtype: str = "float32") -> np.ndarray:
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _divisions(dtype: str) -> Callable[[], tuple]:
  def case() -> tuple:
    a, b = tnp.asarray(_ints(dtype, 24, 1)), tnp.asarray(np.tile(np.array([0, -1, 1, 2, -3, 7], dtype=np.int64).astype(dtype), 4))
    return a // b, a % b, a // 0, a % 0
  return case


def _shifts(dtype: str) -> Callable[[], tuple]:
  def case() -> tuple:
    a = tnp.asarray(_ints(dtype, 24, 2))
    amounts = np.arange(-2, 22) * (3 if np.dtype(dtype).itemsize >= 4 else 1)
    b = tnp.asarray(amounts.astype(dtype) if np.dtype(dtype).kind == "i" else np.abs(amounts).astype(dtype))
    return tnp.left_shift(a, b), tnp.right_shift(a, b)
  return case


def _casts() -> tuple:
  x = tnp.asarray(SPECIAL_F32)
  outs = tuple(x.astype(dt) for dt in ("int8", "uint8", "int16", "int32", "uint32", "int64", "uint64", "bool", "float16",
                                        "bfloat16", "float64"))
  d = tnp.asarray(SPECIAL_F32.astype(np.float64) * 1.0000001)
  return outs + (d.astype("float16"), d.astype("int32"), d.astype("float32"), tnp.asarray(_ints("int64", 24, 3)).astype("float16"))


def _nan_max() -> tuple:
  x = tnp.asarray(SPECIAL_F32.reshape(4, 6))
  y = tnp.asarray(SPECIAL_F32[::-1].reshape(4, 6).copy())
  return tnp.maximum(x, y), tnp.minimum(x, y), tnp.maximum(x, 0.0), tnp.max(x, axis=1), tnp.max(y, axis=0), tnp.argmax(x, axis=1)


def _halves() -> tuple:
  h = tnp.asarray(_floats((4, 8), 4, "float16"))
  b = tnp.asarray(_floats((4, 8), 5)).astype("bfloat16")
  return h * 3 + h, tnp.exp(h), h.sum(1), h.mean(), b * b - 1, b.astype("float32"), h * 0.1, b.max(0)


def _wrapping() -> tuple:
  a8, a32, a64 = (tnp.asarray(_ints(dt, 24, 6)) for dt in ("int8", "int32", "int64"))
  u32 = tnp.asarray(_ints("uint32", 24, 7))
  return a8 + a8, a8 * a8, a32 * a32 + 7, -a32, a64 * a64 - a64, u32 * u32, u32 - 5, tnp.abs(a32)


def _elementwise() -> tuple:
  x, y = tnp.asarray(_floats((4, 16), 8)), tnp.asarray(_floats((16,), 9))
  z = tnp.asarray(_floats((4, 16), 10, "float64"))
  return (x * 0.5 + y, x / y, tnp.where(x > y, x - y, x * y), tnp.sqrt(tnp.abs(x)), 1 / x, x.astype("float64") * z,
          tnp.isnan(x / 0.0), tnp.floor(z * 3), tnp.trunc(x * 5), tnp.round(z * 7))


def _transcendentals() -> tuple:
  x = tnp.asarray(_floats((4, 16), 11))
  return tnp.exp(x), tnp.log(tnp.abs(x)), tnp.sin(x * 3), tnp.cos(x), tnp.tanh(x), tnp.exp2(x.astype("float64"))


def _bitcasts() -> tuple:
  x = tnp.asarray(SPECIAL_F32)
  return lax.bitcast_convert_type(x, "int32"), lax.bitcast_convert_type(x, "uint32"), \
      lax.bitcast_convert_type(tnp.asarray(_ints("int64", 24, 12)), "float64").astype("float32") * 0


def _reductions() -> tuple:
  x = tnp.asarray(_floats((8, 33), 13))
  i = tnp.asarray(_ints("int32", 64, 14).reshape(8, 8))
  return x.sum(1), x.sum(0), x.sum(), x.prod(1), x.mean(), i.sum(1), i.max(0), i.min(1), tnp.cumsum(x[:, :6], axis=1), \
      tnp.any(x > 2), tnp.all(i > -100), tnp.argmin(x, axis=0)


def _matmuls() -> tuple:
  a, b = tnp.asarray(_floats((8, 32), 15)), tnp.asarray(_floats((32, 16), 16))
  ai, bi = (tnp.asarray(_ints("int32", 64, s).reshape(8, 8)) for s in (17, 18))
  a64 = tnp.asarray(_floats((4, 16), 19, "float64"))
  c = tnp.asarray(_floats((2, 4, 8), 20))
  d = tnp.asarray(_floats((2, 8, 5), 21))
  return a @ b, a @ a.T, ai @ bi, a64 @ a64.T, tnp.einsum("bij,bjk->bik", c, d)


def _gathers() -> tuple:
  table = tnp.asarray(_floats((20, 8), 22))
  idx = tnp.asarray(np.array([0, 3, 19, -1, 25, -30, 7, 7], np.int32))
  flat = tnp.asarray(_floats((40,), 23))
  return table[idx], flat[idx], tnp.take(flat, idx, mode="clip"), \
      tnp.take_along_axis(table, tnp.asarray(np.random.default_rng(28).integers(-2, 10, (20, 3)).astype(np.int32)), 1, mode="clip")


def _mlp_step() -> tuple:
  def loss(params, x, y):
    w1, b1, w2 = params
    h = tnp.maximum(x @ w1 + b1, 0.0)
    return tnp.mean((h @ w2 - y) ** 2)

  @tgfn.jit
  def step(params, x, y):
    value, grads = tgfn.value_and_grad(loss)(params, x, y)
    return value, tuple(p - 0.1 * g for p, g in zip(params, grads))

  params = (tnp.asarray(_floats((4, 8), 24) * 0.3), tnp.zeros(8), tnp.asarray(_floats((8, 2), 25) * 0.3))
  x, y = tnp.asarray(_floats((6, 4), 26)), tnp.asarray(_floats((6, 2), 27))
  losses = []
  for _ in range(2):
    value, params = step(params, x, y)
    losses.append(value)
  return (*losses, *params)


CASES: dict[str, Callable[[], tuple]] = {
  **{f"divide_{dt}": _divisions(dt) for dt in ("int8", "int32", "int64", "uint8", "uint32")},
  **{f"shift_{dt}": _shifts(dt) for dt in ("int8", "int32", "int64", "uint8", "uint64")},
  "casts": _casts, "nan_max": _nan_max, "halves": _halves, "wrapping": _wrapping, "elementwise": _elementwise,
  "transcendentals": _transcendentals, "bitcasts": _bitcasts, "reductions": _reductions, "matmuls": _matmuls,
  "gathers": _gathers, "mlp_step": _mlp_step,
}
# libm-level functions are a few ulp apart between platforms; everything else must agree to the last bit,
# but for the float policy's fused multiply-adds in reductions (tgfn/codegen/policy.py)
APPROXIMATE = {"transcendentals", "halves", "reductions", "matmuls", "mlp_step"}


def run_case(name: str, device: str, monkeypatch) -> list[np.ndarray]:
  """The outputs of CASES[name] computed on `device` (compiling afresh: the in-memory kernel cache is emptied)."""
  monkeypatch.setenv("DEV", device)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  outs = CASES[name]()
  arrays = [np.asarray(o) for o in outs]
  for o in outs: assert o.device == device, f"{name} ran on {o.device}, expected {device}"
  return arrays


_REFERENCE: dict[str, tuple[list[np.ndarray], list]] = {}


@contextmanager
def recorded_kernels() -> Iterator[list]:
  """The kernels (LoweredKernels) compiled while the block runs, in order."""
  kernels: list = []
  original = realize_mod.prepare_kernel
  def recording(kernel, device, opts=None):  # noqa: E306
    kernels.append(kernel)
    return original(kernel, device, opts)
  realize_mod.prepare_kernel = recording
  try:
    yield kernels
  finally:
    realize_mod.prepare_kernel = original


def nvrtc_or_skip():
  """The CUDA driver module, once NVRTC loads; the test is skipped with the install hint otherwise."""
  from tgfn_drivers import cuda
  try:
    cuda.nvrtc()
  except cuda.CUDAUnavailable as e:
    pytest.skip(str(e))
  return cuda


def reference(name: str, monkeypatch) -> tuple[list[np.ndarray], list]:
  """CASES[name] on the PYTHON reference interpreter: its outputs and the kernels it compiled (LoweredKernels),
  computed once per process for the tests of every backend."""
  if name not in _REFERENCE:
    with recorded_kernels() as kernels:
      outs = run_case(name, "PYTHON", monkeypatch)
    _REFERENCE[name] = (outs, kernels)
  return _REFERENCE[name]


def assert_agree(got: np.ndarray, want: np.ndarray, approximate: bool, what: str) -> None:
  """Same dtype and shape, and the same values: bit for bit (NaN as NaN), or within a few ulp."""
  assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
  half = got.dtype.itemsize == 2 and got.dtype.kind not in "biu"
  if got.dtype.kind not in "biuf": got, want = got.astype(np.float32), want.astype(np.float32)  # bfloat16 (exact)
  if got.dtype.kind in "biu" or not approximate:
    # floats bit for bit, NaN as NaN (whatever its payload)
    same = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    signs = np.signbit(got) == np.signbit(want) if got.dtype.kind == "f" else True
    bad = ~(same & (signs | np.isnan(got)))
    assert not bad.any(), f"{what}: {got[bad][:8]} vs the reference {want[bad][:8]}"
  else:
    tol = 1e-2 if half else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True, err_msg=what)
