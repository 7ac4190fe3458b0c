"""tgfn.random: Threefry keys and samplers, checked against JAX's numbers bit for bit, across devices, under
jit and vmap, for their distributions, and for their argument errors.

The reference values below were computed once with JAX 0.10 on CPU from `jax.random.PRNGKey(42)`, in JAX's
default scheme (`jax_threefry_partitionable=True`) except the legacy ones (the flag off), and the 64-bit
ones with `jax_enable_x64`. So the suite does not need JAX; `test_matches_live_jax` compares many more and
larger draws when JAX is installed."""
import math

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
import tgfn.random as random

JAX = {
  "split": [[1832780943, 270669613], [64467757, 2916123636]],
  "split_2x3": [[[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]],
                [[3134548294, 894150801], [2954079971, 3276725750], [2765691542, 824333390]]],
  "fold_in_7": [2547012911, 1371500959],
  "bits_u32": [2098992034, 2919706841, 2646866425, 2409546199, 1935504149],
  "bits_u8": [[162, 217, 249], [215, 21, 216]],
  "bits_u16": [5026, 12505, 63993, 49623],
  "bits_u64": [7871734211187709741, 276886910877598708, 10591095138341673235],
  "uniform": [0.48870956897735596, 0.6797971725463867, 0.6162714958190918, 0.5610160827636719,
              0.4506446123123169],
  "uniform_bounds": [1.7825794219970703, 3.769890308380127, 3.1092233657836914, 2.53456711769104,
                     1.3867038488388062],
  "uniform_f16": [0.076171875, 0.1904296875, 0.9755859375, 0.7568359375],
  "uniform_bf16": [0.6328125, 0.84375, 0.96875, 0.8359375],
  "uniform_f64": [0.4267275666499091, 0.015010069515314584, 0.5741444178995352],
  "normal": [-0.02830461598932743, 0.4671318531036377, 0.2957029640674591, 0.15354591608047485,
             -0.12403281778097153],
  "normal_f16": [-1.4296875, -0.87548828125, 1.974609375, 0.69677734375],
  "normal_bf16": [0.34375, 1.015625, 1.890625, 0.984375],
  "gumbel": [0.3340933918952942, 0.952019453048706, 0.7255305647850037, 0.5481715202331543],
  "truncated_normal": [-0.3263436257839203, -0.021443137899041176, -0.12120473384857178, -0.2089366316795349,
                       -0.38990142941474915],
  "bernoulli": [False, False, False, False, False, False, True, False],
  "randint": [-1, -1, -4, 4, 4, 4],
  "randint_u8": [196, 18, 183, 193, 141, 107],
  "categorical": [[2, 0], [2, 0], [1, 0]],
  "permutation": [7, 4, 2, 5, 3, 6, 8, 9, 0, 1],
  "permutation_2d": [[2, 3, 0, 1], [6, 7, 4, 5], [10, 11, 8, 9]],
  "permutation_indep": [[2, 3, 0, 1], [7, 4, 5, 6], [10, 11, 8, 9]],
  "legacy_split": [[3134548294, 3733159049], [3746501087, 894150801], [801545058, 2363201431]],
  "legacy_bits_u8": [45, 179, 215, 3, 244],
  "legacy_uniform": [0.7298188209533691, 0.8691937923431396, 0.19643795490264893, 0.20818567276000977,
                     0.1866241693496704],
  "legacy_normal": [0.18693546950817108, -1.2806504964828491, -1.559313178062439],
}


def K(): return random.key(42)


LOGITS = np.array([[0., 1., 2.], [2., 1., 0.]], np.float32)
GRID = np.arange(12, dtype=np.int32).reshape(3, 4)
DRAWS = {  # name in JAX -> (the same draw in tgfn, its NumPy dtype); bfloat16 compared as float32
  "split": (lambda: random.split(K()), np.uint32),
  "split_2x3": (lambda: random.split(K(), (2, 3)), np.uint32),
  "fold_in_7": (lambda: random.fold_in(K(), 7), np.uint32),
  "bits_u32": (lambda: random.bits(K(), (5,)), np.uint32),
  "bits_u8": (lambda: random.bits(K(), (2, 3), tgfn.uint8), np.uint8),
  "bits_u16": (lambda: random.bits(K(), (4,), np.uint16), np.uint16),
  "bits_u64": (lambda: random.bits(K(), (3,), tgfn.uint64), np.uint64),
  "uniform": (lambda: random.uniform(K(), (5,)), np.float32),
  "uniform_bounds": (lambda: random.uniform(K(), (5,), minval=-3.3, maxval=7.1), np.float32),
  "uniform_f16": (lambda: random.uniform(K(), (4,), tgfn.float16), np.float16),
  "uniform_bf16": (lambda: random.uniform(K(), (4,), tgfn.bfloat16).astype(tgfn.float32), np.float32),
  "uniform_f64": (lambda: random.uniform(K(), (3,), tgfn.float64), np.float64),
  "normal": (lambda: random.normal(K(), (5,)), np.float32),
  "normal_f16": (lambda: random.normal(K(), (4,), "float16"), np.float16),
  "normal_bf16": (lambda: random.normal(K(), (4,), tgfn.bfloat16).astype(tgfn.float32), np.float32),
  "gumbel": (lambda: random.gumbel(K(), (4,)), np.float32),
  "truncated_normal": (lambda: random.truncated_normal(K(), -1.5, 0.5, (5,)), np.float32),
  "bernoulli": (lambda: random.bernoulli(K(), 0.3, (8,)), np.bool_),
  "randint": (lambda: random.randint(K(), (6,), -5, 5), np.int32),
  "randint_u8": (lambda: random.randint(K(), (6,), 0, 256, tgfn.uint8), np.uint8),
  "categorical": (lambda: random.categorical(K(), LOGITS, shape=(3, 2)), np.int32),
  "permutation": (lambda: random.permutation(K(), 10), np.int32),
  "permutation_2d": (lambda: random.permutation(K(), GRID, axis=1), np.int32),
  "permutation_indep": (lambda: random.permutation(K(), GRID, axis=1, independent=True), np.int32),
}


def assert_bits_equal(got, want) -> None:
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
  assert got.tobytes() == want.tobytes(), f"\n got {got}\nwant {want}"


@pytest.fixture
def legacy_scheme():
  previous = random.set_threefry_partitionable(False)
  yield
  random.set_threefry_partitionable(previous)


# ---- keys
def test_key_is_jax_raw_key_data():
  u32 = lambda *words: np.array(words, np.uint32)  # noqa: E731
  assert_bits_equal(random.key(0), u32(0, 0))
  assert_bits_equal(random.PRNGKey(42), u32(0, 42))
  assert_bits_equal(random.key(-1), u32(0, 2 ** 32 - 1))  # seeds of 32 bits: [0, seed mod 2**32]
  assert_bits_equal(random.key(np.uint32(2 ** 32 - 1)), u32(0, 2 ** 32 - 1))
  assert_bits_equal(random.key(2 ** 40 + 5), u32(256, 5))  # 64-bit seeds, as JAX with x64
  assert_bits_equal(random.key(np.int64(-1)), u32(2 ** 32 - 1, 2 ** 32 - 1))
  assert_bits_equal(random.key_data(random.split(random.key(0), 3)), random.split(random.key(0), 3))


def test_threefry_known_answers():
  # Random123's known-answer vectors for Threefry-2x32 with 20 rounds (the second: pi's digits)
  ones = np.array([0xFFFFFFFF] * 2, np.uint32)
  assert_bits_equal(random.threefry_2x32(ones, ones), np.array([0x1CB996FC, 0xBB002BE7], np.uint32))
  key, count = np.array([0x13198A2E, 0x03707344], np.uint32), np.array([0x243F6A88, 0x85A308D3], np.uint32)
  assert_bits_equal(random.threefry_2x32(key, count), np.array([0xC4923A9C, 0x483DF7A0], np.uint32))


# ---- JAX's numbers, on both devices (small draws: PYTHON is a scalar interpreter)
@pytest.mark.parametrize("name", list(DRAWS))
def test_matches_jax_bit_for_bit(device, name):
  draw, dtype = DRAWS[name]
  assert_bits_equal(draw(), np.array(JAX[name], dtype))


FLOAT_DRAWS = ["uniform_bounds", "normal", "normal_f16", "normal_bf16", "gumbel", "truncated_normal", "categorical"]


@pytest.mark.parametrize("name", FLOAT_DRAWS)
def test_float_draws_without_float64_are_within_ulps_of_jax(monkeypatch, name):
  """On a device without float64 (WEBGPU) XLA's fused multiply-adds are a multiply and an add (two roundings):
  JAX's numbers within a few float32 ulps of max(|x|, 1) (measured on 100,000 draws: 2, truncated_normal 5)."""
  import sys
  monkeypatch.setattr(sys.modules["tgfn.random"], "has_64bit", lambda device: False)
  draw, dtype = DRAWS[name]
  got, want = np.asarray(draw()).astype(np.float64), np.array(JAX[name], dtype).astype(np.float64)
  np.testing.assert_allclose(got, want, rtol=0, atol=8 * 2.0 ** -23)


def test_legacy_scheme_matches_jax(device, legacy_scheme):
  assert_bits_equal(random.split(K(), 3), np.array(JAX["legacy_split"], np.uint32))
  # an odd number of words, and the fold_in that both schemes share
  assert_bits_equal(random.bits(K(), (5,), tgfn.uint8), np.array(JAX["legacy_bits_u8"], np.uint8))
  assert_bits_equal(random.uniform(K(), (5,)), np.array(JAX["legacy_uniform"], np.float32))
  assert_bits_equal(random.normal(K(), (3,)), np.array(JAX["legacy_normal"], np.float32))
  assert_bits_equal(random.fold_in(K(), 7), np.array(JAX["fold_in_7"], np.uint32))


def test_matches_live_jax():
  jax = pytest.importorskip("jax")
  jnp, jr = jax.numpy, jax.random
  for seed in (0, -7, 2 ** 31 - 1):
    k, jk = random.key(seed), jr.PRNGKey(seed)
    assert_bits_equal(k, jr.key_data(jk))
    assert_bits_equal(random.split(k, 7), jr.split(jk, 7))
    assert_bits_equal(random.fold_in(k, 123456), jr.fold_in(jk, 123456))
  rng = np.random.default_rng(0)
  lo = rng.uniform(-3, 1, 500).astype(np.float32)
  hi = lo + rng.uniform(0.01, 3, 500).astype(np.float32)
  logits = rng.normal(size=(20, 7)).astype(np.float32)
  k, jk = random.key(1), jr.PRNGKey(1)
  assert_bits_equal(random.bits(k, (3, 333), tgfn.uint16), jr.bits(jk, (3, 333), jnp.uint16))
  bounds = dict(minval=lo, maxval=hi)
  assert_bits_equal(random.uniform(k, (500,), **bounds), jr.uniform(jk, (500,), **bounds))
  assert_bits_equal(random.normal(k, (10_000,)), jr.normal(jk, (10_000,)))
  assert_bits_equal(random.truncated_normal(k, lo, hi), jr.truncated_normal(jk, lo, hi))
  assert_bits_equal(random.randint(k, (1000,), -1000, 77777), jr.randint(jk, (1000,), -1000, 77777))
  assert_bits_equal(random.categorical(k, logits), jr.categorical(jk, logits))
  assert_bits_equal(random.permutation(k, 300), jr.permutation(jk, 300))
  previous = random.set_threefry_partitionable(False)
  try:
    with jax.threefry_partitionable(False):
      assert_bits_equal(random.uniform(k, (7, 3), tgfn.bfloat16), jr.uniform(jk, (7, 3), jnp.bfloat16))
  finally:
    random.set_threefry_partitionable(previous)


# ---- determinism and independence
def test_same_key_same_numbers_and_new_keys_differ():
  assert_bits_equal(random.normal(K(), (64,)), random.normal(K(), (64,)))
  k1, k2 = random.split(K())
  keys = (K(), k1, k2, random.key(43), random.fold_in(K(), 1000))
  streams = [np.asarray(random.normal(k, (64,))) for k in keys]
  for i in range(len(streams)):
    for j in range(i):
      assert not np.any(streams[i] == streams[j])
  assert len({tuple(k) for k in np.asarray(random.split(K(), 1000)).tolist()}) == 1000
  # in the partitionable scheme split(key)[i] is fold_in(key, i)
  assert_bits_equal(random.split(K(), 5)[3], random.fold_in(K(), 3))


# ---- transforms
def test_jit_fuses_and_does_not_retrace_for_new_keys():
  def draws(key): return random.normal(key, (3,)), random.randint(key, (4,), 0, 10), random.split(key)
  f = tgfn.jit(draws)
  for key in (K(), random.key(7), random.split(K())[1]):
    for got, want in zip(f(key), draws(key)): assert_bits_equal(got, want)
  assert f.trace_count == 1
  assert tgfn.jit(lambda key: random.normal(key, (8,))).lower(K()).as_text().count("// kernel ") == 1
  seeded = tgfn.jit(lambda seed: random.uniform(random.key(seed), (2,)))
  assert_bits_equal(seeded(5), random.uniform(random.key(5), (2,)))
  assert_bits_equal(seeded(6), random.uniform(random.key(6), (2,)))
  assert seeded.trace_count == 1


def test_vmap_over_keys_gives_one_stream_per_key():
  keys = random.split(K(), 2)
  for fn in (lambda k: random.normal(k, (2, 2)), lambda k: random.permutation(k, 5),
             lambda k: random.randint(k, (3,), -3, 3), lambda k: random.split(k)):
    # (the loop passes each key as host data: one kernel for both, where views of `keys` would make two)
    assert_bits_equal(tgfn.vmap(fn)(keys), np.stack([np.asarray(fn(k)) for k in np.asarray(keys)]))
  folded = np.stack([np.asarray(random.fold_in(K(), i)) for i in range(3)])
  assert_bits_equal(tgfn.vmap(lambda d: random.fold_in(K(), d))(tnp.arange(3)), folded)
  seeded = np.stack([np.asarray(random.key(i)) for i in range(3)])
  assert_bits_equal(tgfn.vmap(random.key)(tnp.arange(3)), seeded)


# ---- distributions (fixed keys, so these are deterministic; bounds are several standard errors wide)
def test_normal_uniform_gumbel_statistics():
  n = 10_000
  x = np.asarray(random.normal(random.key(0), (n,)), np.float64)
  assert abs(x.mean()) < 4 / math.sqrt(n) and abs(x.std() - 1) < 4 / math.sqrt(2 * n)
  u = np.asarray(random.uniform(random.key(1), (n,), minval=-2.0, maxval=3.0), np.float64)
  assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 4 * 5 / math.sqrt(12 * n)
  g = np.asarray(random.gumbel(random.key(2), (n,)), np.float64)
  assert abs(g.mean() - 0.5772156649) < 4 * (math.pi / math.sqrt(6)) / math.sqrt(n)  # Euler's gamma


def test_discrete_statistics():
  n = 10_000
  b = np.asarray(random.bernoulli(random.key(3), 0.25, (n,)))
  assert b.dtype == np.bool_ and abs(b.mean() - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n)
  r = np.asarray(random.randint(random.key(4), (n,), -7, 3))
  assert r.dtype == np.int32 and r.min() == -7 and r.max() == 2 and len(set(r.tolist())) == 10
  logits = np.array([0.0, 1.0, 2.0, -1.0], np.float32)
  c = np.asarray(random.categorical(random.key(5), logits, shape=(n,)))
  p = np.exp(logits) / np.exp(logits).sum()
  assert np.all(np.abs(np.bincount(c, minlength=4) / n - p) < 4 * np.sqrt(p * (1 - p) / n))
  perm = np.asarray(random.permutation(random.key(6), 200))
  assert sorted(perm.tolist()) == list(range(200)) and not np.array_equal(perm, np.arange(200))


def test_truncated_normal_stays_inside_its_bounds():
  t = np.asarray(random.truncated_normal(random.key(7), -0.5, 1.25, (5000,)))
  assert t.min() > -0.5 and t.max() < 1.25
  # the mean of N(0, 1) truncated to [a, b] is (pdf(a) - pdf(b)) / (cdf(b) - cdf(a))
  def pdf(z): return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
  def cdf(z): return 0.5 * (1 + math.erf(z / math.sqrt(2)))
  assert abs(t.mean() - (pdf(-0.5) - pdf(1.25)) / (cdf(1.25) - cdf(-0.5))) < 4 * t.std() / math.sqrt(t.size)
  lower = np.array([-3.0, 2.0], np.float32)
  far = np.asarray(random.truncated_normal(random.key(8), lower, 4.0, (100, 2)))
  assert far.min() > -3.0 and far[:, 1].min() > 2.0 and far.max() < 4.0


def test_permutation_moves_whole_slices_and_keeps_values_exact():
  x = np.array([[-0.0, 1.5, np.nan], [np.inf, -2.0, 3.0]], np.float32)
  def columns(a): return {tuple(c) for c in np.asarray(a).T.view(np.uint32).tolist()}
  assert columns(random.permutation(K(), x, axis=1)) == columns(x)  # -0.0 and NaN bits included
  rows = np.asarray(random.permutation(K(), x))
  assert sorted(rows.view(np.uint32).tolist()) == sorted(x.view(np.uint32).tolist())


# ---- argument errors
def test_argument_errors_are_clear():
  def raises(error, match, fn, *args, **kwargs):
    with pytest.raises(error, match=match): fn(*args, **kwargs)
  raises(TypeError, "expects a PRNG key", random.normal, 0, (2,))
  raises(TypeError, "dtype int32", random.normal, np.zeros(2, np.int32), (2,))
  raises(TypeError, r"shape \(3,\)", random.uniform, np.zeros(3, np.uint32))
  raises(ValueError, "single key.*vmap", random.normal, random.split(K(), 2))
  raises(ValueError, "negative", random.normal, K(), (2, -1))
  raises(TypeError, "shape must be", random.normal, K(), (2.5,))
  raises(ValueError, "must broadcast", random.uniform, K(), (3,), minval=np.zeros(4, np.float32))
  raises(ValueError, "must broadcast", random.categorical, K(), LOGITS, shape=(5,))
  raises(ValueError, "unsigned", random.bits, K(), (2,), tgfn.int32)
  raises(ValueError, "float dtype", random.uniform, K(), (2,), tgfn.int32)
  raises(TypeError, "integer dtypes", random.randint, K(), (2,), 0, 5, tgfn.float32)
  raises(TypeError, "float dtype", random.bernoulli, K(), 1)
  raises(TypeError, "integer", random.key, 1.5)
  raises(TypeError, "integer scalar", random.key, tnp.arange(2))
  raises(OverflowError, "uint32", random.fold_in, K(), -1)
  raises(OverflowError, "uint32", random.fold_in, K(), 2 ** 32)
  raises(ValueError, "out of range", random.categorical, K(), LOGITS, axis=2)
  raises(TypeError, "at least one axis", random.permutation, K(), tnp.array(3.0))
  raises(NotImplementedError, "float64", random.truncated_normal, K(), -1.0, 1.0, dtype=tgfn.float64)
  # as in JAX, reversed bounds are not an error: uniform and randint return minval there
  assert np.all(np.asarray(random.uniform(K(), (3,), minval=2.0, maxval=1.0)) == 2.0)
  assert np.all(np.asarray(random.randint(K(), (3,), 3, 1)) == 3)
