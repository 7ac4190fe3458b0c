"""Neural-network functions: activations, softmax family, losses, convolution, pooling, attention,
dropout. `import tgfn.nn.functional as F`; the same names are exported from `tgfn.nn`.

Everything here is a composition of `tgfn.numpy` functions, so `grad`, `jvp`, `vmap` and `jit` work
through it with no rules of their own. Conventions follow JAX where it and PyTorch differ on numerics
(`gelu` defaults to the tanh approximation; `softmax`, `log_softmax` and `logsumexp` subtract a
`stop_gradient`-ed max) and PyTorch for layouts and argument names (images are NCHW, conv weights
OIHW, `cross_entropy(logits, labels, reduction='mean', label_smoothing=0.0)`).

Convolution and pooling make no op of their own: the input is padded, the sliding windows are built
with movement ops only, and the windows are contracted with the weights (einsum) or reduced (max,
mean). Movement ops never make kernels, so a convolution is one fused kernel. `conv2d` is
`tgfn.lax.conv.conv_nchw`, shared with `lax.conv_general_dilated`, whose reverse-mode rule computes the
input's gradient as another convolution (as XLA does) instead of transposing the window gather.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Optional, Sequence, Union

import tgfn.numpy as tnp
from tgfn import random
from tgfn.array import Array, as_array
from tgfn.dtype import DType, dtypes, float_dtype
from tgfn.lax.conv import _window_axis, conv_nchw
from tgfn.ops.axes import normalize_axes, normalize_axis
from tgfn.ops.shape import _promoted
from tgfn.transforms.api import stop_gradient

__all__ = ["relu", "gelu", "silu", "sigmoid", "softmax", "log_softmax", "logsumexp", "one_hot",
           "cross_entropy", "mse_loss", "conv2d", "max_pool2d", "avg_pool2d",
           "scaled_dot_product_attention", "dropout"]

IntPair = Union[int, Sequence[int]]
Padding = Union[str, int, Sequence[Any]]
Axis = Union[None, int, Sequence[int]]


def _float(x: Any) -> Array:
  x = as_array(x)
  return x.astype(float_dtype(x.dtype))


# ---- activations
def relu(x: Any) -> Array:
  """max(x, 0). The derivative at 0 is 0, as in JAX; NaN propagates."""
  x = as_array(x)
  return tnp.where(x <= 0, tnp.zeros_like(x), x)


def sigmoid(x: Any) -> Array:
  """1 / (1 + exp(-x)), written with e = exp(-|x|) so that no exponential overflows: both the value and
  its derivative stay finite for any |x| (the naive form's derivative is inf/inf for x << 0)."""
  x = _float(x)
  e = tnp.exp(-tnp.abs(x))
  r = 1.0 / (1.0 + e)
  return tnp.where(x >= 0, r, e * r)


def silu(x: Any) -> Array:
  """x * sigmoid(x) (also called swish)."""
  x = _float(x)
  return x * sigmoid(x)


def _shallow_polyval(coeffs: Sequence[float], x: Array) -> Array:
  """sum(coeffs[i] * x**i), for two coefficients or more, by Estrin's scheme: neighbours pair up with
  x, then x^2, x^4, ..., so the graph is O(log n) deep where Horner's rule is O(n) deep. Depth
  matters: kernel lowering recurses over the graph (a chain of ~800 ops exceeds Python's recursion
  limit), and nested forward-mode derivatives multiply a chain's length."""
  terms: list[Any] = list(coeffs)
  power = x
  while len(terms) > 1:
    pairs = [terms[i] + terms[i + 1] * power for i in range(0, len(terms) - 1, 2)]
    terms = pairs + terms[len(terms) - len(terms) % 2:]
    power = power * power
  return terms[0]


_ERFC_SPLIT = 2.0  # erf's series below, Laplace's continued fraction above
# erf(a) = 2/sqrt(pi) * exp(-a^2) * sum_n (2a^2)^n / (1*3*...*(2n+1)) * a: positive terms, no
# cancellation; for a < 2, 30 terms reach 1e-16 of the sum
_ERF_SERIES = [2.0 ** n / math.prod(range(1, 2 * n + 2, 2)) for n in range(30)]


def _laplace_fraction(depth: int) -> tuple[list[float], list[float]]:
  """For a >= 2, erfc(a) = exp(-a^2) / sqrt(pi) / F(a) with Laplace's continued fraction
  F(a) = a + (1/2) / (a + (2/2) / (a + (3/2) / (a + ...))); 60 levels converge to 2e-16 at a = 2.
  The truncated fraction is N(a) / D(a), numerator and denominator of the convergent from the
  recurrence P_k = a P_(k-1) + (k/2) P_(k-2). Both have positive coefficients on every other power,
  so with u = 1/a^2, F(a) = a * N'(u) / D'(u) for polynomials N', D' in u with positive coefficients:
  no cancellation, and no overflow for large a. Returns the coefficients of (N', D'), lowest power
  first, computed exactly with fractions."""
  def recur(p: list[Fraction], p_prev: list[Fraction], k: int) -> list[Fraction]:
    out = [Fraction(0)] + p
    for i, c in enumerate(p_prev): out[i] += Fraction(k, 2) * c
    return out
  num_prev, num = [Fraction(1)], [Fraction(0), Fraction(1)]  # P_(-1) = 1 and P_0 = a
  den_prev, den = [Fraction(0)], [Fraction(1)]               # Q_(-1) = 0 and Q_0 = 1
  for k in range(1, depth + 1):
    num_prev, num = num, recur(num, num_prev, k)
    den_prev, den = den, recur(den, den_prev, k)
  # from the top degree down in steps of 2: a^(depth+1) N'(1/a^2) = N(a), a^depth D'(1/a^2) = D(a)
  return [float(c) for c in num[::-2]], [float(c) for c in den[::-2]]


_LAPLACE_NUM, _LAPLACE_DEN = _laplace_fraction(60)


def _erfc(z: Array) -> Array:
  """The complementary error function, computed in float64 and rounded to z's dtype; ~1e-13 relative
  error (the rounding of z^2 in exp(-z^2) sets the limit in the tail). |z| < 2: 1 - erf(|z|) from
  the series above (at most ~200x cancellation: erfc(2) = 0.0047). |z| >= 2: the continued
  fraction, which keeps full relative accuracy far into the tail. Negative z: 2 - erfc(-z).
  Derivatives are traced through these formulas, which are as accurate for them as for the value."""
  a = tnp.abs(z.astype(dtypes.float64))
  # each branch only sees its own range, so the branch `where` drops has finite derivatives too
  small = tnp.minimum(a, _ERFC_SPLIT)
  small2 = small * small
  series = _shallow_polyval(_ERF_SERIES, small2)
  erf_small = (2.0 / math.sqrt(math.pi)) * tnp.exp(-small2) * small * series
  big = tnp.maximum(a, _ERFC_SPLIT)
  u = 1.0 / (big * big)
  fraction = big * _shallow_polyval(_LAPLACE_NUM, u) / _shallow_polyval(_LAPLACE_DEN, u)
  erfc_big = tnp.exp(-big * big) / (math.sqrt(math.pi) * fraction)
  erfc_abs = tnp.where(a < _ERFC_SPLIT, 1.0 - erf_small, erfc_big)
  return tnp.where(z < 0, 2.0 - erfc_abs, erfc_abs).astype(z.dtype)


def gelu(x: Any, approximate: bool = True) -> Array:
  """The Gaussian error linear unit x * Phi(x), Phi the standard normal CDF. As `jax.nn.gelu`, the
  default is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); with
  approximate=False it is exact, x * erfc(-x / sqrt(2)) / 2 (PyTorch's default, approximate='none')."""
  x = _float(x)
  if approximate:
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
    return 0.5 * x * (1.0 + tnp.tanh(inner))
  return 0.5 * x * _erfc(-x * math.sqrt(0.5))


# ---- softmax family
def _max_for_shift(x: Array, axes: tuple[int, ...]) -> Array:
  """The max over `axes` (kept as size-1 axes), with no derivative: subtracting it only guards exp
  against overflow and does not change the result. Non-finite maxima become 0 so that rows that are
  all -inf (or contain +inf) give -inf/inf instead of NaN from inf - inf."""
  m = tnp.max(x, axes, keepdims=True)
  return stop_gradient(tnp.where(tnp.isfinite(m), m, tnp.zeros_like(m)))


def softmax(x: Any, axis: Axis = -1) -> Array:
  """exp(x) / sum(exp(x)) over `axis` (an int, a tuple, or None for all), computed as
  exp(x - max) / sum(exp(x - max)): three kernels (max, sum, normalize). An empty x gives an empty
  result, as in JAX."""
  x = _float(x)
  axes = normalize_axes(axis, x.ndim)
  if x.size == 0: return x  # (an empty axis: there is no max to subtract, and nothing to normalize)
  unnormalized = tnp.exp(x - stop_gradient(tnp.max(x, axes, keepdims=True)))
  return unnormalized / tnp.sum(unnormalized, axes, keepdims=True)


def log_softmax(x: Any, axis: Axis = -1) -> Array:
  """x - logsumexp(x) over `axis`, computed from the shifted x - max so no exp overflows. An empty x
  gives an empty result, as in JAX."""
  x = _float(x)
  axes = normalize_axes(axis, x.ndim)
  if x.size == 0: return x
  shifted = x - stop_gradient(tnp.max(x, axes, keepdims=True))
  return shifted - tnp.log(tnp.sum(tnp.exp(shifted), axes, keepdims=True))


def logsumexp(x: Any, axis: Axis = None, keepdims: bool = False) -> Array:
  """log(sum(exp(x))) over `axis` (None: every axis), stable for any magnitude: an all -inf slice
  gives -inf, a slice containing +inf gives +inf."""
  x = _float(x)
  axes = normalize_axes(axis, x.ndim)
  m = _max_for_shift(x, axes)
  out = tnp.log(tnp.sum(tnp.exp(x - m), axes, keepdims=True)) + m
  return out if keepdims else tnp.squeeze(out, axes)


def one_hot(x: Any, num_classes: int, dtype: Any = dtypes.float32, axis: int = -1) -> Array:
  """`x` (integers, any shape) encoded as one-hot vectors of length `num_classes` along a new `axis`
  of the result. As `jax.nn.one_hot`, values outside [0, num_classes) give all-zero vectors."""
  x = as_array(x)
  if not x.dtype.is_int and not x.dtype.is_bool:
    raise TypeError(f"one_hot: x must hold integer class indices, got dtype {x.dtype.name}")
  ax = normalize_axis(axis, x.ndim + 1)
  classes = tnp.arange(num_classes).reshape(tuple(num_classes if i == ax else 1 for i in range(x.ndim + 1)))
  return (tnp.expand_dims(x, ax) == classes).astype(dtype)


# ---- losses
_REDUCTIONS = ("mean", "sum", "none")


def _reduce_loss(loss: Array, reduction: str, name: str) -> Array:
  if reduction == "mean": return tnp.mean(loss)
  if reduction == "sum": return tnp.sum(loss)
  if reduction == "none": return loss
  raise ValueError(f"{name}: reduction must be one of {', '.join(map(repr, _REDUCTIONS))}, "
                   f"got {reduction!r}")


def cross_entropy(logits: Any, labels: Any, reduction: str = "mean", label_smoothing: float = 0.0,
                  axis: int = -1) -> Array:
  """Softmax cross-entropy between `logits` (classes along `axis`, by default the last) and `labels`.

  `labels` are either integer class indices, of the shape of `logits` without the class axis, or
  float target probabilities (one-hot or soft) of the shape of `logits`: the dtype decides, as in
  PyTorch. With `label_smoothing` = e the targets become (1 - e) * targets + e / num_classes.
  The per-example loss -sum(targets * log_softmax(logits)) is averaged ('mean', the default), summed
  ('sum') or returned as is ('none'; shape of `logits` without the class axis). Integer labels read
  their class's log-probability with a gather (no one-hot); a label outside [0, num_classes) is a
  one-hot row of zeros, as `one_hot`'s: its example's loss is only the smoothing term."""
  logits = _float(logits)
  labels = as_array(labels)
  ax = normalize_axis(axis, logits.ndim)
  num_classes = logits.shape[ax]
  log_probs = log_softmax(logits, ax)
  if labels.dtype.is_float:
    if labels.shape != logits.shape:
      raise ValueError(f"cross_entropy: probability targets must have the logits' shape {logits.shape}, "
                       f"got {labels.shape}")
    targets = labels.astype(logits.dtype)
    if label_smoothing:
      targets = targets * (1.0 - label_smoothing) + label_smoothing / num_classes
    return _reduce_loss(-tnp.sum(targets * log_probs, ax), reduction, "cross_entropy")
  batch_shape = logits.shape[:ax] + logits.shape[ax + 1:]
  if not labels.dtype.is_int or labels.shape != batch_shape:
    raise ValueError(f"cross_entropy: integer labels must have shape {batch_shape} (the logits' shape "
                     f"{logits.shape} without class axis {ax}), got {labels.dtype.name} {labels.shape}")
  known = (labels >= 0) & (labels < num_classes)
  index = tnp.expand_dims(tnp.where(known, labels, 0).astype(dtypes.int32), ax)
  picked = tnp.squeeze(tnp.take_along_axis(log_probs, index, ax, mode="clip"), ax)
  loss = tnp.where(known, -picked, 0.0).astype(logits.dtype)
  if label_smoothing:
    loss = loss * (1.0 - label_smoothing) - tnp.sum(log_probs, ax) * (label_smoothing / num_classes)
  return _reduce_loss(loss, reduction, "cross_entropy")


def mse_loss(prediction: Any, target: Any, reduction: str = "mean") -> Array:
  """(prediction - target)^2 elementwise (shapes broadcast), averaged by default ('sum', 'none')."""
  diff = _float(prediction) - _float(target)
  return _reduce_loss(diff * diff, reduction, "mse_loss")


# ---- sliding windows: convolution and pooling
def _pair(value: IntPair, name: str) -> tuple[int, int]:
  pair = (value, value) if isinstance(value, int) else tuple(value)
  if len(pair) != 2 or not all(isinstance(v, int) and v >= 1 for v in pair):
    raise ValueError(f"{name} must be a positive int or a pair of them, got {value!r}")
  return pair  # type: ignore[return-value]


def _padding(padding: Padding, sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
             dilation: Sequence[int], name: str) -> list[tuple[int, int]]:
  """(lo, hi) padding per spatial axis from: 'VALID' (none); 'SAME' (output size ceil(n / stride),
  the extra element of an odd total going after, as in JAX and TensorFlow); an int; one int per axis;
  or one (lo, hi) pair per axis."""
  if isinstance(padding, str):
    if padding.upper() == "VALID": return [(0, 0)] * len(sizes)
    if padding.upper() != "SAME":
      raise ValueError(f"{name}: padding must be 'SAME' or 'VALID', got {padding!r}")
    out = []
    for n, k, s, d in zip(sizes, kernel, stride, dilation):
      total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
      out.append((total // 2, total - total // 2))
    return out
  if isinstance(padding, int): padding = [padding] * len(sizes)
  pairs = [(p, p) if isinstance(p, int) else tuple(p) for p in padding]
  if len(pairs) != len(sizes) or any(len(p) != 2 or min(p) < 0 for p in pairs):
    raise ValueError(f"{name}: padding must be 'SAME', 'VALID', a non-negative int, one per spatial axis, "
                     f"or one (lo, hi) pair per spatial axis; got {padding!r}")
  return pairs  # type: ignore[return-value]


def _windows(x: Array, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]) -> Array:
  """(..., H, W) -> (..., OH, OW, KH, KW): the sliding windows over the last two axes."""
  nd = x.ndim
  x = _window_axis(x, nd - 2, kernel[0], stride[0], dilation[0])  # (..., OH, KH, W)
  x = _window_axis(x, nd, kernel[1], stride[1], dilation[1])      # (..., OH, KH, OW, KW)
  return tnp.swapaxes(x, nd - 1, nd)


def conv2d(x: Any, weight: Any, bias: Optional[Any] = None, stride: IntPair = 1, padding: Padding = 0,
           dilation: IntPair = 1, groups: int = 1) -> Array:
  """2-d cross-correlation, as PyTorch's `conv2d`.

  x: (N, C, H, W), or (C, H, W) for one unbatched example. weight: (O, C // groups, KH, KW). bias: (O,)
  or None. Result: (N, O, OH, OW) with OH = (H + pad_h - dilation_h (KH - 1) - 1) // stride_h + 1.
  stride and dilation: an int or a pair. padding: an int, a pair, a pair of (lo, hi) pairs, 'VALID',
  or 'SAME' (output size ceil(H / stride)). groups splits the C and O channels into that many
  independent convolutions (groups = C is a depthwise convolution). Zero padding."""
  x, weight = _float(x), _float(weight)
  if x.ndim == 3: return conv2d(x[None], weight, bias, stride, padding, dilation, groups)[0]
  if x.ndim != 4 or weight.ndim != 4:
    raise ValueError(f"conv2d: x must be (N, C, H, W) or (C, H, W) and weight (O, C // groups, KH, KW); "
                     f"got shapes {x.shape} and {weight.shape}")
  n, c, h, w = x.shape
  o, cg, kh, kw = weight.shape
  if c % groups or o % groups or cg != c // groups:
    raise ValueError(f"conv2d: with groups={groups}, x's {c} channels and weight's {o} output channels "
                     f"must divide by groups and weight.shape[1] must be {c // groups}; "
                     f"got weight {weight.shape}")
  stride, dilation = _pair(stride, "conv2d: stride"), _pair(dilation, "conv2d: dilation")
  pads = _padding(padding, (h, w), (kh, kw), stride, dilation, "conv2d")
  for (lo, hi), size, k, d in zip(pads, (h, w), (kh, kw), dilation):
    if size + lo + hi < d * (k - 1) + 1:
      raise ValueError(f"conv2d: the (padded) input size {size + lo + hi} is smaller than the dilated kernel size "
                       f"{d * (k - 1) + 1}")
  x, weight = _promoted([x, weight], None)
  out = conv_nchw(x, weight, stride, pads, (1, 1), dilation, groups)
  if bias is not None: out = out + _float(bias).reshape(o, 1, 1)
  return out


def _pool_setup(x: Any, kernel_size: IntPair, stride: Optional[IntPair], padding: Padding, dilation: IntPair,
                name: str) -> tuple[Array, tuple[int, int], tuple[int, int], tuple[int, int], list]:
  x = as_array(x)
  if x.ndim < 2: raise ValueError(f"{name}: x needs at least 2 (spatial) axes, got shape {x.shape}")
  kernel = _pair(kernel_size, f"{name}: kernel_size")
  strides = kernel if stride is None else _pair(stride, f"{name}: stride")
  dil = _pair(dilation, f"{name}: dilation")
  pads = _padding(padding, x.shape[-2:], kernel, strides, dil, name)
  return x, kernel, strides, dil, [(0, 0)] * (x.ndim - 2) + pads


def max_pool2d(x: Any, kernel_size: IntPair, stride: Optional[IntPair] = None, padding: Padding = 0,
               dilation: IntPair = 1) -> Array:
  """The max over each window of the last two axes: x is (..., H, W), typically (N, C, H, W).
  stride defaults to kernel_size; padding as in `conv2d`, with -inf (the dtype's lowest value for
  integers) so that padding never wins. Gradients flow to the maximum (split evenly between ties)."""
  x, kernel, strides, dil, pads = _pool_setup(x, kernel_size, stride, padding, dilation, "max_pool2d")
  x = tnp.pad(x, pads, constant_values=x.dtype.min)
  return tnp.max(_windows(x, kernel, strides, dil), (-2, -1))


def avg_pool2d(x: Any, kernel_size: IntPair, stride: Optional[IntPair] = None, padding: Padding = 0,
               count_include_pad: bool = True) -> Array:
  """The mean over each window of the last two axes: x is (..., H, W). stride defaults to kernel_size;
  zero padding as in `conv2d`. count_include_pad=True divides by the window size (PyTorch's default);
  False divides by the number of unpadded elements in each window."""
  x, kernel, strides, dil, pads = _pool_setup(_float(x), kernel_size, stride, padding, 1, "avg_pool2d")
  total = tnp.sum(_windows(tnp.pad(x, pads), kernel, strides, dil), (-2, -1))
  if count_include_pad: return total / float(kernel[0] * kernel[1])
  # a constant array of window counts: computed once, broadcast over the leading axes
  ones = tnp.pad(tnp.ones(x.shape[-2:], x.dtype), pads[-2:])
  return total / tnp.sum(_windows(ones, kernel, strides, dil), (-2, -1))


# ---- attention
def _large_negative(dtype: DType) -> float:
  """A finite stand-in for -inf in masked attention scores (as JAX): a row with every position masked
  then averages uniformly instead of giving NaN."""
  finite_max = {dtypes.float16: 65504.0, dtypes.bfloat16: 3.3895313892515355e38,
                dtypes.float32: 3.4028234663852886e38, dtypes.float64: 1.7976931348623157e308}[dtype]
  return -0.7 * finite_max


def scaled_dot_product_attention(query: Any, key: Any, value: Any, mask: Optional[Any] = None,
                                 is_causal: bool = False, scale: Optional[float] = None) -> Array:
  """softmax(query @ key^T * scale + masking) @ value over the last two axes.

  query: (..., L, E), key: (..., S, E), value: (..., S, Ev); leading axes broadcast (e.g. batch and
  heads). Result: (..., L, Ev). scale defaults to 1 / sqrt(E). mask, broadcastable to (..., L, S):
  bool (True = may attend, as PyTorch) or float (added to the scores). is_causal masks out key
  positions after the query position (the top-left aligned lower triangle, as PyTorch). Masked scores
  take a large finite negative value, so a fully masked row attends uniformly instead of giving NaN."""
  q, k, v = _float(query), _float(key), _float(value)
  scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
  scores = tnp.matmul(q, tnp.swapaxes(k, -1, -2)) * scale
  big_negative = tnp.full_like(scores, _large_negative(scores.dtype))
  if is_causal:
    L, S = scores.shape[-2:]
    allowed = tnp.arange(L).reshape(L, 1) >= tnp.arange(S).reshape(1, S)
    scores = tnp.where(allowed, scores, big_negative)
  if mask is not None:
    mask = as_array(mask)
    if mask.dtype.is_bool: scores = tnp.where(mask, scores, big_negative)
    else: scores = scores + mask.astype(scores.dtype)
  return tnp.matmul(softmax(scores, -1), v)


# ---- dropout
def dropout(x: Any, rate: float, key: Any = None, training: bool = True) -> Array:
  """Zero each element with probability `rate` and scale the rest by 1 / (1 - rate), so the expected
  value is unchanged. `key` is a `tgfn.random` PRNG key (required when training and 0 < rate); with
  training=False, or rate == 0, x is returned unchanged. rate == 1 gives zeros."""
  x = _float(x)
  if not 0.0 <= rate <= 1.0: raise ValueError(f"dropout: rate must be in [0, 1], got {rate}")
  if not training or rate == 0.0: return x
  if rate == 1.0: return tnp.zeros_like(x)
  if key is None: raise ValueError("dropout: training with rate > 0 needs a PRNG key (key=...)")
  keep = random.bernoulli(key, 1.0 - rate, x.shape)
  return tnp.where(keep, x / (1.0 - rate), tnp.zeros_like(x))
