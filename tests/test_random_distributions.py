"""tgfn.random's further distributions: JAX's numbers for fixed keys (bit for bit where the algorithm
is a few float ops on one uniform, to rounding where it involves log/pow in a rejection test), and
distribution checks by KS statistics and moments with fixed keys."""
import math

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import random

KEY = random.key(0)
# jax.random.<name>(jax.random.PRNGKey(0), (5,)) with JAX 0.10.2 (float32)
JAX_FIRST5 = {
  "exponential": [2.9501280784606934, 3.8434245586395264, 0.4039035439491272, 0.6323691010475159, 0.843711256980896],
  "laplace": [-2.256981611251831, -3.1502788066864014, 0.4085954427719116, 0.06471242010593414, -0.15056417882442474],
  "logistic": [2.896375894546509, 3.8217716217041016, -0.6978392004966736, -0.12549054622650146, 0.28139710426330566],
}
CDF = {
  "exponential": lambda x: 1 - np.exp(-np.maximum(x, 0)),
  "laplace": lambda x: np.where(x < 0, 0.5 * np.exp(x), 1 - 0.5 * np.exp(-x)),
  "logistic": lambda x: 1 / (1 + np.exp(-x)),
}


def _ks(samples, cdf):
  x = np.sort(np.asarray(samples, np.float64))
  n = len(x)
  c = cdf(x)
  return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


@pytest.mark.parametrize("name", sorted(JAX_FIRST5))
def test_one_uniform_samplers_are_jax_bit_for_bit(name):
  got = np.asarray(getattr(random, name)(KEY, (5,)))
  np.testing.assert_array_equal(got, np.array(JAX_FIRST5[name], np.float32))


@pytest.mark.parametrize("name", sorted(JAX_FIRST5))
def test_one_uniform_samplers_distribution(name):
  x = getattr(random, name)(random.key(7), (4000,))
  assert _ks(x, CDF[name]) < 0.03  # the 1% critical value is 0.026
  assert getattr(random, name)(KEY, (2,), tnp.float16).dtype is tnp.float16
  assert np.isfinite(np.asarray(getattr(random, name)(KEY, (1000,), tnp.float64))).all()


ALPHAS = np.array([0.3, 1.0, 2.5, 10.0] * 16, np.float32)


def test_gamma_matches_jax_and_its_moments():
  got = np.asarray(random.gamma(KEY, tnp.array(ALPHAS)))
  want = [0.6292697191238403, 0.726284921169281, 1.5440423488616943, 14.303314208984375,
          0.08742246776819229, 0.8707789778709412, 1.9578142166137695, 6.040931701660156]
  np.testing.assert_allclose(got[:8], want, rtol=2e-6)
  assert (got > 0).all()
  many = np.asarray(random.gamma(random.key(3), 2.5, (64,)))   # the same round kernel (64 elements)
  assert abs(many.mean() - 2.5) < 3 * math.sqrt(2.5 / 64)


def test_beta_matches_jax():
  got = np.asarray(random.beta(KEY, 2.0, 3.0, (64,)))
  np.testing.assert_allclose(got[:4], [0.2362736165523529, 0.4904595613479614, 0.6837947964668274,
                                       0.5423442125320435], rtol=2e-6)
  assert ((got > 0) & (got < 1)).all() and abs(got.mean() - 0.4) < 3 * math.sqrt(0.04 / 64)


def test_choice_matches_jax():
  p = tnp.array([0.1, 0.2, 0.3, 0.4])
  a = tnp.arange(12.0).reshape(3, 4)
  assert random.choice(KEY, 10, (5,)).tolist() == [9, 0, 2, 3, 1]
  assert random.choice(KEY, 10, (5,), replace=False).tolist() == [0, 1, 8, 5, 6]
  assert random.choice(KEY, 4, (12,), p=p).tolist() == [0, 0, 3, 2, 2, 3, 3, 2, 1, 3, 0, 3]
  assert random.choice(KEY, 4, (3,), replace=False, p=p).tolist() == [1, 0, 3]
  assert random.choice(KEY, a, (2,), axis=1).tolist() == [[1.0, 0.0], [5.0, 4.0], [9.0, 8.0]]
  assert random.choice(KEY, a, (2,), replace=False).tolist() == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]


def test_choice_errors_and_frequencies():
  with pytest.raises(ValueError, match="larger sample"):
    random.choice(KEY, 3, (4,), replace=False)
  with pytest.raises(ValueError, match="p must be"):
    random.choice(KEY, 3, (2,), p=tnp.ones(4) / 4)
  draws = np.asarray(random.choice(random.key(5), 4, (4000,), p=tnp.array([0.1, 0.2, 0.3, 0.4])))
  np.testing.assert_allclose(np.bincount(draws, minlength=4) / 4000, [0.1, 0.2, 0.3, 0.4], atol=0.025)
  assert sorted(random.choice(KEY, 6, (6,), replace=False).tolist()) == list(range(6))


# jax.random.t(PRNGKey(0), df, shape) and chisquare with JAX 0.10.2: the scale of each follows df
JAX_T_AND_CHISQUARE = {
  ("t", 5.0, (4,)): [0.758949875831604, -2.055917739868164, -1.281833529472351, -1.5719773769378662],
  ("t", (1.0, 2.5, 30.0), None): [1.3805439472198486, -4.2371649742126465, -0.8903236389160156],
  ("chisquare", 4.0, (4,)): [3.1795756816864014, 3.5198826789855957, 2.25801420211792, 7.948668003082275],
}


@pytest.mark.parametrize("name, df, shape", list(JAX_T_AND_CHISQUARE))
def test_t_and_chisquare_match_jax(name, df, shape):
  got = getattr(random, name)(KEY, tnp.array(df), shape)
  np.testing.assert_allclose(np.asarray(got), JAX_T_AND_CHISQUARE[name, df, shape], rtol=1e-5)


@pytest.mark.slow
def test_t_dirichlet_chisquare():
  np.testing.assert_allclose(np.asarray(random.t(KEY, 5.0, (64,)))[:4],
                             [0.758949875831604, -2.055917739868164, -1.281833529472351, -1.5719773769378662], rtol=1e-5)
  d = np.asarray(random.dirichlet(KEY, tnp.array([1.0, 2.0, 3.0, 4.0]), (16,)))
  np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-6)
  assert (d > 0).all()
  c = np.asarray(random.chisquare(random.key(2), 4.0, (64,)))
  assert abs(c.mean() - 4.0) < 3 * math.sqrt(8 / 64)


@pytest.mark.slow
def test_gamma_under_jit_unrolls_the_rounds():
  jitted = tgfn.jit(lambda k, a: random.gamma(k, a))(KEY, tnp.array(ALPHAS[:8]))
  np.testing.assert_allclose(np.asarray(jitted), np.asarray(random.gamma(KEY, tnp.array(ALPHAS[:8]))), rtol=1e-6)


def test_orthogonal_matches_jax_to_rounding():
  q = np.asarray(random.orthogonal(KEY, 3))
  want = [[0.9554101228713989, 0.2941357493400574, 0.02599557861685753],
          [-0.04628981649875641, 0.2361408770084381, -0.9706156253814697],
          [-0.2916313707828522, 0.9261326193809509, 0.23922686278820038]]
  np.testing.assert_allclose(q, want, atol=1e-6)
  wide = np.asarray(random.orthogonal(KEY, 2, m=3))
  np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-6)


def test_multivariate_normal_moments():
  cov = np.array([[2.0, 0.6], [0.6, 1.0]])
  x = np.asarray(random.multivariate_normal(random.key(1), tnp.array([1.0, -2.0]), tnp.array(cov), (4000,),
                                            dtype=tnp.float64))
  np.testing.assert_allclose(x.mean(0), [1.0, -2.0], atol=0.08)
  np.testing.assert_allclose(np.cov(x.T), cov, atol=0.12)
  with pytest.raises(ValueError, match="cov of shape"):
    random.multivariate_normal(KEY, tnp.zeros(2), tnp.eye(3))


@pytest.mark.slow
def test_poisson_matches_jax_and_its_moments():
  lam = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 25.0, 400.0] * 4, np.float32)
  got = np.asarray(random.poisson(KEY, tnp.array(lam)))
  want = np.asarray([0, 0, 4, 11, 7, 20, 395, 0, 0, 4, 7, 9, 25, 434, 0, 1, 1, 12, 13, 25, 412, 0, 1, 4, 11, 7, 29, 403])
  assert got.dtype == np.int32
  np.testing.assert_array_equal(got, want)
  for rate in (4.0, 30.0):
    x = np.asarray(random.poisson(random.key(3), rate, (2000,)))
    assert abs(x.mean() - rate) < 4 * math.sqrt(rate / 2000) and abs(x.var() / rate - 1) < 0.15
