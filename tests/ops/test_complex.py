"""Complex dtypes: JAX's promotion, the kernel lowering to pairs of reals (tgfn/codegen/complex_lower.py),
the surface (tgfn/ops/complex_math.py and the complex branches of elementwise/reduction ops) against
NumPy on CPU and on the PYTHON reference device, eager and jitted, and derivatives against JAX."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.codegen.complex_lower import lower_complex
from tgfn.dtype import dtypes, result_type
from tgfn.uop.ops import Ops, UOp, toposort

COMPLEX = [np.complex64, np.complex128]
SHAPES = [(), (0,), (3,), (2, 0, 3), (2, 3)]
_TOL = {np.complex64: dict(rtol=2e-6, atol=2e-6), np.complex128: dict(rtol=1e-13, atol=1e-13),
        np.float32: dict(rtol=2e-6, atol=2e-6), np.float64: dict(rtol=1e-13, atol=1e-13)}


def _rand(shape, dt, seed=0) -> np.ndarray:
  rng = np.random.default_rng(seed)
  return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)


def _check(got, want, dt=None) -> None:
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype, f"{got.shape} {got.dtype} != {want.shape} {want.dtype}"
  if want.dtype.kind == "b": np.testing.assert_array_equal(got, want)
  else: np.testing.assert_allclose(got, want, **_TOL[np.dtype(dt or want.dtype).type])


# ---- promotion: JAX's lattice with complex64 above float32 and complex128 above float64
_NAMED = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16, jnp.bfloat16, np.float32,
          np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("a", _NAMED, ids=lambda d: np.dtype(d).name)
def test_promotion_matches_jax(a) -> None:
  for b in _NAMED:
    if not (np.dtype(a).kind == "c" or np.dtype(b).kind == "c"): continue
    want = np.dtype(jnp.promote_types(a, b)).name
    assert result_type(tnp.dtype(np.dtype(a).name), tnp.dtype(np.dtype(b).name)).name == want, (a, b)


def test_weak_complex_scalars_as_jax() -> None:
  assert result_type(dtypes.float32, 1j) is dtypes.complex64
  assert result_type(dtypes.float64, 1j) is dtypes.complex128
  assert result_type(dtypes.int32, 1j) is dtypes.complex64
  assert result_type(dtypes.float16, 1j) is dtypes.complex64
  assert result_type(dtypes.complex64, 1.0) is dtypes.complex64
  assert result_type(1j) is dtypes.complex64 and result_type(dtypes.complex128, 2) is dtypes.complex128
  assert tnp.array([1 + 2j, 3]).dtype is dtypes.complex64 and tnp.array(np.complex128(1j)).dtype is dtypes.complex128
  assert (tnp.ones(2) * 1j).dtype is dtypes.complex64 and (tnp.ones(2, tnp.float64) * 1j).dtype is dtypes.complex128
  info = tnp.__array_namespace_info__()
  assert info.default_dtypes()["complex floating"] is dtypes.complex64 and "complex128" in info.dtypes()
  assert tnp.isdtype(tnp.complex64, "complex floating") and not tnp.isdtype(tnp.complex64, "real floating")
  assert tnp.finfo(tnp.complex64).eps == tnp.finfo(tnp.float32).eps and tnp.finfo(tnp.complex128).dtype is dtypes.float64


# ---- the lowering: no complex value reaches a renderer
def test_lowering_leaves_only_real_values() -> None:
  c64 = dtypes.complex64
  g_out, g_a, g_b = (UOp(Ops.DEFINE_GLOBAL, c64, (), i) for i in range(3))
  i = UOp.range(4, 0, tgfn.uop.ops.AxisType.GLOBAL)
  a, b = UOp(Ops.LOAD, c64, (g_a, i)), UOp(Ops.LOAD, c64, (g_b, i))
  ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g_out, i, (a * b).alu(Ops.FDIV, a - b))),))
  lowered = toposort([lower_complex(ast)])
  assert not any(u.dtype is not None and u.dtype.is_complex for u in lowered)
  assert sum(u.op is Ops.STORE for u in lowered) == 2 and sum(u.op is Ops.LOAD for u in lowered) == 4
  assert {u.dtype for u in lowered if u.op is Ops.DEFINE_GLOBAL} == {dtypes.float32}
  assert lower_complex(UOp(Ops.SINK, None, ())) is not None


def test_unsupported_kernel_ops_raise_clearly(device) -> None:
  z = tnp.array(_rand((3,), np.complex64))
  with pytest.raises(NotImplementedError, match="complex REDUCE MAX"): tnp.max(z).numpy()
  with pytest.raises(TypeError, match="maximum is not defined for complex"): tnp.maximum(z, z)
  with pytest.raises(TypeError, match="less is not defined for complex"): z < z
  with pytest.raises(TypeError, match="floor is not defined for complex"): tnp.floor(z)
  with pytest.raises(NotImplementedError, match="tanh of complex arrays is not supported"): tnp.tanh(z)
  with pytest.raises(NotImplementedError, match="linalg.inv of complex"): tnp.linalg.inv(z.reshape(3, 1) * z)


# ---- arithmetic against NumPy, both devices
@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_arithmetic_matches_numpy(device, dt, shape) -> None:
  a, b = _rand(shape, dt, 1), _rand(shape, dt, 2)
  A, B = tnp.array(a), tnp.array(b)
  for got, want in [(A + B, a + b), (A - B, a - b), (A * B, a * b), (A / B, a / b), (-A, -a),
                    (A * 2.5, a * dt(2.5)), (A + (1 - 2j), a + dt(1 - 2j)), (3 / A, dt(3) / a),
                    (tnp.where(tnp.real(A) > 0, A, B), np.where(a.real > 0, a, b)), (A ** 3, a * a * a),
                    (tnp.reciprocal(A), 1 / a), (tnp.square(A), a * a)]:
    _check(got, want)
  _check(A == B, a == b)
  _check(A != A, a != a)
  _check(A.astype(tnp.complex64 if dt is np.complex128 else tnp.complex128),
         a.astype(np.complex64 if dt is np.complex128 else np.complex128))
  _check(A.astype(tnp.bool_), a.astype(bool))


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: np.dtype(d).name)
def test_mixed_real_and_complex(device, dt) -> None:
  real_dt = np.float32 if dt is np.complex64 else np.float64
  a, r = _rand((2, 3), dt), np.random.default_rng(3).standard_normal((2, 3)).astype(real_dt)
  A, R = tnp.array(a), tnp.array(r)
  _check(A * R, a * r)
  _check(R / A, r / a)
  _check(R.astype(dt), r.astype(dt))
  _check(tnp.arange(3) * 1j, (np.arange(3) * 1j).astype(np.complex64))
  _check(A.astype(real_dt), a.real)


def test_division_scales_the_divisor(device) -> None:
  """|q|^2 overflows float32 long before q does (and underflows for tiny q): Smith's algorithm avoids it."""
  big = np.array([1e30 + 1e30j, 3e-30 + 4e-30j, 2 + 0j, 1j], np.complex64)
  _check(tnp.array(big) / tnp.array(big), np.ones(4, np.complex64))
  _check(tnp.array([1 + 1j], tnp.complex64) / tnp.array([0j], tnp.complex64), np.array([complex(np.inf, np.inf)], np.complex64))


def test_known_zero_parts_are_exact(device) -> None:
  """imag and conj are exact, also for infinities (no 0 * inf = NaN in the other part)."""
  z = np.array([complex(np.inf, 2), complex(1, -np.inf), complex(np.nan, 1)], np.complex64)
  Z = tnp.array(z)
  _check(tnp.imag(Z), z.imag)
  _check(tnp.real(Z), z.real)
  _check(tnp.conj(Z), np.conj(z))
  _check(Z.conj().imag, -z.imag)


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(0,), (4,), (2, 3), (2, 0)], ids=str)
def test_reductions_and_contractions(device, dt, shape) -> None:
  a, b = _rand(shape, dt, 4), _rand(shape[::-1], dt, 5)
  A, B = tnp.array(a), tnp.array(b)
  _check(tnp.sum(A), a.sum())
  _check(tnp.sum(A, axis=0, keepdims=True), a.sum(axis=0, keepdims=True))
  _check(tnp.prod(A, axis=-1), a.prod(axis=-1))
  if a.size:
    _check(tnp.mean(A, axis=0), a.mean(axis=0))
    _check(tnp.var(A), a.var(), np.dtype(dt).type)
  if len(shape) == 2:
    _check(A @ B, a @ b)
    _check(tnp.einsum("ij,jk->ik", A, B), np.einsum("ij,jk->ik", a, b))
    _check(tnp.dot(A, B), np.dot(a, b))
    _check(tnp.vdot(A, A), np.vdot(a, a))


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: np.dtype(d).name)
def test_elementwise_functions_match_numpy(device, dt) -> None:
  z = np.concatenate([_rand((6,), dt, 6), np.array([0, 2, -2, 3j, -3j, -1 - 0j], dt)])
  Z = tnp.array(z)
  loose = dict(rtol=2e-5, atol=2e-5) if dt is np.complex64 else dict(rtol=1e-12, atol=1e-12)
  for name in ["abs", "sign", "exp", "log", "sqrt", "sin", "cos", "angle", "log10", "log2", "exp2"]:
    want = getattr(np, name)(z)
    if name == "sign": want = np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z))).astype(dt)  # NumPy 2 / JAX
    got = np.asarray(getattr(tnp, name)(Z))
    keep = np.isfinite(want)
    assert got.dtype == want.dtype, name
    np.testing.assert_allclose(got[keep], want[keep], err_msg=name, **loose)
  _check(tnp.real(Z), z.real)
  _check(tnp.imag(Z), z.imag)
  _check(Z.real, z.real)
  _check(Z.imag, z.imag)
  _check(tnp.conjugate(Z), np.conjugate(z))
  _check(tnp.angle(Z, deg=True), np.angle(z, deg=True))
  _check(tnp.isnan(Z), np.isnan(z))
  _check(tnp.isfinite(Z / 0), np.isfinite(z / 0))
  _check(tnp.iscomplex(Z), np.iscomplex(z))
  _check(tnp.round(Z * 3.3), np.round(z * 3.3))
  _check(tnp.isclose(Z, Z + 1e-9), np.isclose(z, z + dt(1e-9)))
  _check(tnp.cumsum(Z), np.cumsum(z))
  assert tnp.iscomplexobj(Z) and not tnp.iscomplexobj(tnp.real(Z)) and tnp.isrealobj(tnp.ones(2))
  _check(tnp.power(Z[:6], 0.5 + 1j), np.power(z[:6], dt(0.5 + 1j)), dt) if dt is np.complex128 else None


def test_real_inputs_of_the_complex_functions(device) -> None:
  x = np.array([-2.0, 0.0, 3.0], np.float32)
  _check(tnp.real(x), x)
  _check(tnp.imag(x), np.zeros(3, np.float32))
  _check(tnp.conj(x), x)
  _check(tnp.angle(x), np.angle(x).astype(np.float32))


def test_jit_matches_eager(device) -> None:
  a = _rand((3, 4), np.complex64)
  f = lambda z: tnp.abs(z * (1 + 2j) - tnp.conj(z)).sum() + tnp.sum(z * z)  # noqa: E731
  _check(tgfn.jit(f)(tnp.array(a)), np.asarray(f(tnp.array(a))))
  _check(tgfn.jit(f)(tnp.array(a)), np.abs(a * (1 + 2j) - np.conj(a)).sum() + np.sum(a * a), np.complex64)
  scale = tgfn.jit(lambda x, c: x * c)  # a Python complex argument
  _check(scale(tnp.ones(2, tnp.float64), 2 - 1j), np.full(2, 2 - 1j))
  _check(scale(tnp.ones(2), 1j), np.full(2, 1j, np.complex64))


# ---- derivatives: JAX's convention, grad(f)(z) = df/dx - i df/dy for real f
_FUNCS = {
  "abs2": (lambda z: tnp.sum(tnp.real(z) ** 2 + tnp.imag(z) ** 2), lambda z: jnp.sum(jnp.real(z) ** 2 + jnp.imag(z) ** 2)),
  "abs": (lambda z: tnp.sum(tnp.abs(z)), lambda z: jnp.sum(jnp.abs(z))),
  "poly_conj": (lambda z: tnp.real(tnp.sum(z * z * tnp.conj(z) * (1 + 2j))),
                lambda z: jnp.real(jnp.sum(z * z * jnp.conj(z) * (1 + 2j)))),
  "exp_log": (lambda z: tnp.sum(tnp.imag(tnp.exp(z / 3)) + tnp.abs(tnp.log(z))),
              lambda z: jnp.sum(jnp.imag(jnp.exp(z / 3)) + jnp.abs(jnp.log(z)))),
  "sqrt_div": (lambda z: tnp.real(tnp.sum(tnp.sqrt(z) / (z + 1j))), lambda z: jnp.real(jnp.sum(jnp.sqrt(z) / (z + 1j)))),
  "matmul_prod": (lambda z: tnp.abs(tnp.prod(z @ z.T)), lambda z: jnp.abs(jnp.prod(z @ z.T))),
  "angle_mean": (lambda z: tnp.mean(tnp.angle(z) * tnp.abs(z - 1)), lambda z: jnp.mean(jnp.angle(z) * jnp.abs(z - 1))),
}


@pytest.mark.parametrize("name", list(_FUNCS))
def test_grad_matches_jax(name) -> None:
  f, jf = _FUNCS[name]
  z = _rand((2, 2), np.complex64, 7)
  got = tgfn.grad(f)(tnp.array(z))
  want = jax.grad(jf)(jnp.asarray(z))
  assert got.dtype is dtypes.complex64
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(np.asarray(tgfn.jit(tgfn.grad(f))(tnp.array(z))), np.asarray(want), rtol=2e-4, atol=2e-5)


def test_jvp_vjp_and_vmap_match_jax() -> None:
  z, t = _rand((3,), np.complex64, 8), _rand((3,), np.complex64, 9)
  f = lambda z: z * z * (2 - 1j) / (z + 3)  # noqa: E731
  _, got = tgfn.jvp(f, (tnp.array(z),), (tnp.array(t),))
  _, want = jax.jvp(f, (jnp.asarray(z),), (jnp.asarray(t),))
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
  _, back = tgfn.vjp(f, tnp.array(z))
  _, jback = jax.vjp(f, jnp.asarray(z))
  np.testing.assert_allclose(np.asarray(back(tnp.array(t))[0]), np.asarray(jback(jnp.asarray(t))[0]), rtol=1e-5, atol=1e-6)
  m = _rand((4, 3), np.complex64, 10)
  _check(tgfn.vmap(lambda r: tnp.conj(r) @ r)(tnp.array(m)), np.einsum("ij,ij->i", np.conj(m), m))
