"""More of jax.random's distributions, built on tgfn/random.py's samplers with JAX's algorithms:
`exponential`, `laplace`, `logistic` (one uniform each, bit-identical with JAX in float32), `gamma` and
`loggamma` (Marsaglia-Tsang), `beta`, `dirichlet`, `t`, `chisquare`, `choice`, `orthogonal`,
`multivariate_normal`, `poisson` (Knuth / PTRS). Re-exported by `tgfn.random`.

Rejection sampling without a loop primitive: `gamma` runs rounds of Marsaglia and Tsang's proposal for
every element at once and keeps each element's first accepted one, deriving each round's keys exactly
as JAX's while loop does. On concrete inputs the rounds repeat until every element has accepted (one
kernel per round, compiled once); under jit or vmap `_GAMMA_ROUNDS` rounds are unrolled (a large
kernel) and an element still unaccepted (probability < 1e-15: a round accepts with probability above
0.95) is NaN, never a value from the wrong distribution. A sample equals JAX's whenever each round
needs at most `_NORMAL_TRIES` normal draws (practically always; after that tgfn starts a new round
instead, which keeps the distribution exact), up to the last bit of log and pow, which may differ from
XLA's and so flip an acceptance test exactly at its boundary."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import tgfn.numpy as tnp
from tgfn.array import Array, as_array, broadcast_shapes
from tgfn.dtype import DType, dtypes
from tgfn.ops.dtype_info import finfo
from tgfn.random import (_check_shape, _float_dtype, _is_int, _log, _log1p_f32, _ranks, _shape_arg, _single_key,
                         gumbel, normal, permutation, randint, split, uniform)

__all__ = ["exponential", "laplace", "logistic", "gamma", "loggamma", "beta", "dirichlet", "t", "chisquare",
           "choice", "orthogonal", "multivariate_normal", "poisson"]

Shape = Any
_GAMMA_ROUNDS = 12      # unrolled under jit/vmap
_MAX_EAGER_ROUNDS = 1000  # a guard against a non-positive shape parameter looping forever
_NORMAL_TRIES = 2


def _log1p(x: Array) -> Array:
  """log1p as XLA's CPU backend computes it (float64: tgfn's own)."""
  if x.dtype is dtypes.float64: return tnp.log1p(x)
  return _log1p_f32(x.astype(dtypes.float32)).astype(x.dtype)


def exponential(key: Any, shape: Shape = (), dtype: Any = dtypes.float32) -> Array:
  """Standard exponential floats: -log1p(-u), u uniform in [0, 1)."""
  key, shape, dt = _single_key("exponential", key), _shape_arg("exponential", shape), _float_dtype("exponential", dtype)
  return -_log1p(-uniform(key, shape, dt))


def laplace(key: Any, shape: Shape = (), dtype: Any = dtypes.float32) -> Array:
  """Standard Laplace floats: sign(u) * log1p(-|u|), u uniform in (-1, 1)."""
  key, shape, dt = _single_key("laplace", key), _shape_arg("laplace", shape), _float_dtype("laplace", dtype)
  u = uniform(key, shape, dt, -1.0 + finfo(dt).epsneg, 1.0)
  return tnp.sign(u) * _log1p(-tnp.abs(u))


def logistic(key: Any, shape: Shape = (), dtype: Any = dtypes.float32) -> Array:
  """Standard logistic floats: log(u) - log1p(-u), u uniform in [tiny, 1)."""
  key, shape, dt = _single_key("logistic", key), _shape_arg("logistic", shape), _float_dtype("logistic", dtype)
  u = uniform(key, shape, dt, finfo(dt).tiny, 1.0)
  return _log(u) - _log1p(-u)


def _gamma_round(key: Array, d: Array, c: Array) -> tuple[Array, Array, Array]:
  """One round of JAX's outer while loop for one element: (next key, accepted?, V = v**3)."""
  dt = d.dtype
  key, x_key, u_key = split(key, 3)
  x, v = tnp.zeros((), dt), -tnp.ones((), dt)
  for _ in range(_NORMAL_TRIES):  # JAX: draw x ~ N(0, 1) until v = 1 + c x > 0
    x_key, draw_key = split(x_key)
    x_new = normal(draw_key, (), dt)
    retry = v <= 0
    x, v = tnp.where(retry, x_new, x), tnp.where(retry, 1 + x_new * c, v)
  big_x, big_v, u = x * x, v * v * v, uniform(u_key, (), dt)
  reject = (u >= 1 - 0.0331 * (big_x * big_x)) & (_log(u) >= big_x * 0.5 + d * ((1 - big_v) + _log(big_v)))
  return key, (v > 0) & ~reject, big_v


def _marsaglia_tsang(keys: Array, d: Array, c: Array) -> Array:
  """V = v**3 of the first accepted proposal of each element. Concrete inputs: rounds run until every
  element has accepted, each round the same two kernels, as JAX's while loop. Traced inputs (jit, vmap):
  `_GAMMA_ROUNDS` rounds unrolled, NaN where none accepted (probability < 1e-15)."""
  from tgfn.engine.realize import realize
  from tgfn.transforms.api import vmap
  from tgfn.transforms.trace import is_traced
  one_round = vmap(_gamma_round)
  v_found = tnp.full(d.shape, float("nan"), d.dtype)  # NaN until accepted (an accepted V is positive)
  traced = any(is_traced(x.uop) for x in (keys, d, c))
  if not traced: d, c = d.realize(), c.realize()
  for rounds in range(1, _MAX_EAGER_ROUNDS + 1):
    keys, accept, big_v = one_round(keys, d, c)
    v_found = tnp.where(accept & tnp.isnan(v_found), big_v, v_found)
    if traced:
      if rounds == _GAMMA_ROUNDS: return v_found
      continue
    keys, v_found = (Array(u) for u in realize([keys.uop, v_found.uop]))  # one schedule for both
    if not bool(tnp.isnan(v_found).any()): return v_found
  raise RuntimeError(f"gamma: Marsaglia-Tsang accepted nothing in {_MAX_EAGER_ROUNDS} rounds for some element; "
                     "check that the shape parameter is positive and finite")


def _gamma_finish(key: Array, alpha: Array, d: Array, big_v: Array, log_space: bool) -> Array:
  """d * V, times u**(1/alpha) where alpha < 1 was boosted to alpha + 1 (or all of it in log space)."""
  boost = alpha >= 1
  if log_space:
    log_u = -exponential(key, (), alpha.dtype)
    log_boost = tnp.where(boost | (log_u == 0), 0.0, log_u * (1 / alpha))
    return (_log(d) + _log(big_v)) + log_boost
  return (d * big_v) * tnp.where(boost, 1.0, tnp.power(1 - uniform(key, (), alpha.dtype), 1 / alpha))


def _gamma(fn: str, key: Any, a: Any, shape: Optional[Shape], dtype: Any, log_space: bool) -> Array:
  from tgfn.transforms.api import vmap
  key, dt = _single_key(fn, key), _float_dtype(fn, dtype)
  a = as_array(a).astype(dt)
  shape = a.shape if shape is None else _shape_arg(fn, shape)
  _check_shape(fn, shape, a.shape)
  size = math.prod(shape)
  if size == 0: return tnp.zeros(shape, dt)
  alpha = tnp.broadcast_to(a, shape).reshape(size)
  keys = vmap(split)(split(key, size))  # one key per element, as JAX's _gamma_impl, then (loop key, finish key)
  boosted = tnp.where(alpha >= 1, alpha, alpha + 1)
  d = boosted - 1.0 / 3.0
  c = (1.0 / 3.0) / tnp.sqrt(d)
  big_v = _marsaglia_tsang(keys[:, 0], d, c)
  finish = vmap(lambda k, al, dd, vv: _gamma_finish(k, al, dd, vv, log_space))
  return finish(keys[:, 1], alpha, d, big_v).reshape(shape)


def gamma(key: Any, a: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32) -> Array:
  """Gamma(a, 1) floats (a > 0 broadcasts to `shape`, which defaults to a's shape)."""
  return _gamma("gamma", key, a, shape, dtype, log_space=False)


def loggamma(key: Any, a: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32) -> Array:
  """log of Gamma(a, 1) floats, accurate for tiny a where the sample itself underflows."""
  return _gamma("loggamma", key, a, shape, dtype, log_space=True)


def beta(key: Any, a: Any, b: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32) -> Array:
  """Beta(a, b) floats: Ga / (Ga + Gb) from two log-gamma samples, scaled by their max."""
  dt = _float_dtype("beta", dtype)
  a, b = as_array(a).astype(dt), as_array(b).astype(dt)
  shape = broadcast_shapes(a.shape, b.shape) if shape is None else _shape_arg("beta", shape)
  _check_shape("beta", shape, a.shape, b.shape)
  key_a, key_b = split(_single_key("beta", key))
  log_a, log_b = loggamma(key_a, tnp.broadcast_to(a, shape), shape, dt), loggamma(key_b, tnp.broadcast_to(b, shape), shape, dt)
  log_max = tnp.maximum(log_a, log_b)
  ga, gb = tnp.exp(log_a - log_max), tnp.exp(log_b - log_max)
  return ga / (ga + gb)


def dirichlet(key: Any, alpha: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32) -> Array:
  """Dirichlet(alpha) vectors along the last axis: the softmax of log-gamma samples."""
  from tgfn.nn.functional import softmax
  dt = _float_dtype("dirichlet", dtype)
  alpha = as_array(alpha).astype(dt)
  if alpha.ndim < 1: raise ValueError(f"dirichlet needs alpha with at least one axis, got shape {alpha.shape}")
  shape = alpha.shape[:-1] if shape is None else _shape_arg("dirichlet", shape)
  _check_shape("dirichlet", shape, alpha.shape[:-1])
  full = shape + alpha.shape[-1:]
  return softmax(loggamma(key, tnp.broadcast_to(alpha, full), full, dt), -1)


def t(key: Any, df: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32) -> Array:
  """Student's t floats with `df` degrees of freedom: n * sqrt(df/2 / g), g ~ Gamma(df/2)."""
  dt = _float_dtype("t", dtype)
  df = as_array(df).astype(dt)
  shape = df.shape if shape is None else _shape_arg("t", shape)
  _check_shape("t", shape, df.shape)
  key_n, key_g = split(_single_key("t", key))
  half_df = df / 2
  return normal(key_n, shape, dt) * tnp.sqrt(half_df / gamma(key_g, half_df, shape, dt))


def chisquare(key: Any, df: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32) -> Array:
  """Chi-square floats with `df` degrees of freedom: 2 * Gamma(df / 2), through its log as JAX."""
  dt = _float_dtype("chisquare", dtype)
  df = as_array(df).astype(dt)
  shape = df.shape if shape is None else _shape_arg("chisquare", shape)
  _check_shape("chisquare", shape, df.shape)
  return tnp.exp(loggamma(key, df / 2, shape, dt)) * 2


def _take(arr: Array, index: Array, axis: int) -> Array:
  """arr's entries at the int32 `index` (any shape) along `axis`: a one-hot contraction, exact."""
  n = arr.shape[axis]
  hit = index[..., None] == tnp.arange(n, dtype=tnp.int32)  # index.shape + (n,)
  moved = tnp.moveaxis(arr, axis, -1)  # rest + (n,)
  rest = moved.shape[:-1]
  mask = hit.reshape((1,) * len(rest) + hit.shape)
  picked = tnp.where(mask, moved.reshape(rest + (1,) * index.ndim + (n,)), tnp.zeros((), arr.dtype)).sum(-1)
  picked = picked.astype(arr.dtype)  # rest + index.shape
  order = list(range(len(rest), len(rest) + index.ndim))
  return tnp.moveaxis(picked, order, [axis + i for i in range(index.ndim)])


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0) -> Array:
  """Entries of `a` (or of range(a) for an int) drawn along `axis`, uniformly or with probabilities `p`,
  with or without replacement; the drawn entries form `shape` in place of `axis`. JAX's algorithms:
  randint; a permutation's prefix; the inverse CDF (cumsum of p); the top entries of gumbel + log p."""
  key = _single_key("choice", key)
  if not isinstance(shape, (tuple, list)): raise TypeError(f"choice: shape must be a sequence, got {shape!r}")
  shape = _shape_arg("choice", shape)
  arr = None if _is_int(a) else as_array(a)
  if arr is not None and arr.ndim == 0: arr, a = None, int(arr)
  if arr is not None:
    if not -arr.ndim <= axis < arr.ndim: raise ValueError(f"choice: axis {axis} is out of range for shape {arr.shape}")
    axis %= arr.ndim
  n = int(a) if arr is None else arr.shape[axis]
  draws = math.prod(shape)
  out_shape = shape if arr is None else arr.shape[:axis] + shape + arr.shape[axis + 1:]
  if draws == 0: return tnp.zeros(out_shape, tnp.int32 if arr is None else arr.dtype)
  if n <= 0: raise ValueError("choice: a must be greater than 0 unless no samples are taken")
  if not replace and draws > n:
    raise ValueError(f"choice: cannot take a larger sample (size {draws}) than the population (size {n}) "
                     "when replace=False")
  if p is None:
    if not replace:
      perm = permutation(key, n if arr is None else arr, axis)
      picked = perm[(slice(None),) * (0 if arr is None else axis) + (slice(draws),)]
      return picked.reshape(out_shape)
    index = randint(key, shape, 0, n)
  else:
    p = as_array(p)
    p = p.astype(p.dtype if p.dtype.is_float else dtypes.float32)
    if p.shape != (n,):
      raise ValueError(f"choice: p must be None or a vector of length {n} (a.shape[axis]), got shape {p.shape}")
    if replace:
      cdf = tnp.cumsum(p)
      r = cdf[-1] * (1 - uniform(key, shape, p.dtype))
      index = (cdf < r[..., None]).sum(-1).astype(tnp.int32)  # searchsorted(cdf, r), side='left'
    else:
      scores = gumbel(key, (n,), p.dtype) + tnp.log(p)
      rank = _ranks(-scores)  # position in a stable descending sort: top_k's order
      index = (rank[None, :] == tnp.arange(draws, dtype=rank.dtype)[:, None]).astype(tnp.int32).argmax(-1)
      index = index.astype(tnp.int32).reshape(shape)
  return index.reshape(shape) if arr is None else _take(arr, index.reshape(shape), axis)


def orthogonal(key: Any, n: int, shape: Shape = (), dtype: Any = dtypes.float32, m: Optional[int] = None) -> Array:
  """Uniformly random (Haar) n x m matrices with orthonormal rows or columns (batch `shape` in front):
  as JAX, the Q factor of a Gaussian matrix's QR factorization (LAPACK, one host kernel: never a
  column-by-column trace), each column's sign flipped where R's diagonal is negative."""
  key, shape, dt = _single_key("orthogonal", key), _shape_arg("orthogonal", shape), _float_dtype("orthogonal", dtype)
  m = n if m is None else m
  z = normal(key, shape + (max(n, m), min(n, m)), dt)
  q, r = tnp.linalg.qr(z)
  q = q * tnp.sign(tnp.diagonal(r, 0, -2, -1))[..., None, :]
  return tnp.swapaxes(q, -1, -2) if n < m else q


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.float32,
                        method: str = "cholesky") -> Array:
  """Normal vectors with `mean` (..., n) and covariance `cov` (..., n, n): mean + L z, L the Cholesky
  factor of cov (JAX's default method; 'eigh' and 'svd' are not available)."""
  key, dt = _single_key("multivariate_normal", key), _float_dtype("multivariate_normal", dtype)
  if method != "cholesky":
    raise NotImplementedError(f"multivariate_normal: method {method!r} is not available; use method='cholesky'")
  mean, cov = as_array(mean).astype(dt), as_array(cov).astype(dt)
  if mean.ndim < 1: raise ValueError(f"multivariate_normal needs mean with at least one axis, got shape {mean.shape}")
  n = mean.shape[-1]
  if cov.ndim < 2 or cov.shape[-2:] != (n, n):
    raise ValueError(f"multivariate_normal needs cov of shape (..., {n}, {n}) for mean of shape {mean.shape}, "
                     f"got {cov.shape}")
  batch = broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
  shape = batch if shape is None else _shape_arg("multivariate_normal", shape)
  _check_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
  factor = tnp.linalg.cholesky(cov)
  z = normal(key, shape + (n,), dt)
  return mean + tnp.einsum("...ij,...j->...i", factor, z)


def _run_rounds(step: Any, state: tuple, done: Any, traced: bool, traced_rounds: int, fn: str) -> tuple:
  """Apply `step` to `state` until `done(state)`, as JAX's while loop over a whole array: on concrete
  values the state is computed after each round (the same kernels every round) and the loop stops when
  done; traced (jit, vmap), `traced_rounds` rounds are unrolled."""
  from tgfn.engine.realize import realize
  for rounds in range(1, (traced_rounds if traced else _MAX_EAGER_ROUNDS) + 1):
    state = step(state)
    if traced: continue
    state = tuple(Array(u) for u in realize([x.uop for x in state]))
    if bool(done(state)): return state
  if traced: return state
  raise RuntimeError(f"{fn}: the sampling loop did not finish in {_MAX_EAGER_ROUNDS} rounds; "
                     "check that the rate is finite and non-negative")


# rounds unrolled under jit/vmap: P(Poisson(10) >= 64) and 0.1**24 (PTRS rejects < 10%) are below 1e-20
_KNUTH_ROUNDS, _PTRS_ROUNDS = 64, 24


def _lgamma_at_least_one(x: Array) -> Array:
  """log Gamma(x) for x >= 1 (float32): Stirling's series at x + 8, shifted back by log(x (x+1) ... (x+7))."""
  y = x + 8.0
  series = (y - 0.5) * tnp.log(y) - y + 0.5 * math.log(2 * math.pi)
  inv = 1.0 / y
  series = series + inv * (1 / 12 - inv * inv * (1 / 360 - inv * inv / 1260))
  shift = x
  for i in range(1, 8): shift = shift * (x + i)
  return series - tnp.log(shift)


def poisson(key: Any, lam: Any, shape: Optional[Shape] = None, dtype: Any = dtypes.int32) -> Array:
  """Poisson(lam) integers, JAX's algorithms: Knuth's product of uniforms for lam < 10, Hormann's
  transformed rejection (PTRS) for lam >= 10, each a loop over the whole array with one key split per
  round, as JAX's while loops (so the same key gives JAX's numbers, up to the last bit of log and
  lgamma at an acceptance boundary). lam == 0 gives 0."""
  from tgfn.dtype import to_dtype
  from tgfn.transforms.trace import is_traced
  key = _single_key("poisson", key)
  dt = to_dtype(dtype)
  if not dt.is_int: raise ValueError(f"poisson: dtype must be an integer dtype, got {dt.name}")
  lam = as_array(lam).astype(dtypes.float32)
  shape = lam.shape if shape is None else _shape_arg("poisson", shape)
  _check_shape("poisson", shape, lam.shape)
  lam = tnp.broadcast_to(lam, shape)
  traced = is_traced(key.uop) or is_traced(lam.uop)
  use_knuth = tnp.isnan(lam) | (lam < 10)
  lam_knuth = tnp.where(use_knuth, lam, 0.0)
  lam_ptrs = tnp.where(use_knuth, 1e5, lam)
  if not traced: lam_knuth, lam_ptrs = lam_knuth.realize(), lam_ptrs.realize()

  def knuth_step(state: tuple) -> tuple:
    rng, k, log_prod = state
    rng, subkey = split(rng)
    k = tnp.where(log_prod > -lam_knuth, k + 1, k)
    return rng, k, log_prod + _log(uniform(subkey, shape, dtypes.float32))

  zeros_f = tnp.zeros(shape, dtypes.float32)
  _, k_knuth, _ = _run_rounds(knuth_step, (key, tnp.zeros(shape, dt), zeros_f),
                              lambda s: ~(s[2] > -lam_knuth).any(), traced, _KNUTH_ROUNDS, "poisson")
  log_lam = _log(lam_ptrs)
  b = 0.931 + 2.53 * tnp.sqrt(lam_ptrs)
  a = -0.059 + 0.02483 * b
  inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
  v_r = 0.9277 - 3.6224 / (b - 2)

  def ptrs_step(state: tuple) -> tuple:
    rng, k_out, accepted = state
    rng, key_u, key_v = split(rng, 3)
    u = uniform(key_u, shape, dtypes.float32) - 0.5
    v = uniform(key_v, shape, dtypes.float32)
    u_shifted = 0.5 - tnp.abs(u)
    k = tnp.floor((2 * a / u_shifted + b) * u + lam_ptrs + 0.43)
    s = _log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
    t = -lam_ptrs + k * log_lam - _lgamma_at_least_one(tnp.maximum(k, 0.0) + 1)
    accept1 = (u_shifted >= 0.07) & (v <= v_r)
    reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
    accept = accept1 | (~reject & (s <= t))
    return rng, tnp.where(accept, k, k_out), accepted | accept  # as JAX: a later acceptance overwrites

  _, k_ptrs, _ = _run_rounds(ptrs_step, (key, tnp.full(shape, -1.0, dtypes.float32), tnp.zeros(shape, tnp.bool_)),
                             lambda s: s[2].all(), traced, _PTRS_ROUNDS, "poisson")
  out = tnp.where(use_knuth, k_knuth - 1, k_ptrs.astype(dt))
  return tnp.where(lam == 0, tnp.zeros((), dt), out)
