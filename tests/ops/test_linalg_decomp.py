"""tnp.linalg: factorizations run as host kernels (HOST nodes) against NumPy, their derivatives against
finite differences, vmap against a loop, jit against eager; and tnp.fft's real-valued helpers."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.schedule.schedule import create_schedule
from tgfn.test_util import check_grads
from tgfn.uop.ops import Ops, UOp
from tgfn.uop.spec import SpecError, verify_tensor_graph
from tests.conftest import assert_close

L = tnp.linalg
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def _rng(seed=0): return np.random.default_rng(seed)


def _spd(shape, dtype, seed=0):
  a = _rng(seed).standard_normal(shape)
  return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


@pytest.fixture
def python_device(monkeypatch):
  """The reference interpreter: no C compiler in the loop, so many small graphs are quick to run."""
  monkeypatch.setenv("DEV", "PYTHON")


# ---- values against NumPy, float32 and float64, batched
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_factorizations_match_numpy(dtype):
  a = _rng().standard_normal((2, 4, 4)).astype(dtype)
  b = _rng(1).standard_normal((2, 4, 3)).astype(dtype)
  tall = _rng(2).standard_normal((2, 5, 3)).astype(dtype)
  spd = _spd((2, 4, 4), dtype)
  tol = TOL[dtype]
  assert_close(L.inv(a), np.linalg.inv(a), **tol)
  assert_close(L.solve(a, b), np.linalg.solve(a, b), **tol)
  assert_close(L.solve(a[0], b[0, :, 0]), np.linalg.solve(a[0], b[0, :, 0]), **tol)
  assert_close(L.det(a), np.linalg.det(a), **tol)
  sign, logabs = L.slogdet(a)
  assert_close(sign, np.linalg.slogdet(a)[0], **tol)
  assert_close(logabs, np.linalg.slogdet(a)[1], **tol)
  assert_close(L.cholesky(spd), np.linalg.cholesky(spd), **tol)
  assert_close(L.cholesky(spd, upper=True), np.swapaxes(np.linalg.cholesky(spd), -1, -2), **tol)
  w, v = L.eigh(spd)
  assert_close(w, np.linalg.eigh(spd)[0], **tol)
  assert_close(np.abs(v.numpy()), np.abs(np.linalg.eigh(spd)[1]), **tol)
  assert_close(L.eigvalsh(spd), np.linalg.eigvalsh(spd), **tol)
  for mode in ("reduced", "complete"):
    q, r = L.qr(tall, mode=mode)
    q_ref, r_ref = np.linalg.qr(tall, mode=mode)
    assert_close(q, q_ref, **tol)
    assert_close(r, r_ref, **tol)
  assert_close(L.qr(tall, mode="r"), np.linalg.qr(tall, mode="r"), **tol)
  for full in (True, False):
    u, s, vh = L.svd(tall, full_matrices=full)
    u_ref, s_ref, vh_ref = np.linalg.svd(tall, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (u_ref.shape, s_ref.shape, vh_ref.shape)
    assert_close(s, s_ref, **tol)
    assert_close(np.abs(u.numpy()), np.abs(u_ref), **tol)
  assert_close(L.svd(tall, compute_uv=False), np.linalg.svd(tall, compute_uv=False), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_composed_functions_match_numpy(dtype, python_device):
  a = _rng().standard_normal((2, 4, 4)).astype(dtype)
  tall = _rng(2).standard_normal((5, 3)).astype(dtype)
  rhs = _rng(3).standard_normal(5).astype(dtype)
  tol = TOL[dtype]
  assert_close(L.pinv(tall), np.linalg.pinv(tall), **tol)
  assert_close(L.matrix_rank(tall), np.linalg.matrix_rank(tall), check_dtype=False)
  low_rank = np.outer(tall[:, 0], tall[:, 1]).astype(dtype)
  assert int(L.matrix_rank(low_rank)) == np.linalg.matrix_rank(low_rank) == 1
  x, resid, rank, s = L.lstsq(tall, rhs)
  x_ref, resid_ref, rank_ref, s_ref = np.linalg.lstsq(tall, rhs)
  for got, want in ((x, x_ref), (resid, resid_ref), (s, s_ref)): assert_close(got, want, **tol)
  assert int(rank) == rank_ref
  for n in (0, 1, 3, -2):
    assert_close(L.matrix_power(a, n), np.linalg.matrix_power(a, n), rtol=tol["rtol"] * 100, atol=tol["atol"] * 100)
  for ord in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
    assert_close(L.norm(a, ord, axis=(1, 2)), np.linalg.norm(a, ord, axis=(1, 2)), **tol)
    assert_close(L.norm(a, ord, axis=(2, 0), keepdims=True), np.linalg.norm(a, ord, axis=(2, 0), keepdims=True), **tol)
  for ord in (None, 0, 1, 2, 3.5, -1, np.inf, -np.inf):
    assert_close(L.norm(a, ord, axis=1), np.linalg.norm(a, ord, axis=1), **tol)
  assert_close(L.norm(a), np.linalg.norm(a), **tol)
  assert_close(L.norm(a[0], 2), np.linalg.norm(a[0], 2), **tol)
  assert_close(tnp.cross(a[..., :3], a[..., 1:]), np.cross(a[..., :3], a[..., 1:]), **tol)
  assert_close(L.trace(a), np.linalg.trace(a), **tol)
  assert_close(L.diagonal(a, offset=1), np.linalg.diagonal(a, offset=1), **tol)


def test_small_float_and_integer_inputs_promote():
  a = np.array([[2, 1], [1, 3]])
  assert_close(L.inv(a), np.linalg.inv(a).astype(np.float32), rtol=1e-6)
  half = L.inv(a.astype(np.float16))
  assert half.dtype == tnp.float16
  assert_close(half, np.linalg.inv(a).astype(np.float16), rtol=1e-3)


def test_eigh_reads_one_triangle_without_symmetrizing(python_device):
  a = _rng().standard_normal((3, 3))
  for uplo in ("L", "U"):
    got = L.eigh(a, UPLO=uplo, symmetrize_input=False).eigenvalues
    assert_close(got, np.linalg.eigh(a, UPLO=uplo)[0], rtol=1e-12, atol=1e-12)
  assert_close(L.eigh(a).eigenvalues, np.linalg.eigvalsh((a + a.T) / 2), rtol=1e-12, atol=1e-12)


def test_failed_factorizations_give_nan_as_jax():
  batch = np.stack([np.eye(2), np.zeros((2, 2))])
  out = L.inv(batch).numpy()
  assert_close(out[0], np.eye(2))
  assert np.isnan(out[1]).all()
  assert np.isnan(L.cholesky(-np.eye(2)).numpy()).all()


def test_shape_errors_are_clear():
  with pytest.raises(ValueError, match="square"): L.inv(np.ones((2, 3)))
  with pytest.raises(ValueError, match="at least 2"): L.det(np.ones(3))
  with pytest.raises(ValueError, match="b's"): L.solve(np.eye(3), np.ones(4))
  with pytest.raises(TypeError, match="int"): L.matrix_power(np.eye(2), 1.5)
  with pytest.raises(ValueError, match="mode"): L.qr(np.eye(2), mode="full")


# ---- the HOST node through the schedule, the engine, the jit replay and both devices
def test_host_call_is_its_own_schedule_item():
  a = tnp.array(_rng().standard_normal((3, 3)))
  out = L.inv(a * 2.0) + 1.0
  items = create_schedule([out.uop])
  kinds = [("host" if i.host else "kernel" if i.kernel is not None else "copy") for i in items]
  assert kinds == ["kernel", "host", "kernel"]
  assert_close(out, np.linalg.inv(a.numpy() * 2) + 1, rtol=1e-12)


def test_spec_rejects_malformed_host_nodes():
  x = tnp.array(np.eye(3)).uop
  with pytest.raises(SpecError, match="no host function"):
    verify_tensor_graph(UOp(Ops.HOST, x.dtype, (x,), ("nope", (), (3, 3))))
  with pytest.raises(SpecError, match="packed"):
    verify_tensor_graph(UOp(Ops.HOST, x.dtype, (x,), ("inv", (), (3, 4))))


@pytest.mark.parametrize("dev", ["CPU", "PYTHON"])
def test_jit_matches_eager_on_both_devices(dev, monkeypatch):
  monkeypatch.setenv("DEV", dev)

  def f(x, b):
    w, v = L.eigh(x @ x.T)
    return L.solve(x, b) * 2.0, w, (v * v).sum(0), L.det(x)

  jitted = tgfn.jit(f)
  for seed in (0, 1):  # the second call replays the compiled graph, host calls included
    x, b = _rng(seed).standard_normal((3, 3)), _rng(seed + 5).standard_normal(3)
    for got, want in zip(jitted(x, b), f(x, b)): assert_close(got, want.numpy(), rtol=1e-12, atol=1e-12)


def test_vmap_matches_a_loop():
  a = _rng().standard_normal((4, 3, 3))
  b = _rng(1).standard_normal(3)
  got = tgfn.vmap(L.solve, in_axes=(0, None))(a, b)
  assert_close(got, np.stack([np.linalg.solve(x, b) for x in a]), rtol=1e-12, atol=1e-12)
  stacked = _rng(2).standard_normal((2, 3, 4, 3))
  singular_values = tgfn.vmap(tgfn.vmap(lambda x: L.svd(x, full_matrices=False).S))(stacked)
  assert_close(singular_values, np.linalg.svd(stacked, compute_uv=False), rtol=1e-12, atol=1e-12)
  grads = tgfn.vmap(tgfn.grad(L.det))(a)
  assert_close(grads, np.stack([np.linalg.det(x) * np.linalg.inv(x).T for x in a]), rtol=1e-10, atol=1e-12)
  assert_close(tgfn.grad(lambda x: tgfn.vmap(L.det)(x).sum())(a), grads.numpy(), rtol=1e-12, atol=1e-12)


# ---- derivatives against finite differences, forward and reverse
def _svd_parts(x):
  u, s, vh = L.svd(x, full_matrices=False)
  return s, u * u, vh * vh  # squares: independent of LAPACK's sign choice for each singular vector


DERIVATIVE_CASES = {
  "inv": (L.inv, lambda: (_rng().standard_normal((2, 3, 3)),)),
  "solve": (L.solve, lambda: (_rng().standard_normal((3, 3)), _rng(1).standard_normal((3, 2)))),
  "det": (L.det, lambda: (_rng().standard_normal((2, 3, 3)),)),
  "slogdet": (lambda x: L.slogdet(x).logabsdet, lambda: (_rng().standard_normal((3, 3)),)),
  "cholesky": (L.cholesky, lambda: (_spd((3, 3), np.float64),)),
  "qr": (L.qr, lambda: (_rng().standard_normal((4, 3)),)),
  "eigh": (lambda x: (L.eigh(x).eigenvalues, L.eigh(x).eigenvectors ** 2), lambda: (_spd((3, 3), np.float64),)),
  "svd_tall": (_svd_parts, lambda: (_rng().standard_normal((4, 3)),)),
  "svd_wide": (_svd_parts, lambda: (_rng().standard_normal((3, 4)),)),
  "pinv": (L.pinv, lambda: (_rng().standard_normal((4, 3)),)),
  "lstsq": (lambda a, b: L.lstsq(a, b)[0], lambda: (_rng().standard_normal((4, 3)), _rng(1).standard_normal(4))),
  "norm_2": (lambda x: L.norm(x, 2), lambda: (_rng().standard_normal((4, 3)),)),
  "matrix_power": (lambda x: L.matrix_power(x, -2), lambda: (_rng().standard_normal((3, 3)) + 3 * np.eye(3),)),
}


@pytest.mark.parametrize("name", list(DERIVATIVE_CASES))
def test_derivatives_match_finite_differences(name, python_device):
  f, make_args = DERIVATIVE_CASES[name]
  check_grads(f, make_args(), order=1)


def test_second_derivatives(python_device):
  check_grads(L.det, (_rng().standard_normal((3, 3)),), order=2)
  check_grads(lambda x: L.eigh(x).eigenvalues, (_spd((3, 3), np.float64),), order=2)


def test_float32_derivatives(python_device):
  a = _rng().standard_normal((3, 3)).astype(np.float32) + 2 * np.eye(3, dtype=np.float32)
  check_grads(L.inv, (a,), order=1)
  check_grads(lambda x: L.svd(x, compute_uv=False), (a,), order=1)


def test_derivatives_outside_the_rules_raise():
  with pytest.raises(NotImplementedError, match="full_matrices=False"):
    tgfn.grad(lambda x: L.svd(x).U.sum())(_rng().standard_normal((4, 3)))
  with pytest.raises(NotImplementedError, match="m >= n"):
    tgfn.grad(lambda x: L.qr(x).R.sum())(_rng().standard_normal((3, 4)))


# ---- tnp.fft: the real-valued helpers (the transforms: tests/ops/test_fft.py)
def test_fft_helpers_and_missing_names(python_device):
  for n in (1, 4, 7):
    assert_close(tnp.fft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5).astype(np.float32))
    assert_close(tnp.fft.rfftfreq(n), np.fft.rfftfreq(n).astype(np.float32))
  x = np.arange(12.0).reshape(3, 4)
  assert_close(tnp.fft.fftshift(x), np.fft.fftshift(x))
  assert_close(tnp.fft.ifftshift(x, axes=1), np.fft.ifftshift(x, axes=1))
  with pytest.raises(AttributeError): tnp.fft.not_a_function
