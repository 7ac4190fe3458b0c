"""tgfn.nn.functional against NumPy references written here (loops for convolution and pooling),
derivatives against finite differences, numerical stability, kernel counts, and jit/vmap."""
import math

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
import tgfn.random
from tests.conftest import assert_close
from tgfn.nn import functional as F
from tgfn.schedule.schedule import create_schedule
from tgfn.test_util import check_grads
from tgfn.uop.ops import Ops

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 5)).astype(np.float32)
X64 = rng.standard_normal((2, 3))  # float64 inputs for check_grads


def arr(x): return tnp.array(x)


def np_softmax(x, axis=-1):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


def np_log_softmax(x, axis=-1):
  s = x - x.max(axis, keepdims=True)
  return s - np.log(np.exp(s).sum(axis, keepdims=True))


def np_sigmoid(x): return 1 / (1 + np.exp(-x.astype(np.float64)))


_erfc = np.vectorize(math.erfc)


# ---- activations
def test_activations_match_numpy(device):
  assert_close(F.relu(arr(X)), np.maximum(X, 0))
  assert_close(F.sigmoid(arr(X)), np_sigmoid(X).astype(np.float32))
  assert_close(F.silu(arr(X)), (X * np_sigmoid(X)).astype(np.float32), rtol=1e-5)
  tanh_form = 0.5 * X * (1 + np.tanh(np.sqrt(2 / np.pi) * (X + 0.044715 * X ** 3)))
  assert_close(F.gelu(arr(X)), tanh_form.astype(np.float32), rtol=1e-5, atol=1e-6)
  exact = X * _erfc(-X / np.sqrt(2)) / 2
  assert_close(F.gelu(arr(X), approximate=False), exact.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_exact_gelu_is_accurate_in_float64_far_into_the_tails():
  x = np.concatenate([np.linspace(-12, 12, 97), [-40.0, 40.0]])
  want = x * _erfc(-x / np.sqrt(2)) / 2
  assert_close(F.gelu(arr(x), approximate=False), want, rtol=1e-12, atol=1e-300)


def test_exact_gelu_second_derivatives_in_both_modes():
  x = np.array([-5.0, -0.5, 0.0, 1.5, 4.0])
  want = (2 - x * x) * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
  g = lambda v: F.gelu(v, approximate=False)
  assert_close(tgfn.vmap(tgfn.grad(tgfn.grad(g)))(arr(x)), want, rtol=1e-10, atol=1e-15)
  ones = arr(np.ones_like(x))
  forward = tgfn.jvp(lambda v: tgfn.jvp(g, (v,), (ones,))[1], (arr(x),), (ones,))[1]
  assert_close(forward, want, rtol=1e-10, atol=1e-15)


def test_activation_edge_values():
  big = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0, np.inf, -np.inf, np.nan], np.float32)
  want = np.array([0, np_sigmoid(np.float32(-50)), 0.5, 1, 1, 1, 0, np.nan], np.float32)
  assert_close(F.sigmoid(arr(big)), want)
  assert_close(F.relu(arr(big)), np.maximum(big, 0))
  assert_close(F.gelu(arr(big[:5]), approximate=False), np.array([0, 0, 0, 50, 1000], np.float32))
  # relu's derivative at 0 is 0 (JAX); sigmoid's derivative stays finite far out
  relu_slope = tgfn.grad(lambda x: F.relu(x).sum())(arr(np.array([-1.0, 0.0, 2.0])))
  assert_close(relu_slope, np.array([0.0, 0.0, 1.0]))
  slope = tgfn.grad(lambda x: F.sigmoid(x).sum())(arr(np.array([-1000.0, 0.0, 1000.0])))
  assert_close(slope, np.array([0.0, 0.25, 0.0]))


# ---- softmax family
@pytest.mark.parametrize("axis", [-1, (0, 1)])
def test_softmax_family_matches_numpy(axis, device):
  x = X.astype(np.float64)
  assert_close(F.softmax(arr(X), axis), np_softmax(x, axis).astype(np.float32), rtol=1e-5)
  assert_close(F.log_softmax(arr(X), axis), np_log_softmax(x, axis).astype(np.float32), rtol=1e-5, atol=1e-6)
  m = x.max(axis, keepdims=True)
  want = np.log(np.exp(x - m).sum(axis, keepdims=True)) + m
  assert_close(F.logsumexp(arr(X), axis, keepdims=True), want.astype(np.float32), rtol=1e-5)
  assert_close(F.logsumexp(arr(X), axis), np.squeeze(want, axis).astype(np.float32), rtol=1e-5)


def test_softmax_family_is_stable_for_large_and_infinite_values():
  x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -np.inf]])
  assert_close(F.softmax(arr(x)), np.stack([np_softmax(x[0] - 1000), np_softmax(x[1] + 1000)]))
  assert_close(F.log_softmax(arr(x)), np.stack([np_log_softmax(x[0] - 1000), np_log_softmax(x[1] + 1000)]))
  want = np.array([1000 + np.log(np.exp(x[0] - 1000).sum()), -1000 + np.log(np.exp(x[1] + 1000).sum())])
  assert_close(F.logsumexp(arr(x), -1), want)
  infinite = np.array([[-np.inf, -np.inf], [np.inf, 0.0]])
  assert_close(F.logsumexp(arr(infinite), -1), np.array([-np.inf, np.inf]))
  g = tgfn.grad(lambda v: F.logsumexp(v))(arr(x[0]))
  assert_close(g, np_softmax(x[0] - 1000))


def n_kernels(x) -> int: return len(create_schedule([x.uop]))


def test_softmax_and_log_softmax_take_at_most_three_kernels():
  x = arr(X).realize()
  assert n_kernels(F.softmax(x)) <= 3
  assert n_kernels(F.log_softmax(x)) <= 3
  assert n_kernels(F.logsumexp(x, -1)) <= 3


# ---- one-hot and losses
def test_one_hot():
  labels = np.array([[0, 2], [3, -1]], np.int32)  # 3 and -1 are out of range: all-zero rows (JAX)
  want = (labels[..., None] == np.arange(3)).astype(np.float32)
  assert_close(F.one_hot(arr(labels), 3), want)
  assert_close(F.one_hot(arr(labels), 3, axis=0, dtype=tnp.int32), np.moveaxis(want, -1, 0).astype(np.int32))


def np_cross_entropy(logits, targets, smoothing=0.0):
  c = logits.shape[-1]
  targets = targets * (1 - smoothing) + smoothing / c
  return -(targets * np_log_softmax(logits)).sum(-1)


def test_cross_entropy(device):
  logits = rng.standard_normal((4, 3))
  labels = np.array([0, 2, 1, 2], np.int32)
  onehot = np.eye(3)[labels]
  per_example = np_cross_entropy(logits, onehot)
  assert_close(F.cross_entropy(arr(logits), arr(labels)), per_example.mean())
  assert_close(F.cross_entropy(arr(logits), arr(labels), reduction="sum"), per_example.sum())
  assert_close(F.cross_entropy(arr(logits), arr(labels), reduction="none"), per_example)
  assert_close(F.cross_entropy(arr(logits), arr(onehot)), per_example.mean())
  soft = np_softmax(rng.standard_normal((4, 3)))
  assert_close(F.cross_entropy(arr(logits), arr(soft)), np_cross_entropy(logits, soft).mean())
  assert_close(F.cross_entropy(arr(logits), arr(labels), label_smoothing=0.1),
               np_cross_entropy(logits, onehot, 0.1).mean())
  # the class axis can be elsewhere, e.g. (N, C, L) as PyTorch
  seq_logits, seq_labels = rng.standard_normal((2, 3, 4)), rng.integers(0, 3, (2, 4)).astype(np.int32)
  want = np_cross_entropy(np.moveaxis(seq_logits, 1, -1), np.eye(3)[seq_labels]).mean()
  assert_close(F.cross_entropy(arr(seq_logits), arr(seq_labels), axis=1), want)


def test_loss_errors():
  with pytest.raises(ValueError, match="integer labels must have shape \\(4,\\)"):
    F.cross_entropy(arr(np.zeros((4, 3))), arr(np.zeros(3, np.int32)))
  with pytest.raises(ValueError, match="reduction must be one of"):
    F.mse_loss(arr(X), arr(X), reduction="avg")


def test_mse_loss():
  target = rng.standard_normal((3, 5)).astype(np.float32)
  assert_close(F.mse_loss(arr(X), arr(target)), ((X - target) ** 2).mean(), rtol=1e-6)
  assert_close(F.mse_loss(arr(X), arr(target), "none"), (X - target) ** 2)


# ---- convolution and pooling: loop references
def same_padding(n, k, s, d):
  total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
  return (total // 2, total - total // 2)


def window(i, j, stride, dilation, k):
  """The index of window (i, j) in a padded image, as two strided slices."""
  (sh, sw), (dh, dw), (kh, kw) = stride, dilation, k
  return slice(i * sh, i * sh + dh * (kh - 1) + 1, dh), slice(j * sw, j * sw + dw * (kw - 1) + 1, dw)


def np_conv2d(x, w, b, stride, pads, dilation, groups):
  (sh, sw), (dh, dw) = stride, dilation
  xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
  n, c, h, wd = xp.shape
  o, cg, kh, kw = w.shape
  oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
  out = np.zeros((n, o, oh, ow), x.dtype)
  for b_ in range(n):
    for oc in range(o):
      g = oc // (o // groups)
      for i in range(oh):
        for j in range(ow):
          patch = xp[(b_, slice(g * cg, (g + 1) * cg)) + window(i, j, stride, dilation, (kh, kw))]
          out[b_, oc, i, j] = (patch * w[oc]).sum() + (0 if b is None else b[oc])
  return out


CONV_CASES = [  # stride, padding (as passed), dilation, groups
  (1, 0, 1, 1),
  (2, 1, 1, 1),
  ((1, 2), ((1, 0), (2, 1)), (2, 1), 2),
  (2, "SAME", 1, 1),
  (3, "VALID", 1, 2),   # depthwise (a channel multiplier of 2); stride larger than the kernel
]


def resolve_padding(padding, hw, k, stride, dilation):
  if padding == "SAME": return [same_padding(n, kk, s, d) for n, kk, s, d in zip(hw, k, stride, dilation)]
  if padding == "VALID": return [(0, 0), (0, 0)]
  if isinstance(padding, int): return [(padding, padding)] * 2
  return [tuple(p) for p in padding]


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV_CASES)
def test_conv2d_matches_loop_reference(stride, padding, dilation, groups, device):
  x = rng.standard_normal((2, 2, 6, 7)).astype(np.float32)
  w = rng.standard_normal((4, 2 // groups, 3, 2)).astype(np.float32)
  b = rng.standard_normal(4).astype(np.float32)
  pair = lambda v: (v, v) if isinstance(v, int) else v
  pads = resolve_padding(padding, (6, 7), (3, 2), pair(stride), pair(dilation))
  want = np_conv2d(x, w, b, pair(stride), pads, pair(dilation), groups)
  got = F.conv2d(arr(x), arr(w), arr(b), stride=stride, padding=padding, dilation=dilation, groups=groups)
  assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_conv2d_unbatched_and_errors():
  x, w = rng.standard_normal((2, 4, 4)), rng.standard_normal((3, 2, 2, 2))
  assert_close(F.conv2d(arr(x), arr(w)), np_conv2d(x[None], w, None, (1, 1), [(0, 0)] * 2, (1, 1), 1)[0])
  with pytest.raises(ValueError, match="groups=2"):
    F.conv2d(arr(x), arr(w), groups=2)
  with pytest.raises(ValueError, match="smaller than the dilated kernel"):
    F.conv2d(arr(x), arr(w), dilation=4)
  with pytest.raises(ValueError, match="padding must be 'SAME' or 'VALID'"):
    F.conv2d(arr(x), arr(w), padding="FULL")


def np_pool(x, k, stride, pads, dilation, reduce, fill):
  xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]), constant_values=fill)
  (kh, kw), (sh, sw), (dh, dw) = k, stride, dilation
  oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
  ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
  out = np.zeros(x.shape[:2] + (oh, ow), x.dtype)
  for i in range(oh):
    for j in range(ow):
      out[:, :, i, j] = reduce(xp[(slice(None), slice(None)) + window(i, j, stride, dilation, k)])
  return out


POOL_CASES = [  # kernel, stride, padding, dilation
  (2, None, 0, 1),
  (3, 2, 1, 1),
  ((2, 3), (1, 2), ((1, 0), (0, 2)), (2, 1)),
  (3, 2, "SAME", 1),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation", POOL_CASES)
def test_pooling_matches_loop_reference(kernel, stride, padding, dilation, device):
  x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
  pair = lambda v: (v, v) if isinstance(v, int) else v
  k, s, d = pair(kernel), pair(stride if stride is not None else kernel), pair(dilation)
  pads = resolve_padding(padding, (5, 6), k, s, d)
  want = np_pool(x, k, s, pads, d, lambda p: p.max((-2, -1)), -np.inf)
  assert_close(F.max_pool2d(arr(x), kernel, stride, padding, dilation), want)
  if dilation != 1: return
  window_sum = np_pool(x, k, s, pads, d, lambda p: p.sum((-2, -1)), 0.0)
  assert_close(F.avg_pool2d(arr(x), kernel, stride, padding), window_sum / (k[0] * k[1]),
               rtol=1e-5, atol=1e-6)
  counts = np_pool(np.ones_like(x), k, s, pads, d, lambda p: p.sum((-2, -1)), 0.0)
  assert_close(F.avg_pool2d(arr(x), kernel, stride, padding, count_include_pad=False), window_sum / counts,
               rtol=1e-5, atol=1e-6)


def test_max_pool_of_integers_pads_with_the_lowest_value():
  x = -rng.integers(1, 9, (1, 1, 3, 3)).astype(np.int32)
  lowest = np.iinfo(np.int32).min
  want = np_pool(x, (2, 2), (2, 2), [(1, 0), (1, 0)], (1, 1), lambda p: p.max((-2, -1)), lowest)
  assert_close(F.max_pool2d(arr(x), 2, padding=((1, 0), (1, 0))), want)


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV_CASES)
def test_conv2d_gradients_match_finite_differences(stride, padding, dilation, groups):
  x = rng.standard_normal((2, 2, 6, 7))
  w = rng.standard_normal((4, 2 // groups, 3, 2))
  b = rng.standard_normal(4)
  conv = lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
  check_grads(conv, [arr(x), arr(w), arr(b)], order=1)
  check_grads(lambda x, w: F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups),
              [arr(x[0]), arr(w)], order=1, modes=("rev",))  # one unbatched example


def _executed(kernels, ops):
  """How many of `ops` the kernels that reduce execute (per lane), each counted once per trip of the loops
  around it. (Copies, such as the small one of the rearranged kernel, are left out.)"""
  n = 0
  for k in kernels:
    if not any(u.op is Ops.DEFINE_ACC for u in k.linear): continue
    trips = [1]
    for u in k.linear:
      if u.op is Ops.RANGE: trips.append(trips[-1] * u.src[0].arg)
      elif u.op is Ops.ENDRANGE: trips.pop()
      elif u.op in ops and (u.op is not Ops.MUL or u.dtype.is_float): n += trips[-1] * u.dtype.count
  return n


def test_strided_conv2d_input_gradient_is_a_convolution_without_index_division():
  """The input gradient of a stride-2 convolution is itself a convolution (forward-style reads), not the
  transpose of the window gather, whose reductions divided and took remainders for almost every multiply;
  and each phase of the input's positions multiplies only its own taps (no zeros of a dilated cotangent
  or of unused taps): exactly one multiply per (cotangent element, weight) pair."""
  x = arr(rng.standard_normal((4, 8, 8, 8)).astype(np.float32))
  w = arr(rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
  ct = arr(rng.standard_normal((4, 16, 4, 4)).astype(np.float32))
  dx = tgfn.jit(lambda x, w, ct: tgfn.vjp(lambda a: F.conv2d(a, w, stride=2, padding=1), x)[1](ct)[0])
  kernels = dx.lower(x, w, ct).kernels
  products, divisions = _executed(kernels, (Ops.MUL,)), _executed(kernels, (Ops.IDIV, Ops.MOD))
  assert divisions < 0.02 * products, f"{divisions} integer divisions and remainders for {products} multiplies"
  assert products <= 4 * 16 * 4 * 4 * 8 * 3 * 3, products
  want = tgfn.vjp(lambda a: F.conv2d(a, w, stride=2, padding=1), x)[1](ct)[0]
  assert_close(dx(x, w, ct), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_conv_and_pool_under_jit_and_vmap():
  x = rng.standard_normal((2, 2, 5, 5)).astype(np.float32)
  w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
  conv = lambda x, w: F.conv2d(x, w, stride=2, padding=1)
  pool = lambda x: F.max_pool2d(x, 2, padding=1)
  jconv, jpool = tgfn.jit(conv), tgfn.jit(pool)
  for _ in range(2):  # the second call replays the compiled graph
    assert_close(jconv(arr(x), arr(w)), np.asarray(conv(arr(x), arr(w))), rtol=1e-6)
    assert_close(jpool(arr(x)), np.asarray(pool(arr(x))))
  assert jconv.trace_count == 1 and jpool.trace_count == 1
  per_example = tgfn.vmap(lambda xi: conv(xi, arr(w)))(arr(x))
  assert_close(per_example, np.stack([np.asarray(conv(arr(xi), arr(w))) for xi in x]), rtol=1e-5, atol=1e-6)


# ---- attention
def np_attention(q, k, v, mask=None, causal=False):
  s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
  if causal: s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
  if mask is not None: s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
  return np_softmax(s) @ v


def test_scaled_dot_product_attention(device):
  q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
  mask = rng.random((3, 5)) > 0.3
  mask[:, 0] = True  # no fully masked rows in the comparison with -inf
  attend = lambda *a, **kw: F.scaled_dot_product_attention(arr(q), arr(k), arr(v), *a, **kw)
  close = lambda got, want: assert_close(got, want, rtol=1e-5, atol=1e-6)
  close(attend(), np_attention(q, k, v))
  close(attend(arr(mask)), np_attention(q, k, v, mask))
  bias = rng.standard_normal((3, 5)).astype(np.float32)
  close(attend(arr(bias)), np_attention(q, k, v, bias))
  close(attend(is_causal=True), np_attention(q, k, v, causal=True))
  # a fully masked row averages the values uniformly instead of giving NaN
  close(attend(arr(np.zeros((3, 5), bool))), np.broadcast_to(v.mean(-2, keepdims=True), (2, 3, 6)))


# ---- dropout
def test_dropout_identity_paths_need_no_key():
  x = arr(X)
  assert F.dropout(x, 0.5, training=False) is x
  assert_close(F.dropout(arr(X), 0.0), X)
  assert_close(F.dropout(arr(X), 1.0), np.zeros_like(X))
  with pytest.raises(ValueError, match="needs a PRNG key"):
    F.dropout(arr(X), 0.5)
  with pytest.raises(ValueError, match="rate must be in"):
    F.dropout(arr(X), 1.5, training=False)


def test_dropout_masks_and_rescales():
  x = np.ones((40, 50), np.float32)
  got = np.asarray(F.dropout(arr(x), 0.25, tgfn.random.key(0)))
  assert set(np.unique(got)) <= {0.0, np.float32(1 / 0.75)}
  assert abs((got == 0).mean() - 0.25) < 0.05
  assert_close(F.dropout(arr(x), 0.25, tgfn.random.key(0)), got)  # the key decides the mask
  assert not np.array_equal(np.asarray(F.dropout(arr(x), 0.25, tgfn.random.key(1))), got)


# ---- derivatives: order 1, both modes, float64
W64 = rng.standard_normal((2, 2, 2, 2))
IMG64 = rng.standard_normal((1, 2, 4, 4))
GRAD_CASES = {
  "relu": (F.relu, (X64,)),
  "gelu_tanh": (F.gelu, (X64,)),
  "gelu_exact": (lambda x: F.gelu(x, approximate=False), (X64,)),
  "silu": (F.silu, (X64,)),
  "sigmoid": (F.sigmoid, (X64,)),
  "softmax": (F.softmax, (X64,)),
  "log_softmax": (lambda x: F.log_softmax(x, 0), (X64,)),
  "logsumexp": (lambda x: F.logsumexp(x, -1), (X64,)),
  "cross_entropy_labels": (lambda x: F.cross_entropy(x, tnp.array([0, 2]), label_smoothing=0.1), (X64,)),
  "cross_entropy_probs": (F.cross_entropy, (X64, np_softmax(X64[::-1]))),
  "mse_loss": (F.mse_loss, (X64, X64[::-1].copy())),
  "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2)),
             (IMG64, W64, X64[0, :2])),
  "conv2d_groups": (lambda x, w: F.conv2d(x, w, padding="SAME", groups=2), (IMG64, W64[:, :1])),
  "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, padding=1), (IMG64,)),
  "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, 1, padding=1, count_include_pad=False), (IMG64,)),
  "attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                (X64, X64[::-1].copy(), X64)),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_check_grads(name):
  f, args = GRAD_CASES[name]
  check_grads(f, tuple(arr(a) for a in args), order=1)


def test_check_grads_dropout():
  key = tgfn.random.key(0)
  check_grads(lambda x: F.dropout(x, 0.5, key), (arr(X64),), order=1)
