"""tgfn.nn layers: forward values against NumPy references, BatchNorm statistics, derivatives with
respect to whole models, vmap against loops over examples, and models through grad and jit.

Most layers here are built with their dataclass constructors from NumPy values, which compiles no
random-number kernels; `Layer.init` with tgfn.random keys has tests of its own."""
import math

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
import tgfn.random
from tests.conftest import assert_close
from tests.nn.test_functional import np_attention, np_conv2d
from tgfn import nn
from tgfn.test_util import check_grads

rng = np.random.default_rng(1)


def arr(x): return tnp.array(x)
def host(a): return np.asarray(a, np.float64)
def uniform(*shape, dtype=np.float32): return arr(rng.uniform(-0.5, 0.5, shape).astype(dtype))
def linear(i, o, dtype=np.float32): return nn.Linear(uniform(o, i, dtype=dtype), uniform(o, dtype=dtype))
def mha(e, heads, dtype=np.float32):
  return nn.MultiHeadAttention(*(linear(e, e, dtype) for _ in range(4)), heads)


def conv(c, o, k, groups=1, dtype=np.float32, **config):
  weight, bias = uniform(o, c // groups, k, k, dtype=dtype), uniform(o, dtype=dtype)
  return nn.Conv2d(weight, bias, groups=groups, **config)


def as64(model): return tgfn.tree.map(lambda a: a.astype(tnp.float64), model)


def np_standardize(x, axes, eps):
  mean = x.mean(axes, keepdims=True)
  return (x - mean) / np.sqrt(x.var(axes, keepdims=True) + eps)


def loop(f, *xs):
  return np.stack([np.asarray(f(*(arr(x[i]) for x in xs))) for i in range(len(xs[0]))])


# ---- forward values
def test_linear(device):
  lin = linear(4, 3)
  x = rng.standard_normal((2, 5, 4)).astype(np.float32)
  assert_close(lin(arr(x)), x @ np.asarray(lin.weight).T + np.asarray(lin.bias), rtol=1e-5, atol=1e-6)
  no_bias = nn.Linear(lin.weight)
  assert tgfn.tree.leaves(no_bias) == [lin.weight]
  assert_close(no_bias(arr(x)), x @ np.asarray(lin.weight).T, rtol=1e-5, atol=1e-6)


def test_conv2d_layer(device):
  layer = conv(4, 6, 3, groups=2, stride=2, padding=(1, 1))
  x = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
  want = np_conv2d(x, np.asarray(layer.weight), np.asarray(layer.bias), (2, 2), [(1, 1)] * 2, (1, 1), 2)
  assert_close(layer(arr(x)), want, rtol=1e-5, atol=1e-5)


def test_embedding(device):
  emb = nn.Embedding(uniform(5, 3))
  ids = np.array([[0, 4], [2, 2]], np.int32)
  assert_close(emb(arr(ids)), np.asarray(emb.weight)[ids])


def test_layer_norm_rms_norm_group_norm(device):
  x = rng.standard_normal((2, 4, 3)).astype(np.float32)
  w, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
  ln = nn.LayerNorm(arr(w), arr(b), (4, 3))
  assert_close(ln(arr(x)), np_standardize(x, (1, 2), 1e-5) * w + b, rtol=1e-5, atol=1e-5)
  plain = nn.LayerNorm.init(None, 3, elementwise_affine=False)
  assert plain.weight is None and plain.bias is None
  assert_close(plain(arr(x)), np_standardize(x, (2,), 1e-5), rtol=1e-5, atol=1e-5)
  rms = nn.RMSNorm(arr(w[0]), (3,), 1e-6)
  assert_close(rms(arr(x)), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w[0], rtol=1e-5, atol=1e-6)
  gn = nn.GroupNorm(arr(w[:, 0]), arr(b[:, 0]), 2)
  want = np_standardize(x.reshape(2, 2, 6), (2,), 1e-5).reshape(x.shape) * w[:, :1] + b[:, :1]
  assert_close(gn(arr(x)), want, rtol=1e-5, atol=1e-5)


def test_batch_norm_training_and_eval_statistics(device):
  x = (rng.standard_normal((4, 3, 2, 2)) * 2 + 1).astype(np.float32)
  w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
  fresh = nn.BatchNorm.init(None, 3, momentum=0.2)
  bn = nn.BatchNorm(arr(w), arr(b), fresh.running_mean, fresh.running_var, 0.2)
  y, new = bn(arr(x), training=True)
  c = lambda v: v.reshape(1, 3, 1, 1)
  assert_close(y, np_standardize(x, (0, 2, 3), 1e-5) * c(w) + c(b), rtol=1e-5, atol=1e-5)
  mean, var_unbiased = x.mean((0, 2, 3)), x.var((0, 2, 3), ddof=1)
  assert_close(new.running_mean, 0.8 * 0 + 0.2 * mean, rtol=1e-5, atol=1e-6)
  assert_close(new.running_var, 0.8 * 1 + 0.2 * var_unbiased, rtol=1e-5)
  assert isinstance(new, nn.BatchNorm) and new.momentum == 0.2
  # eval mode normalizes with the running statistics and leaves the layer as it is
  y_eval, same = new(arr(x))
  assert same is new
  rm, rv = np.asarray(new.running_mean), np.asarray(new.running_var)
  assert_close(y_eval, (x - c(rm)) / np.sqrt(c(rv) + 1e-5) * c(w) + c(b), rtol=1e-5, atol=1e-5)


def np_mha(layer, q, k, v, causal=False):
  p = lambda lin, x: x @ host(lin.weight).T + host(lin.bias)
  heads = lambda x: np.swapaxes(x.reshape(x.shape[:-1] + (layer.num_heads, -1)), -2, -3)
  q, k, v = heads(p(layer.q_proj, q)), heads(p(layer.k_proj, k)), heads(p(layer.v_proj, v))
  out = np_attention(q, k, v, causal=causal)
  out = np.swapaxes(out, -2, -3)
  return p(layer.out_proj, out.reshape(out.shape[:-2] + (-1,)))


def test_multi_head_attention(device):
  layer = mha(8, 2)
  q, kv = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 5, 8))
  q32, kv32 = arr(q.astype(np.float32)), arr(kv.astype(np.float32))
  close = lambda got, want: assert_close(got, want, rtol=1e-4, atol=1e-5, check_dtype=False)
  close(layer(q32), np_mha(layer, q, q, q))
  close(layer(q32, kv32, is_causal=True), np_mha(layer, q, kv, kv, causal=True))


def test_sequential_wraps_functions_and_threads_state():
  lin1, lin2 = linear(3, 4), linear(4, 2)
  seq = nn.Sequential([lin1, nn.relu, nn.Dropout(0.5), lin2])
  assert isinstance(seq.layers[1], nn.Lambda) and not seq.stateful
  x = rng.standard_normal((2, 3)).astype(np.float32)
  hidden = np.maximum(x @ host(lin1.weight).T + host(lin1.bias), 0)
  assert_close(seq(arr(x)), hidden @ host(lin2.weight).T + host(lin2.bias), rtol=1e-5, atol=1e-6,
               check_dtype=False)
  with pytest.raises(ValueError, match="needs a PRNG key"):
    seq(arr(x), training=True)
  # training with a key: the Dropout layer gets a key split from it
  dropout_key = tgfn.random.split(tgfn.random.key(3), 1)[0]
  dropped = np.asarray(seq.layers[2](arr(hidden.astype(np.float32)), key=dropout_key, training=True))
  assert_close(seq(arr(x), key=tgfn.random.key(3), training=True),
               dropped @ host(lin2.weight).T + host(lin2.bias), rtol=1e-5, atol=1e-6, check_dtype=False)
  # with a BatchNorm inside, the Sequential is stateful: it returns (y, updated Sequential)
  stateful = nn.Sequential((lin1, nn.BatchNorm.init(None, 4)))
  y, new = stateful(arr(x), training=True)
  h = x @ host(lin1.weight).T + host(lin1.bias)
  assert_close(y, np_standardize(h, (0,), 1e-5), rtol=1e-4, atol=1e-5, check_dtype=False)
  assert isinstance(new, nn.Sequential) and new.layers[0] is lin1
  assert_close(new.layers[1].running_mean, 0.1 * h.mean(0), rtol=1e-5, atol=1e-6, check_dtype=False)


def test_dropout_layer():
  x = arr(np.ones((20, 20), np.float32))
  assert nn.Dropout(0.3)(x) is x  # eval mode (the default) is the identity
  y = np.asarray(nn.Dropout(0.5)(x, key=tgfn.random.key(0), training=True))
  assert set(np.unique(y)) <= {0.0, 2.0} and 0.3 < (y == 0).mean() < 0.7


# ---- initialization from tgfn.random keys
def test_init_shapes_bounds_dtypes_and_determinism():
  key = tgfn.random.key(0)
  lin = nn.Linear.init(key, 16, 8, dtype=tnp.float64)
  w = host(lin.weight)
  assert lin.weight.shape == (8, 16) and lin.bias.shape == (8,) and lin.weight.dtype == tnp.float64
  assert np.abs(w).max() <= 1 / 4 and np.abs(w).max() > 0.2 and abs(w.mean()) < 0.05
  assert_close(nn.Linear.init(key, 16, 8, dtype=tnp.float64).weight, w)      # the key decides the values
  assert not np.array_equal(host(nn.Linear.init(tgfn.random.key(1), 16, 8).weight), w.astype(np.float32))
  assert nn.Linear.init(key, 16, 8, bias=False).bias is None
  layer = nn.Conv2d.init(key, 4, 6, (3, 2), stride=2, padding=[1, 1], groups=2)
  assert layer.weight.shape == (6, 2, 3, 2) and layer.padding == (1, 1)  # lists become hashable tuples
  assert np.abs(host(layer.weight)).max() <= 1 / math.sqrt(12)
  emb = host(nn.Embedding.init(key, 64, 4).weight)
  assert emb.shape == (64, 4) and 0.8 < emb.std() < 1.2
  bn = nn.BatchNorm.init(None, 3)
  assert [np.asarray(a).tolist() for a in (bn.weight, bn.bias, bn.running_mean, bn.running_var)] == \
    [[1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1]]
  attn = nn.MultiHeadAttention.init(key, 8, 4)
  assert np.abs(host(attn.q_proj.weight)).max() <= math.sqrt(6 / 32) and not host(attn.out_proj.bias).any()
  with pytest.raises(ValueError, match="not divisible by num_heads"):
    nn.MultiHeadAttention.init(key, 6, 4)
  with pytest.raises(ValueError, match="do not divide into"):
    nn.GroupNorm.init(None, 4, 6)


# ---- derivatives with respect to the model and the input: order 1, both modes, float64
X64 = rng.standard_normal((2, 4))
IMG64 = rng.standard_normal((2, 2, 3, 3))
SEQ64 = rng.standard_normal((3, 4))
F64 = np.float64
apply = lambda m, x: m(x)
GRAD_CASES = {
  "linear": (lambda: linear(4, 3, F64), apply, X64),
  "conv2d": (lambda: conv(2, 2, 2, dtype=F64, padding=1), apply, IMG64),
  "layer_norm": (lambda: nn.LayerNorm(uniform(4, dtype=F64), uniform(4, dtype=F64), (4,)), apply, X64),
  "rms_norm": (lambda: nn.RMSNorm(uniform(4, dtype=F64), (4,)), apply, X64),
  "group_norm": (lambda: nn.GroupNorm(uniform(2, dtype=F64), uniform(2, dtype=F64), 2), apply, IMG64),
  "batch_norm_train": (lambda: as64(nn.BatchNorm.init(None, 2)), lambda m, x: m(x, training=True)[0], IMG64),
  "batch_norm_eval": (lambda: as64(nn.BatchNorm.init(None, 2)), lambda m, x: m(x)[0], IMG64),
  "mha": (lambda: mha(4, 2, F64), lambda m, x: m(x, is_causal=True), SEQ64),
  "sequential": (lambda: nn.Sequential((linear(4, 3, F64), nn.silu, linear(3, 2, F64))), apply, X64),
  "dropout": (lambda: nn.Dropout(0.5), lambda m, x: m(x, key=tgfn.random.key(0), training=True), X64),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_check_grads(name):
  make, call, x = GRAD_CASES[name]
  check_grads(call, (make(), arr(x)), order=1)


def test_check_grads_embedding():
  ids = arr(np.array([[0, 2], [2, 1]], np.int32))
  check_grads(lambda m: m(ids), (nn.Embedding(uniform(3, 2, dtype=F64)),), order=1)


def test_grad_is_model_shaped_and_jit_takes_models():
  model = nn.Sequential((linear(4, 3), nn.relu, linear(3, 2)))
  x, labels = arr(X64.astype(np.float32)), arr(np.array([0, 1], np.int32))
  loss = lambda m, x: nn.cross_entropy(m(x), labels)
  grads = tgfn.grad(loss)(model, x)
  assert isinstance(grads, nn.Sequential) and isinstance(grads.layers[1], nn.Lambda)
  assert tgfn.tree.structure(grads) == tgfn.tree.structure(model)
  stepped = tgfn.tree.map(lambda p, g: (p - 0.1 * g).realize(), model, grads)
  fast = tgfn.jit(loss)
  before, after = float(fast(model, x)), float(fast(stepped, x))
  assert fast.trace_count == 1  # a new model with the same structure replays the compiled graph
  assert after < before
  assert_close(before, np.asarray(loss(model, x)), rtol=1e-6, check_dtype=False)


# ---- vmap over examples against a loop
def test_vmap_matches_loop():
  cases = [
    (linear(4, 3, F64), X64),
    (conv(2, 3, 2, dtype=F64, padding=1), IMG64),    # per example: unbatched (C, H, W)
    (nn.LayerNorm.init(None, 4, dtype=F64), X64),
    (nn.RMSNorm.init(None, 4, dtype=F64), X64),
    (mha(4, 2, F64), np.stack([SEQ64, SEQ64[::-1]])),
    (nn.Sequential((linear(4, 3, F64), nn.gelu)), X64),
  ]
  for layer, xs in cases:
    assert_close(tgfn.vmap(layer)(arr(xs)), loop(layer, xs), rtol=1e-6, atol=1e-9)
  ids = np.array([[0, 2], [1, 1]], np.int32)
  emb = nn.Embedding(uniform(3, 2))
  assert_close(tgfn.vmap(emb)(arr(ids)), loop(emb, ids))
  gn = nn.GroupNorm.init(None, 2, 2, dtype=F64)
  one = lambda xi: gn(xi[None])[0]
  assert_close(tgfn.vmap(one)(arr(IMG64)), loop(one, IMG64), rtol=1e-6, atol=1e-9)


def test_vmap_dropout_over_examples_with_a_key_each():
  keys = tgfn.random.split(tgfn.random.key(0), 2)
  xs = np.ones((2, 3, 4), np.float32)
  drop = lambda x, k: nn.Dropout(0.5)(x, key=k, training=True)
  assert_close(tgfn.vmap(drop)(arr(xs), keys), loop(drop, xs, np.asarray(keys)))


def test_vmap_batch_norm_over_groups_of_batches():
  bn = as64(nn.BatchNorm.init(None, 2))
  groups = rng.standard_normal((2, 3, 2, 2, 2))   # 2 groups of (N=3, C=2, H=2, W=2)
  ys, news = tgfn.vmap(lambda x: bn(x, training=True))(arr(groups))
  for i in range(2):
    y, new = bn(arr(groups[i]), training=True)
    assert_close(ys[i], np.asarray(y), rtol=1e-6, atol=1e-9)
    assert_close(news.running_mean[i], np.asarray(new.running_mean), rtol=1e-6, atol=1e-12)
    assert_close(news.running_var[i], np.asarray(new.running_var), rtol=1e-6)


def test_vmap_over_a_stack_of_models():
  models = [linear(4, 3, F64) for _ in range(2)]
  stacked = tgfn.tree.map(lambda *ps: tnp.stack(ps), *models)
  got = tgfn.vmap(lambda m: m(arr(X64)))(stacked)
  assert_close(got, np.stack([np.asarray(m(arr(X64))) for m in models]))
