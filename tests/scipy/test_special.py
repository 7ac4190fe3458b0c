"""tgfn.scipy.special against SciPy (mpmath where SciPy itself is the less accurate), float32 and float64,
derivatives against finite differences, vmap and jit."""
import numpy as np
import pytest
import scipy.special as scipy_special

import tgfn
import tgfn.scipy.special as special
from tgfn.test_util import check_grads
from tests.conftest import assert_close

X = np.array([-30.0, -9.5, -5.0, -2.2, -1.0, -0.3, 0.0, 1e-8, 0.7, 1.0, 1.9, 3.3, 6.5, 12.0, 26.0,
              np.inf, -np.inf, np.nan])
Y = np.array([-1.0, -0.9999999, -0.6, -0.5, -1e-9, 0.0, 0.2, 0.5, 0.51, 0.93, 1.0, 1.5, np.nan])
P = np.array([0.0, 1e-300, 1e-30, 1e-5, 0.02, 0.3, 0.5, 0.77, 0.999999, 1.0, np.nan])
G = np.array([-20.7, -2.5, -0.4, 1e-9, 0.3, 1.0, 1.46, 2.0, 2.5, 7.0, 9.99, 10.0, 150.0, 1e12, -3.0, 0.0, np.inf])

CASES = [("erf", X), ("erfc", X), ("erfcx", X[np.abs(X) < 10]), ("erfinv", Y), ("ndtr", X), ("log_ndtr", X),
         ("ndtri", P), ("expit", X), ("logit", P), ("gammaln", G), ("digamma", G[G != 0])]


@pytest.fixture
def python_device(monkeypatch):
  """The reference interpreter: no C compiler in the loop, so these short inputs are quick."""
  monkeypatch.setenv("DEV", "PYTHON")


@pytest.mark.parametrize("name,x", CASES, ids=[c[0] for c in CASES])
def test_float64_matches_scipy(name, x, python_device):
  got, want = getattr(special, name)(x).numpy(), getattr(scipy_special, name)(x)
  # SciPy's own tails are less accurate than ours (erfc near 17: 3e-14, ndtr at -30: 1e-13); 2e-13 covers
  # both, and the roots of gammaln (1, 2) and digamma (1.46) are compared absolutely
  np.testing.assert_allclose(got, want, rtol=2e-13, atol=1e-15 if name in ("gammaln", "digamma") else 0)


@pytest.mark.parametrize("name,x", CASES, ids=[c[0] for c in CASES])
def test_float32_within_an_ulp(name, x, python_device):
  x32 = x.astype(np.float32)
  got = getattr(special, name)(x32)
  assert got.dtype == tgfn.numpy.float32
  with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf, and inf - inf, are compared below
    want = getattr(scipy_special, name)(x32.astype(np.float64)).astype(np.float32)
    ulps = np.abs(got.numpy().astype(np.float64) - want) / np.spacing(np.abs(want)).astype(np.float64)
  assert np.nanmax(np.where(np.isfinite(want), ulps, 0)) <= 1.0
  np.testing.assert_array_equal(np.isnan(got.numpy()), np.isnan(want))
  np.testing.assert_array_equal(got.numpy()[np.isinf(want)], want[np.isinf(want)])


# Without float64 (WEBGPU) each function runs its algorithm in float32: the worst error over 20,000 random
# inputs per range (tgfn/tools/special_accuracy.py's ranges), in float32 ulps of max(|f|, 1); docs/scipy.md
FLOAT32_ONLY_ULPS = {"erf": 2, "erfc": 8, "erfcx": 9, "erfinv": 5, "ndtr": 9, "log_ndtr": 10, "ndtri": 6, "expit": 1,
                     "logit": 1, "gammaln": 17, "digamma": 7}


@pytest.mark.parametrize("name,x", CASES, ids=[c[0] for c in CASES])
def test_float32_without_float64(name, x, monkeypatch):
  """The float32 evaluation that a device without float64 uses, on the CPU: no float64 node, SciPy's values within
  the documented ulps, the same NaN and infinities."""
  import sys
  monkeypatch.setenv("DEV", "CPU")  # quick to compile; the device itself is checked in tests/drivers/test_webgpu.py
  monkeypatch.setattr(sys.modules["tgfn.ops.special"], "has_64bit", lambda device: False)
  x32 = x.astype(np.float32)
  fn = lambda v: getattr(special, name)(v)  # noqa: E731
  assert "float64" not in str(tgfn.make_jaxpr(fn)(x32))
  got = fn(x32).numpy().astype(np.float64)
  with np.errstate(over="ignore", invalid="ignore"):
    want = getattr(scipy_special, name)(x32.astype(np.float64)).astype(np.float32).astype(np.float64)
    ulps = np.abs(got - want) / np.maximum(np.abs(want), 1) / 2.0 ** -23
  assert np.nanmax(np.where(np.isfinite(want), ulps, 0)) <= FLOAT32_ONLY_ULPS[name] + 0.5
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


def test_accurate_where_scipy_is_not(python_device):
  """Deep tails against mpmath (computed offline: 50 digits, 400 for ndtri)."""
  assert_close(special.erfc(np.array([16.871430124582695])), [8.011129274843451e-126], rtol=2e-16, atol=0)
  assert_close(special.ndtr(np.array([-29.981958593584626])), [8.434109459908142e-198], rtol=1e-15, atol=0)
  assert_close(special.ndtri(np.array([1e-300])), [-37.0470962993612], rtol=1e-15, atol=0)


def test_two_argument_and_reduction_functions(python_device):
  x = np.array([0.0, 0.0, 1.5, -2.0, 3.0])
  y = np.array([0.0, -1.0, 2.0, 0.5, 1e-300])
  for name in ("xlogy", "xlog1py"):
    assert_close(getattr(special, name)(x, np.abs(y)), getattr(scipy_special, name)(x, np.abs(y)), rtol=1e-15)
  assert_close(special.xlog1py(x[:2], y[:2]), [0.0, 0.0])
  a = np.random.default_rng(0).standard_normal((3, 4))
  b = np.random.default_rng(1).standard_normal((3, 4))
  assert_close(special.logsumexp(a), scipy_special.logsumexp(a), rtol=1e-15)
  assert_close(special.logsumexp(a, axis=1, keepdims=True), scipy_special.logsumexp(a, axis=1, keepdims=True),
               rtol=1e-15)
  out, sign = special.logsumexp(a, axis=0, b=b, return_sign=True)
  want_out, want_sign = scipy_special.logsumexp(a, axis=0, b=b, return_sign=True)
  assert_close(out, want_out, rtol=1e-14)
  assert_close(sign, want_sign)
  assert np.isnan(special.logsumexp(np.zeros(2), b=np.array([-1.0, -1.0])).numpy())
  assert special.logsumexp(np.array([-np.inf, -np.inf])).numpy() == -np.inf
  assert_close(special.softmax(a), scipy_special.softmax(a), rtol=1e-15)
  assert_close(special.log_softmax(a, axis=1), scipy_special.log_softmax(a, axis=1), rtol=1e-14)
  assert_close(special.psi(np.array([2.5])), scipy_special.psi([2.5]), rtol=1e-15)


GRAD_CASES = {
  "erf": (special.erf, np.array([-2.0, 0.3, 1.7])), "erfc": (special.erfc, np.array([-2.0, 0.3, 4.0])),
  "erfcx": (special.erfcx, np.array([-0.5, 2.0, 8.0])), "erfinv": (special.erfinv, np.array([-0.9, 0.1, 0.7])),
  "ndtri": (special.ndtri, np.array([1e-3, 0.4, 0.9])), "log_ndtr": (special.log_ndtr, np.array([-12.0, -0.5, 3.0])),
  "gammaln": (special.gammaln, np.array([-2.5, 0.3, 14.0])), "digamma": (special.digamma, np.array([-2.5, 0.3, 14.0])),
  "expit": (special.expit, np.array([-30.0, 0.5, 3.0])), "logit": (special.logit, np.array([0.01, 0.5, 0.9])),
  "logsumexp_b": (lambda a: special.logsumexp(a, b=np.array([1.0, 2.0, 0.5])), np.array([-1.0, 0.5, 2.0])),
  "log_softmax": (special.log_softmax, np.array([-1.0, 0.5, 2.0])),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_derivatives_match_finite_differences(name, python_device):
  f, x = GRAD_CASES[name]
  check_grads(f, (x,), order=1)


def test_second_derivative_and_xlogy_grads(python_device):
  check_grads(special.erf, (np.array([0.4]),), order=2)
  check_grads(special.xlogy, (np.array([0.5, 2.0]), np.array([0.3, 4.0])), order=1)


def test_vmap_and_jit_agree_with_eager(python_device):
  x = np.linspace(-3, 3, 6).reshape(2, 3)
  eager = special.erf(x).numpy()
  assert_close(tgfn.vmap(special.erf)(x), eager, rtol=0, atol=0)
  assert_close(tgfn.jit(special.erf)(x), eager, rtol=0, atol=0)
  grads = tgfn.vmap(tgfn.grad(lambda v: special.logsumexp(v)))(x)
  assert_close(grads, scipy_special.softmax(x, axis=1), rtol=1e-14)
