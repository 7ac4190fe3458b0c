"""tgfn.scipy.stats.norm and tgfn.scipy.linalg against SciPy."""
import numpy as np
import pytest
import scipy.linalg as scipy_linalg
import scipy.stats as scipy_stats

import tgfn
import tgfn.scipy as tsp
from tgfn.test_util import check_grads
from tests.conftest import assert_close


@pytest.fixture(autouse=True)
def python_device(monkeypatch):
  """The reference interpreter: no C compiler in the loop, so these small inputs are quick."""
  monkeypatch.setenv("DEV", "PYTHON")


@pytest.mark.parametrize("name", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"])
def test_norm_matches_scipy(name):
  x = np.array([-40.0, -3.0, -0.2, 0.0, 1.0, 7.5, 40.0])
  got = getattr(tsp.stats.norm, name)(x, 1.0, 2.0)
  assert_close(got, getattr(scipy_stats.norm, name)(x, 1.0, 2.0), rtol=1e-13, atol=1e-300)
  assert getattr(tsp.stats.norm, name)(x.astype(np.float32)).dtype == tgfn.numpy.float32


def test_norm_quantiles():
  q = np.array([1e-20, 0.01, 0.5, 0.93])
  assert_close(tsp.stats.norm.ppf(q, -1.0, 3.0), scipy_stats.norm.ppf(q, -1.0, 3.0), rtol=1e-14)
  assert_close(tsp.stats.norm.isf(q, -1.0, 3.0), scipy_stats.norm.isf(q, -1.0, 3.0), rtol=1e-14)
  assert tsp.stats.norm.cdf(1).dtype == tgfn.numpy.float32
  check_grads(lambda q: tsp.stats.norm.ppf(q, 0.5, 2.0), (np.array([0.1, 0.6]),), order=1)


def test_linalg_matches_scipy():
  rng = np.random.default_rng(0)
  a = rng.standard_normal((4, 4))
  spd = a @ a.T + 4 * np.eye(4)
  b = rng.standard_normal((4, 2))
  assert_close(tsp.linalg.cholesky(spd), scipy_linalg.cholesky(spd), rtol=1e-12)
  assert_close(tsp.linalg.cholesky(spd, lower=True), scipy_linalg.cholesky(spd, lower=True), rtol=1e-12)
  for lower in (True, False):
    for trans in (0, 1, "T"):
      for unit in (False, True):
        want = scipy_linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
        got = tsp.linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
        assert_close(got, want, rtol=1e-10, atol=1e-12)
    c = scipy_linalg.cho_factor(spd, lower=lower)
    assert_close(tsp.linalg.cho_solve(tsp.linalg.cho_factor(spd, lower), b), scipy_linalg.cho_solve(c, b), rtol=1e-12)
  assert_close(tsp.linalg.solve(spd, b[:, 0], assume_a="pos"), np.linalg.solve(spd, b[:, 0]), rtol=1e-12)
  check_grads(lambda m, v: tsp.linalg.solve_triangular(m, v, lower=True), (a + 4 * np.eye(4), b), order=1)
  with pytest.raises(ValueError, match="trans"): tsp.linalg.solve_triangular(a, b, trans=3)
