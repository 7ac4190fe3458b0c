"""tnp.fft against NumPy (values, dtypes, n=/s=, axis=/axes=, norm=, empty batches) on CPU and on the
PYTHON device, eager and jitted; derivatives against JAX's (jvp, vjp, grad) and finite differences."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.test_util import check_grads

NORMS = [None, "ortho", "forward"]
_TOL = {np.dtype(np.complex64): 3e-5, np.dtype(np.float32): 3e-5, np.dtype(np.complex128): 1e-12,
        np.dtype(np.float64): 1e-12}


def _rand(shape, dt, seed=0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  x = rng.standard_normal(shape)
  return (x + 1j * rng.standard_normal(shape)).astype(dt) if np.dtype(dt).kind == "c" else x.astype(dt)


def _check(got, want, dtype) -> None:
  got = np.asarray(got)
  assert got.dtype == np.dtype(dtype) and got.shape == want.shape, (got.dtype, dtype, got.shape, want.shape)
  tol = _TOL[np.dtype(dtype)]
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


@pytest.mark.parametrize("dt", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(5,), (3, 8), (0, 4), (2, 0, 6), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("norm", NORMS)
def test_one_axis_transforms_match_numpy(device, dt, shape, norm) -> None:
  x = _rand(shape, dt)
  real_dt = np.float32 if dt is np.complex64 else np.float64
  r = x.real.astype(real_dt)
  X, R = tnp.array(x), tnp.array(r)
  for axis in (-1, 0):
    if shape[axis] == 0: continue
    for n in (None, 3, 9):
      _check(tnp.fft.fft(X, n, axis, norm), np.fft.fft(x, n, axis, norm), dt)
      _check(tnp.fft.ifft(X, n, axis, norm), np.fft.ifft(x, n, axis, norm), dt)
      _check(tnp.fft.rfft(R, n, axis, norm), np.fft.rfft(r, n, axis, norm), dt)
      if n is not None or shape[axis] > 1:
        _check(tnp.fft.irfft(X, n, axis, norm), np.fft.irfft(x, n, axis, norm), real_dt)


@pytest.mark.parametrize("norm", NORMS)
def test_several_axes_match_numpy(device, norm) -> None:
  x = _rand((3, 4, 6), np.complex128, 1)
  r = x.real
  X, R = tnp.array(x), tnp.array(r)
  _check(tnp.fft.fft2(X, norm=norm), np.fft.fft2(x, norm=norm), np.complex128)
  _check(tnp.fft.ifft2(X, s=(5, 3), norm=norm), np.fft.ifft2(x, s=(5, 3), norm=norm), np.complex128)
  _check(tnp.fft.fftn(X, norm=norm), np.fft.fftn(x, norm=norm), np.complex128)
  _check(tnp.fft.ifftn(X, axes=(0, 2), norm=norm), np.fft.ifftn(x, axes=(0, 2), norm=norm), np.complex128)
  _check(tnp.fft.rfftn(R, norm=norm), np.fft.rfftn(r, norm=norm), np.complex128)
  _check(tnp.fft.rfft2(R, s=(3, 5), norm=norm), np.fft.rfft2(r, s=(3, 5), norm=norm), np.complex128)
  _check(tnp.fft.irfftn(X, norm=norm), np.fft.irfftn(x, norm=norm), np.float64)
  _check(tnp.fft.irfft2(X, s=(4, 7), axes=(0, 1), norm=norm), np.fft.irfft2(x, s=(4, 7), axes=(0, 1), norm=norm),
         np.float64)


def test_input_dtypes_follow_jax(device) -> None:
  ints = np.arange(6)
  _check(tnp.fft.fft(ints), np.fft.fft(ints).astype(np.complex64), np.complex64)
  _check(tnp.fft.rfft(ints.astype(np.float64)), np.fft.rfft(ints), np.complex128)
  _check(tnp.fft.irfft(tnp.fft.rfft(tnp.array(ints, tnp.float32)), 6), ints.astype(np.float32), np.float32)
  assert tnp.fft.ifft(tnp.ones(4, tnp.float64)).dtype is tnp.complex128


def test_jit_and_vmap(device) -> None:
  x = _rand((3, 8), np.complex64, 2)
  f = tgfn.jit(lambda a: tnp.fft.ifft(tnp.fft.fft(a, norm="ortho") * 2, norm="ortho"))
  _check(f(tnp.array(x)), (2 * x).astype(np.complex64), np.complex64)
  _check(tgfn.vmap(lambda a: tnp.fft.rfft(a, 6))(tnp.array(x.real)), np.fft.rfft(x.real, 6).astype(np.complex64),
         np.complex64)
  _check(tgfn.vmap(tnp.fft.fft2)(tnp.array(x.reshape(3, 2, 4))), np.fft.fft2(x.reshape(3, 2, 4)).astype(np.complex64),
         np.complex64)


def test_errors() -> None:
  with pytest.raises(ValueError, match="invalid number of data points \\(0\\)"): tnp.fft.fft(tnp.ones((2, 0)))
  with pytest.raises(ValueError, match="invalid number of data points \\(0\\)"): tnp.fft.irfft(tnp.ones(1))
  with pytest.raises(ValueError, match="axis 2 is out of range"): tnp.fft.fft(tnp.ones((2, 3)), axis=2)
  with pytest.raises(ValueError, match="norm must be one of"): tnp.fft.fft(tnp.ones(3), norm="bogus")
  with pytest.raises(ValueError, match="at least one axis"): tnp.fft.fft(tnp.ones(()))
  with pytest.raises(TypeError, match="rfft needs a real input"): tnp.fft.rfft(tnp.ones(3) * 1j)
  with pytest.raises(ValueError, match="repeated axes"): tnp.fft.fftn(tnp.ones((2, 2)), axes=(0, 0))


# ---- derivatives
_ONE_AXIS = [("fft", None), ("fft", 5), ("ifft", 9), ("rfft", None), ("rfft", 5), ("irfft", None), ("irfft", 7),
             ("irfft", 10)]


@pytest.mark.parametrize("name, n", _ONE_AXIS, ids=[f"{a}-{b}" for a, b in _ONE_AXIS])
@pytest.mark.parametrize("norm", NORMS)
def test_jvp_and_vjp_match_jax(name, n, norm) -> None:
  x = _rand((2, 7), np.float32 if name == "rfft" else np.complex64, 3)
  f = lambda a: getattr(tnp.fft, name)(a, n, norm=norm)  # noqa: E731
  jf = lambda a: getattr(jnp.fft, name)(a, n, norm=norm)  # noqa: E731
  y, pullback = tgfn.vjp(f, tnp.array(x))
  jy, jpullback = jax.vjp(jf, jnp.asarray(x))
  ct = _rand(jy.shape, jy.dtype, 4)
  np.testing.assert_allclose(np.asarray(pullback(tnp.array(ct))[0]), np.asarray(jpullback(jnp.asarray(ct))[0]),
                             rtol=1e-5, atol=1e-5)
  t = _rand(x.shape, x.dtype, 5)
  _, tangent = tgfn.jvp(f, (tnp.array(x),), (tnp.array(t),))
  _, jtangent = jax.jvp(jf, (jnp.asarray(x),), (jnp.asarray(t),))
  np.testing.assert_allclose(np.asarray(tangent), np.asarray(jtangent), rtol=1e-5, atol=1e-5)


def test_grad_of_a_real_loss_matches_jax() -> None:
  z = _rand((3, 4), np.complex64, 6)
  f = lambda a: tnp.sum(tnp.abs(tnp.fft.fft2(a * tnp.conj(a) + a, norm="ortho")) ** 2) + tnp.sum(tnp.fft.irfft(a))  # noqa: E731
  jf = lambda a: jnp.sum(jnp.abs(jnp.fft.fft2(a * jnp.conj(a) + a, norm="ortho")) ** 2) + jnp.sum(jnp.fft.irfft(a))  # noqa: E731
  want = np.asarray(jax.grad(jf)(jnp.asarray(z)))
  np.testing.assert_allclose(np.asarray(tgfn.grad(f)(tnp.array(z))), want, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(tgfn.jit(tgfn.grad(f))(tnp.array(z))), want, rtol=1e-4, atol=1e-4)


def test_check_grads_on_real_compositions() -> None:
  """Real in, real out through rfft/fft/irfft: finite differences, to second order."""
  x = _rand((2, 6), np.float64, 7)
  w = tnp.array(_rand((4,), np.complex128, 8))
  f = lambda a: tnp.fft.irfft(tnp.fft.rfft(a, norm="ortho") * w, 6) + tnp.real(tnp.fft.ifft(a * a, 8))[:, :6]  # noqa: E731
  check_grads(f, (tnp.array(x),), order=2)
