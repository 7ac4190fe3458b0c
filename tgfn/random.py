"""Functional pseudo-random numbers on the Threefry-2x32 counter-based generator, shaped like `jax.random`.

A key is a uint32 array of shape (2,), JAX's raw key format. Every function takes a key and returns
numbers determined by it alone: the same key always gives the same numbers, and `split` and `fold_in`
derive new, statistically independent keys. There is no hidden state, so the functions trace under
`jit` (a new key of the same shape reuses the compiled code) and batch under `vmap` (a batch of keys
gives one stream per key).

The generator is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011), written with tgfn's uint32 ops, so it is lazy and fuses into the kernels that
consume the numbers. The streams follow JAX's scheme bit for bit: `key`, `split`, `fold_in`, `bits`,
`uniform`, `bernoulli`, `randint` and `permutation` are exact integer and bit arithmetic; `normal`,
`truncated_normal`, `gumbel` and `categorical` (float32, float16, bfloat16) evaluate the same
polynomial approximations as XLA's CPU backend, in the same order, with its fused multiply-adds
emulated exactly, so they agree with `jax.random` on CPU to the last bit as well. float64 results
follow JAX's algorithms but not XLA's rounding, and may differ from JAX (with x64) in the last bits.

JAX's scheme changed in JAX 0.5, which made `jax_threefry_partitionable=True` the default: each
element's bits come from hashing its own index. That is the default here too; call
`set_threefry_partitionable(False)` for the numbers of the older scheme (JAX < 0.5, or JAX with the
flag off). The setting is read when a function is traced: set it before the first call of a `jit`.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Optional, Sequence, Union

import numpy as np

import tgfn.numpy as tnp
from tgfn.array import Array, as_array, broadcast_shapes
from tgfn.device import has_64bit
from tgfn.dtype import DType, dtypes, to_dtype
from tgfn.transforms.trace import is_traced
from tgfn.uop.ops import Ops, UOp

__all__ = ["key", "PRNGKey", "key_data", "split", "fold_in", "threefry_2x32", "bits", "uniform", "normal",
           "bernoulli", "randint", "gumbel", "categorical", "permutation", "truncated_normal",
           "set_threefry_partitionable"]

Shape = Union[int, Sequence[int]]
_UINT = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}
_MASK32 = 0xFFFFFFFF
_partitionable = True


def set_threefry_partitionable(enabled: bool) -> bool:
  """Choose JAX's bit-generation scheme: partitionable (True, the default, as in JAX >= 0.5) or the
  original one (False, as JAX < 0.5). Returns the previous setting. Keys and `fold_in` are the same
  in both; `split`, `bits` and everything drawn from them differ."""
  global _partitionable
  previous, _partitionable = _partitionable, bool(enabled)
  return previous


# ---- Threefry-2x32
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Random123's rotation constants for 2x32
_PARITY = 0x1BD11BDA  # the key schedule's third word is k0 ^ k1 ^ this constant (Threefish)


def _rotl(x: Array, r: int) -> Array: return (x << r) | (x >> (32 - r))


def _threefry(k0: Array, k1: Array, x0: Any, x1: Any) -> tuple[Array, Array]:
  """Threefry-2x32, 20 rounds, of the counter words (x0, x1) under the key words (k0, k1); all uint32,
  broadcast together. Five groups of four rounds, a key injection after each."""
  ks = (k0, k1, k0 ^ k1 ^ _PARITY)
  x0, x1 = ks[0] + x0, ks[1] + x1
  for group in range(5):
    for r in _ROTATIONS[group % 2]:
      x0 = x0 + x1
      x1 = _rotl(x1, r) ^ x0
    x0 = x0 + ks[(group + 1) % 3]
    x1 = x1 + (ks[(group + 2) % 3] + (group + 1))
  return x0, x1


def threefry_2x32(key: Any, count: Any) -> Array:
  """Threefry-2x32 of a uint32 `count` array under `key`, as `jax.extend.random.threefry_2x32`: the
  counts are flattened (a zero appended if their number is odd), the first half hashed paired with the
  second half, and the two output words laid out the same way. Returns uint32 of `count`'s shape."""
  k0, k1 = _key_words(_single_key("threefry_2x32", key))
  count = as_array(count)
  if count.dtype is not dtypes.uint32:
    raise TypeError(f"threefry_2x32: count must be uint32, got {count.dtype.name}")
  flat, n = count.reshape(-1), count.size
  if n % 2: flat = tnp.concatenate([flat, Array.const(0, dtypes.uint32, (1,))])
  half = flat.size // 2
  y0, y1 = _threefry(k0, k1, flat[:half], flat[half:])
  return tnp.concatenate([y0, y1])[:n].reshape(count.shape)


def _iota(shape: tuple[int, ...], device: str) -> Array:
  """The row-major linear index of every element of `shape`, as uint32, built lazily from one short
  arange per axis (a materialized iota would cost a buffer as large as the output)."""
  out, stride = Array.const(0, dtypes.uint32, shape), 1
  for axis in reversed(range(len(shape))):
    n = shape[axis]
    if n > 1:
      column = Array.from_data(np.arange(n, dtype=np.uint32) * np.uint32(stride), device=device)
      out = out + column._reshape(tuple(n if i == axis else 1 for i in range(len(shape))))
    stride *= n
  return out


def _random_bits(key: Array, width: int, shape: tuple[int, ...]) -> Array:
  """`width`-bit unsigned random integers of `shape` (JAX's random_bits, in the active scheme)."""
  k0, k1 = _key_words(key)
  size = math.prod(shape)
  if size >= 1 << 32: raise ValueError(f"random bits of shape {shape}: at most 2**32 - 1 elements")
  if _partitionable:  # each element hashes its own index: counter words (0, i)
    y0, y1 = _threefry(k0, k1, 0, _iota(shape, key.device))
    if width == 64: return (y0.astype(dtypes.uint64) << 32) | y1.astype(dtypes.uint64)
    return (y0 ^ y1).astype(_UINT[width])
  words = math.ceil(width * size / 32)
  stream = threefry_2x32(key, _iota((words,), key.device))
  if width == 32: return stream.reshape(shape)
  if width == 64:  # the first half of the stream gives the high words, the second half the low words
    return ((stream[:size].astype(dtypes.uint64) << 32) | stream[size:].astype(dtypes.uint64)).reshape(shape)
  # 8 and 16 bits: the stream's bytes in little-endian order, as a view of the uint32 words would give
  per_word = 32 // width
  shifts = Array.from_data(np.arange(per_word, dtype=np.uint32) * np.uint32(width), device=key.device)
  parts = (stream._reshape((words, 1)) >> shifts._reshape((1, per_word))) & ((1 << width) - 1)
  return parts.reshape(-1)[:size].astype(_UINT[width]).reshape(shape)


# ---- keys
def _eager(x: Array) -> Array:
  """Compute a new key now unless it is traced: chains of split/fold_in would otherwise grow into ever
  deeper graphs that every consumer recompiles and recomputes. Inside jit and vmap keys stay lazy."""
  return x if is_traced(x.uop) else x.realize()


def _key_array(fn: str, key: Any) -> Array:
  """`key` as an Array after checking that it holds keys: uint32 with a last axis of 2."""
  expected = f"{fn} expects a PRNG key (a uint32 array of shape (2,), e.g. tgfn.random.key(0))"
  if not isinstance(key, (Array, np.ndarray)) and not hasattr(key, "__array__"):
    raise TypeError(f"{expected}, got {type(key).__name__}")
  key = as_array(key)
  if key.dtype is not dtypes.uint32 or not key.shape or key.shape[-1] != 2:
    raise TypeError(f"{expected}, got an array of dtype {key.dtype.name} and shape {key.shape}")
  return key


def _single_key(fn: str, key: Any) -> Array:
  key = _key_array(fn, key)
  if key.shape != (2,):
    raise ValueError(f"{fn} accepts a single key, but was given a key array of shape {key.shape}; "
                     "use tgfn.vmap to map over a batch of keys")
  return key


def _key_words(key: Array) -> tuple[Array, Array]: return key[0], key[1]


def _is_int(x: Any) -> bool:
  return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def key(seed: Any) -> Array:
  """A PRNG key from an integer seed: uint32 of shape (2,), [seed >> 32, seed & 0xFFFFFFFF] as JAX
  builds it (a seed of 32 bits or fewer gives [0, seed mod 2**32]). The seed may be a Python int,
  a NumPy integer, or a tgfn integer array of shape () (traced seeds work under jit and vmap).
  Python ints beyond int32 and 64-bit NumPy integers are 64-bit seeds, as in JAX with x64 enabled."""
  if isinstance(seed, Array):
    if not seed.dtype.is_int or seed.shape != ():
      raise TypeError(f"key: the seed must be an integer scalar, got an array of dtype {seed.dtype.name} "
                      f"and shape {seed.shape}; use tgfn.vmap to make a batch of keys")
    high = ((seed.astype(dtypes.uint64) >> 32).astype(dtypes.uint32) if seed.dtype.itemsize == 8
            else Array.const(0, dtypes.uint32))
    return _eager(tnp.stack([high, seed.astype(dtypes.uint32)]))
  if not _is_int(seed):
    raise TypeError(f"key: the seed must be an integer, got {type(seed).__name__} {seed!r}")
  value = int(seed)
  if not -2 ** 63 <= value < 2 ** 64: raise OverflowError(f"key: seed {value} does not fit in 64 bits")
  wide = seed.dtype.itemsize == 8 if isinstance(seed, np.integer) else not -2 ** 31 <= value < 2 ** 31
  value &= 2 ** 64 - 1
  return Array.from_data(np.array([value >> 32 if wide else 0, value & _MASK32], np.uint32))


PRNGKey = key


def key_data(keys: Any) -> Array:
  """The raw uint32 data of a key or a batch of keys (shape (..., 2)); keys are raw data already."""
  return _key_array("key_data", keys)


def _shape_arg(fn: str, shape: Any) -> tuple[int, ...]:
  try:
    dims = tuple(map(operator.index, shape if isinstance(shape, (tuple, list)) else (shape,)))
  except TypeError:
    raise TypeError(f"{fn}: shape must be an int or a sequence of ints, got {shape!r}") from None
  if any(d < 0 for d in dims): raise ValueError(f"{fn}: shape must not have negative dimensions, got {dims}")
  return dims


def split(key: Any, num: Shape = 2) -> Array:
  """`num` new keys from `key` (an int, or a shape): uint32 of shape (num, 2) (or shape + (2,))."""
  key = _single_key("split", key)
  k0, k1 = _key_words(key)
  shape = _shape_arg("split", num)
  if _partitionable:  # key i is Threefry of the counter (0, i): the same key as fold_in(key, i)
    first_word = Array.from_data(np.array([True, False]), device=key.device)
    y0, y1 = _threefry(k0, k1, 0, _iota(shape, key.device)._reshape(shape + (1,)))
    return _eager(tnp.where(first_word, y0, y1))
  stream = threefry_2x32(key, _iota((2 * math.prod(shape),), key.device))
  return _eager(stream.reshape(shape + (2,)))


def fold_in(key: Any, data: Any) -> Array:
  """A new key from `key` and an integer `data` (a Python int in [0, 2**32), or an integer array of
  shape (), cast to uint32): Threefry of the counter (0, data). Different data give independent keys."""
  k0, k1 = _key_words(_single_key("fold_in", key))
  if isinstance(data, (Array, np.ndarray)):
    data = as_array(data)
    if not data.dtype.is_int or data.shape != ():
      raise TypeError(f"fold_in: data must be an integer scalar, got an array of dtype {data.dtype.name} "
                      f"and shape {data.shape}; use tgfn.vmap for batching")
    word = data.astype(dtypes.uint32)
  elif _is_int(data):
    if not 0 <= int(data) <= _MASK32:
      raise OverflowError(f"fold_in: data {int(data)} is out of range for uint32")
    word = Array.const(int(data), dtypes.uint32)
  else:
    raise TypeError(f"fold_in: data must be an integer, got {type(data).__name__} {data!r}")
  y0, y1 = _threefry(k0, k1, 0, word)
  return _eager(tnp.stack([y0, y1]))


# ---- integers
def bits(key: Any, shape: Shape = (), dtype: Any = dtypes.uint32) -> Array:
  """Uniformly random bits: an unsigned integer array (uint8, uint16, uint32 or uint64) of `shape`."""
  dt = to_dtype(dtype)
  if not dt.is_unsigned: raise ValueError(f"bits: dtype must be an unsigned int dtype, got {dt.name}")
  return _random_bits(_single_key("bits", key), dt.bits, _shape_arg("bits", shape))


def _check_shape(fn: str, shape: tuple[int, ...], *param_shapes: tuple[int, ...]) -> None:
  try:
    ok = broadcast_shapes(shape, *param_shapes) == shape
  except ValueError:
    ok = False
  if not ok:
    raise ValueError(f"{fn}: the shapes of its parameters {', '.join(map(str, param_shapes))} must "
                     f"broadcast to the requested shape {shape}")


def _urem(a: Array, b: Array) -> Array:
  """Unsigned remainder with XLA's convention a % 0 = a (tgfn's own x % 0 is 0); randint relies on it."""
  return tnp.where(b == 0, a, a % tnp.where(b == 0, 1, b))


def _clip_to(fn: str, value: Any, dtype: DType) -> tuple[Array, Array]:
  """`value` (an int or integer array; floats are truncated) clipped into `dtype`'s range and cast, and
  where it was above that range."""
  if _is_int(value):
    v = int(value)
    if not -2 ** 63 <= v < 2 ** 64: raise OverflowError(f"{fn}: bound {v} does not fit in 64 bits")
    wide = as_array(np.asarray(v, np.uint64 if v >= 2 ** 63 else np.int64))
  else:
    wide = as_array(value)
    if wide.dtype.is_bool: raise TypeError(f"{fn}: bounds must be numbers, got a bool array")
    wide = wide.astype(dtypes.uint64 if wide.dtype is dtypes.uint64 else dtypes.int64)
  hi = min(dtype.max, wide.dtype.max)
  return tnp.clip(wide, max(dtype.min, wide.dtype.min), hi).astype(dtype), wide > hi


def randint(key: Any, shape: Shape, minval: Any, maxval: Any, dtype: Any = dtypes.int32) -> Array:
  """Integers uniform in [minval, maxval) of an integer `dtype`, as JAX: bounds are clipped into the
  dtype's range (maxval one past the range is allowed, e.g. 256 for uint8); where maxval <= minval the
  result is minval. Two words of random bits per element keep the modulo bias small; types narrower
  than 32 bits are drawn as int32 and cast, as JAX does to reduce the bias further."""
  key = _single_key("randint", key)
  shape = _shape_arg("randint", shape)
  dt = to_dtype(dtype)
  if not dt.is_int: raise TypeError(f"randint only accepts integer dtypes, got {dt.name}")
  _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
  if dt.bits < 32:
    lo = tnp.clip(_clip_to("randint", minval, dtypes.int32)[0], dt.min, dt.max)
    hi = tnp.clip(_clip_to("randint", maxval, dtypes.int32)[0], dt.min, dt.max + 1)
    return _randint(key, shape, lo, hi, dtypes.int32).astype(dt)
  return _randint(key, shape, minval, maxval, dt)


def _randint(key: Array, shape: tuple[int, ...], minval: Any, maxval: Any, dt: DType) -> Array:
  lo, _ = _clip_to("randint", minval, dt)
  hi, hi_over = _clip_to("randint", maxval, dt)
  lo, hi, hi_over = (x._broadcast_to(broadcast_shapes(x.shape, shape)) for x in (lo, hi, hi_over))
  k1, k2 = split(key)
  higher, lower = _random_bits(k1, dt.bits, shape), _random_bits(k2, dt.bits, shape)
  udt = _UINT[dt.bits]
  span = (hi - lo).astype(udt)
  span = tnp.where(hi <= lo, Array.const(1, udt), span)
  span = tnp.where(hi_over & (hi > lo), span + 1, span)  # 2**bits wraps to 0: then % keeps every value
  # (higher * 2**bits + lower) % span without overflow: 2**bits % span is the square of 2**(bits/2) % span
  multiplier = _urem(Array.const(1 << (dt.bits // 2), udt), span)
  multiplier = _urem(multiplier * multiplier, span)
  offset = _urem(_urem(higher, span) * multiplier + _urem(lower, span), span)
  return lo + offset.astype(dt)


# ---- floats: XLA's CPU arithmetic, reproduced
def _f32(x: float) -> float: return float(np.float32(x))
def _bitcast(x: Array, dtype: DType) -> Array: return Array(UOp(Ops.BITCAST, dtype, (x.uop,)))


def _fma32(a: Any, b: Any, c: Any) -> Array:
  """a * b + c for float32 with a single rounding, as the FMA instructions XLA's CPU code uses. In
  float64 the product is exact; the sum is rounded to odd (an inexact result gets an odd last bit, by
  stepping toward the exact value), which makes the final rounding to float32 correct (Boldo-Melquiond).
  A device without float64 (WEBGPU) rounds the product and the sum each: an exact emulation in float32
  alone takes about 30 operations, and SwiftShader did not finish compiling normal's kernel with them in
  five minutes."""
  a, b, c = (as_array(v, dtypes.float32) for v in (a, b, c))
  if not has_64bit(a.device): return a * b + c
  a, b, c = (v.astype(dtypes.float64) for v in (a, b, c))
  p = a * b
  s = p + c
  # TwoSum: the exact rounding error of s = p + c
  c_part = s - p
  err = (p - (s - c_part)) + (c - c_part)
  word = _bitcast(s, dtypes.uint64)
  to_odd = (err != 0) & ((word & 1) == 0) & tnp.isfinite(s)
  one, minus_one = Array.const(1, dtypes.uint64), Array.const(2 ** 64 - 1, dtypes.uint64)
  step = tnp.where((err > 0) == (s > 0), one, minus_one)  # away from zero if the exact sum is further out
  return _bitcast(tnp.where(to_odd, word + step, word), dtypes.float64).astype(dtypes.float32)


def _poly_fma(x: Array, coefficients: Sequence[float]) -> Array:
  """Horner's scheme with a fused multiply-add per step: ((c0 * x + c1) * x + c2) ..."""
  out = _fma32(x, coefficients[0], coefficients[1])
  for c in coefficients[2:]: out = _fma32(out, x, c)
  return out


def _f32s(*values: float) -> list[float]: return [_f32(v) for v in values]


# XLA's float32 log (the Cephes polynomial, evaluated in three interleaved parts)
_LOG_P = [_f32s(7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1),
          _f32s(-1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1),
          _f32s(2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)]
_LOG_Q1, _LOG_Q2 = _f32(-2.12194440e-4), _f32(0.693359375)  # ln 2 in two parts
_FLT_MIN = float(np.finfo(np.float32).tiny)


def _log_f32(x: Array) -> Array:
  """Natural log of float32 `x` as XLA's CPU backend computes it: x = m * 2**e with m in [sqrt(1/2),
  sqrt(2)), log(m) by a degree-8 polynomial in m - 1, and e * ln 2 added in two parts."""
  safe = tnp.maximum(x, _FLT_MIN)  # (denormals are treated as the smallest normal, as XLA does)
  word = _bitcast(safe, dtypes.uint32)
  e = ((word >> 23).astype(dtypes.int32) - 127).astype(dtypes.float32) + 1.0
  m = _bitcast((word & 0x807FFFFF) | 0x3F000000, dtypes.float32)  # in [0.5, 1)
  small = m < _f32(math.sqrt(0.5))
  t = (m - 1.0) + tnp.where(small, m, 0.0)
  e = e - tnp.where(small, 1.0, 0.0)
  t2 = t * t
  t3 = t2 * t
  a, b, c = (_poly_fma(t, part) for part in _LOG_P)
  poly = _fma32(_fma32(_fma32(a, t3, b), t3, c), t3, e * _LOG_Q1)
  out = _fma32(e, _LOG_Q2, (t - t2 * 0.5) + poly)
  out = tnp.where(x > 0, out, float("nan"))
  out = tnp.where(x == float("inf"), float("inf"), out)
  return tnp.where(x == 0, float("-inf"), out)


# XLA's log1p for |x| < sqrt(2) - 1: a Cephes rational function, x - x**2/2 + x**3 * P(x) / Q(x)
_LOG1P_P = _f32s(4.5270000862445199635215e-5, 4.9854102823193375972212e-1, 6.5787325942061044846969,
                 2.9911919328553073277375e1, 6.0949667980987787057556e1, 5.7112963590585538103336e1,
                 2.0039553499201281259648e1)
_LOG1P_Q = _f32s(1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1, 2.2176239823732856465394e2,
                 3.0909872225312059774938e2, 2.1642788614495947685003e2, 6.0118660497603843919306e1)


def _log1p_f32(x: Array) -> Array:
  x2 = x * x
  ratio = _poly_fma(x, _LOG1P_P) / _poly_fma(x, _LOG1P_Q)
  near_zero = x + ((x * x2) * ratio - x2 * 0.5)
  return tnp.where(tnp.abs(x) < _f32(math.sqrt(2.0) - 1.0), near_zero, _log_f32(x + 1.0))


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision: w < 5, w >= 5
_ERFINV_CENTRAL = _f32s(2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                        -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = _f32s(-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfinv_f32(x: Array) -> Array:
  """Inverse error function of float32 `x` in [-1, 1] (Giles' approximation, as XLA evaluates it)."""
  lg = _log1p_f32(-(x * x))  # -w, w = -log(1 - x**2)
  central = lg > -5.0
  w = tnp.where(central, -2.5 - lg, tnp.sqrt(-lg) - 3.0)
  coef = [tnp.where(central, c, t) for c, t in zip(_ERFINV_CENTRAL, _ERFINV_TAIL)]
  p = _fma32(coef[0], w, coef[1])
  for c in coef[2:]: p = _fma32(w, p, c)
  return x * tnp.where(tnp.abs(x) == 1.0, float("inf"), p)


# Giles' double-precision erfinv: for w < 6.25, w < 16 and w >= 16 a polynomial in w - 3.125,
# sqrt(w) - 3.25 and sqrt(w) - 5 respectively. Entries: (upper bound of w, in sqrt(w)?, shift, coefficients)
_ERFINV64 = (
  (6.25, False, 3.125, (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)),
  (16.0, True, 3.25, (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)),
  (math.inf, True, 5.0, (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)),
)


def _erfinv_f64(x: Array) -> Array:
  w = -tnp.log1p(-(x * x))
  out = None
  for bound, of_sqrt, shift, coefficients in reversed(_ERFINV64):
    z = (tnp.sqrt(w) if of_sqrt else w) - shift
    p = Array.const(coefficients[0], dtypes.float64, x.shape)
    for c in coefficients[1:]: p = p * z + c
    out = p if out is None else tnp.where(w < bound, p, out)
  return x * tnp.where(tnp.abs(x) == 1.0, float("inf"), out)


def _erfinv(x: Array) -> Array:
  """erfinv in x's dtype; half types are computed in float32 and rounded once, as XLA does."""
  if x.dtype is dtypes.float64: return _erfinv_f64(x)
  return _erfinv_f32(x.astype(dtypes.float32)).astype(x.dtype)


def _log(x: Array) -> Array:
  if x.dtype is dtypes.float64: return tnp.log(x)
  return _log_f32(x.astype(dtypes.float32)).astype(x.dtype)


# XLA's float32 erf inside a fusion: x * P(x**2) / Q(x**2) on x clamped to +-3.7439213, +-1 beyond
_ERF_LIMIT = _f32(3.7439212799072266)
_ERF_P = _f32s(2.2905065861350646e-4, 3.4082910107109506e-3, 5.0955695062380861e-2, 1.8520832239976145e-1,
               1.1283791435190840)
_ERF_Q = _f32s(-1.1791602954361697e-7, 2.3547966471313185e-5, 1.0179625278914885e-3, 1.4070470171167667e-2,
               1.1098505178285362e-1, 4.9746925110067538e-1, 1.0)


def _erf_f32(x: Array) -> Array:
  c = tnp.minimum(tnp.maximum(x, -_ERF_LIMIT), _ERF_LIMIT)
  c2 = c * c
  ratio = (c * _poly_fma(c2, _ERF_P)) / _poly_fma(c2, _ERF_Q)
  return tnp.where(tnp.abs(x) >= _ERF_LIMIT, tnp.where(x < 0, -1.0, 1.0), ratio)


# ---- floats
_MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
_ONE_BITS = {"float16": 0x3C00, "bfloat16": 0x3F80, "float32": 0x3F800000, "float64": 0x3FF0000000000000}


def _float_dtype(fn: str, dtype: Any) -> DType:
  dt = to_dtype(dtype)
  if not dt.is_float: raise ValueError(f"{fn}: dtype must be a float dtype, got {dt.name}")
  return dt


def _unit_floats(key: Array, shape: tuple[int, ...], dt: DType) -> Array:
  """Uniform floats in [0, 1): random mantissa bits under the exponent of 1.0, minus 1."""
  mantissa = _MANTISSA[dt.name]
  width = 8 if mantissa < 8 else dt.bits  # bfloat16's 7 mantissa bits come from one random byte
  raw = _random_bits(key, width, shape).astype(_UINT[dt.bits])
  return _bitcast((raw >> (width - mantissa)) | _ONE_BITS[dt.name], dt) - 1.0


def _scale(floats: Array, minval: Any, maxval: Any) -> Array:
  """max(minval, floats * (maxval - minval) + minval), the multiply-add fused for float32 as XLA does."""
  dt = floats.dtype
  lo, hi = as_array(minval, dt), as_array(maxval, dt)
  if dt is dtypes.float32 and not _exact_product(minval, maxval): out = _fma32(floats, hi - lo, lo)
  else: out = floats * (hi - lo) + lo
  return tnp.maximum(lo, out)


def _exact_product(minval: Any, maxval: Any) -> bool:
  """Whether the bounds are Python numbers whose float32 span is a power of two (the default [0, 1),
  normal's (-1, 1)): then floats * span is exact, and fusing the multiply-add changes nothing."""
  if not all(isinstance(v, (int, float)) for v in (minval, maxval)): return False
  with np.errstate(over="ignore", invalid="ignore"):
    span = float(np.float32(maxval) - np.float32(minval))
  return 2.0 ** -60 <= span <= 2.0 ** 60 and math.frexp(span)[0] == 0.5


def uniform(key: Any, shape: Shape = (), dtype: Any = dtypes.float32, minval: Any = 0.0,
            maxval: Any = 1.0) -> Array:
  """Floats uniform in [minval, maxval) of `shape` and float `dtype`; the bounds (floats or arrays)
  broadcast to `shape`. They are not checked: where minval >= maxval the result is minval, as in JAX."""
  key = _single_key("uniform", key)
  shape = _shape_arg("uniform", shape)
  dt = _float_dtype("uniform", dtype)
  _check_shape("uniform", shape, np.shape(minval), np.shape(maxval))
  return _scale(_unit_floats(key, shape, dt), minval, maxval)._broadcast_to(shape)


def normal(key: Any, shape: Shape = (), dtype: Any = dtypes.float32) -> Array:
  """Standard normal floats of `shape`: sqrt(2) * erfinv(u) for u uniform in (-1, 1), as JAX."""
  key = _single_key("normal", key)
  shape = _shape_arg("normal", shape)
  dt = _float_dtype("normal", dtype)
  above_minus_one = -1.0 + 2.0 ** -(_MANTISSA[dt.name] + 1)  # the next float after -1, toward 0
  u = _scale(_unit_floats(key, shape, dt), above_minus_one, 1.0)
  return _erfinv(u) * math.sqrt(2.0)


def bernoulli(key: Any, p: Any = 0.5, shape: Optional[Shape] = None) -> Array:
  """Booleans that are True with probability `p` (a float or float array; it broadcasts to `shape`,
  which defaults to p's shape): uniform(key, shape, p's dtype) < p."""
  key = _single_key("bernoulli", key)
  p = as_array(p)
  if not p.dtype.is_float:
    raise TypeError(f"bernoulli: the probability p must have a float dtype, got {p.dtype.name}")
  shape = p.shape if shape is None else _shape_arg("bernoulli", shape)
  _check_shape("bernoulli", shape, p.shape)
  return uniform(key, shape, p.dtype) < p


def gumbel(key: Any, shape: Shape = (), dtype: Any = dtypes.float32) -> Array:
  """Standard Gumbel floats of `shape`: -log(-log(u)) for u uniform in [tiny, 1), as JAX."""
  key = _single_key("gumbel", key)
  shape = _shape_arg("gumbel", shape)
  dt = _float_dtype("gumbel", dtype)
  tiny = float(np.finfo(np.float32 if dt is dtypes.bfloat16 else dt.np).tiny)
  # JAX draws u = max(tiny, floats * (1 - tiny) + tiny); with constant bounds XLA drops the product by
  # 1.0 and folds `+ tiny` into the `- 1.0` that made `floats`, where it vanishes (for float16 too)
  u = tnp.maximum(_unit_floats(key, shape, dt), tiny)
  return -_log(-_log(u))


def categorical(key: Any, logits: Any, axis: int = -1, shape: Optional[Shape] = None) -> Array:
  """Indices (int32) drawn with probabilities softmax(logits) along `axis`, by the Gumbel-max trick:
  argmax(logits + gumbel noise). The result has logits' shape without `axis` (the batch shape), or
  `shape`, which must end with the batch shape; leading extra axes draw independent samples."""
  key = _single_key("categorical", key)
  logits = as_array(logits)
  if not logits.dtype.is_float:
    raise TypeError(f"categorical: logits must be floats, got {logits.dtype.name}")
  if not -logits.ndim <= axis < logits.ndim:
    raise ValueError(f"categorical: axis {axis} is out of range for logits of shape {logits.shape}")
  axis %= logits.ndim
  batch = logits.shape[:axis] + logits.shape[axis + 1:]
  shape = batch if shape is None else _shape_arg("categorical", shape)
  _check_shape("categorical", shape, batch)
  prefix = shape[:len(shape) - len(batch)]
  noise = gumbel(key, prefix + logits.shape, logits.dtype)
  return tnp.argmax(noise + logits._reshape((1,) * len(prefix) + logits.shape), axis=len(prefix) + axis)


def _ranks(sort_keys: Array) -> Array:
  """The position each element of the last axis takes in a stable ascending sort of `sort_keys`:
  the number of smaller keys, plus equal keys before it. O(n**2) comparisons, fused into one kernel."""
  n = sort_keys.shape[-1]
  mine, other = sort_keys[..., :, None], sort_keys[..., None, :]
  before = Array.from_data(np.tri(n, k=-1, dtype=bool), device=sort_keys.device)  # [i, j]: j < i
  return tnp.sum((other < mine) | ((other == mine) & before), axis=-1)


def _take_last(x: Array, hit: Array) -> Array:
  """out[..., r] = x[..., i] for the one i with hit[..., r, i], along the last axis; exact for every dtype
  (floats move as their bit patterns, so -0.0 and NaN payloads survive the sum of one-hot terms)."""
  if x.dtype.is_float:
    word = _UINT[x.dtype.bits]
    return _bitcast(_take_last(_bitcast(x, word), hit), x.dtype)
  return tnp.sum(tnp.where(hit, x[..., None, :], Array.const(0, x.dtype)), axis=-1).astype(x.dtype)


def _arange(n: int, device: str) -> Array:
  return Array.from_data(np.arange(n, dtype=np.int32), device=device)


def _shuffle(key: Array, x: Array, axis: int) -> Array:
  """Sort `x` along `axis` by random 32-bit keys drawn for all of x, as JAX does: as many rounds (each
  with fresh keys) as make ties unlikely to bias the result, one round up to ~1600 elements."""
  rounds = math.ceil(3 * math.log(max(1, x.size)) / math.log(_MASK32))
  for _ in range(rounds):
    key, subkey = split(key)
    ranks = _ranks(tnp.moveaxis(_random_bits(subkey, 32, x.shape), axis, -1))
    hit = ranks[..., None, :] == _arange(x.shape[axis], x.device)[:, None]  # [..., r, i]: i goes to r
    x = tnp.moveaxis(_take_last(tnp.moveaxis(x, axis, -1), hit), -1, axis)
  return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Array:
  """A random permutation of `range(x)` (int32) for an int `x`, or of `x`'s entries along `axis` (with
  `independent=True`, each slice along the other axes gets its own permutation). The same key gives
  JAX's permutation. Cost: O(n**2) comparisons for n entries along the axis."""
  key = _single_key("permutation", key)
  if _is_int(x):
    if x < 0: raise ValueError(f"permutation: x must be non-negative, got {x}")
    return _shuffle(key, _arange(int(x), key.device), 0)
  x = as_array(x)
  if x.ndim == 0: raise TypeError("permutation: x must be an integer or an array with at least one axis")
  if not -x.ndim <= axis < x.ndim:
    raise ValueError(f"permutation: axis {axis} is out of range for shape {x.shape}")
  axis %= x.ndim
  if independent or x.ndim == 1: return _shuffle(key, x, axis)
  n = x.shape[axis]
  order = _shuffle(key, _arange(n, key.device), 0)  # out[..., r, ...] = x[..., order[r], ...]
  picked = _take_last(tnp.moveaxis(x, axis, -1), order[:, None] == _arange(n, key.device))
  return tnp.moveaxis(picked, -1, axis)


def _next_after(x: Array, up: bool) -> Array:
  """nextafter(x, +inf) if `up`, else nextafter(x, -inf), on the bit pattern of the float array `x`."""
  word = _UINT[x.dtype.bits]
  pattern = _bitcast(x, word)
  away = (x > 0) if up else (x < 0)  # away from zero the pattern grows by one, toward zero it shrinks
  stepped = _bitcast(tnp.where(away, pattern + 1, pattern - 1), x.dtype)
  tiniest = _bitcast(Array.const(1 if up else (1 << (x.dtype.bits - 1)) | 1, word, x.shape), x.dtype)
  out = tnp.where(x == 0, tiniest, stepped)
  return tnp.where(tnp.isnan(x) | (x == (float("inf") if up else float("-inf"))), x, out)


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Optional[Shape] = None,
                     dtype: Any = dtypes.float32) -> Array:
  """Normal floats restricted to (lower, upper), by the inverse CDF: sqrt(2) * erfinv(u) for u uniform
  between erf(lower / sqrt 2) and erf(upper / sqrt 2), clamped into the open interval. `shape` defaults
  to the broadcast of lower's and upper's shapes, as in JAX. Bounds are not checked: lower >= upper
  gives values at the bounds. float32, float16 and bfloat16 (the erf is float32; float64 raises)."""
  key = _single_key("truncated_normal", key)
  dt = _float_dtype("truncated_normal", dtype)
  if dt is dtypes.float64:
    raise NotImplementedError("truncated_normal: float64 is not supported (there is no float64 erf)")
  lower, upper = as_array(lower, dt), as_array(upper, dt)
  shape = (broadcast_shapes(lower.shape, upper.shape) if shape is None
           else _shape_arg("truncated_normal", shape))
  _check_shape("truncated_normal", shape, lower.shape, upper.shape)
  inv_sqrt2 = _f32(1.0 / _f32(math.sqrt(2.0)))  # XLA turns the division by sqrt(2) into this product
  a = _erf_f32(lower.astype(dtypes.float32) * inv_sqrt2).astype(dt)
  b = _erf_f32(upper.astype(dtypes.float32) * inv_sqrt2).astype(dt)
  out = _erfinv(_scale(_unit_floats(key, shape, dt), a, b)) * math.sqrt(2.0)
  # clamp into the open interval: rounding, or u landing on a, could otherwise reach a bound
  out = tnp.minimum(tnp.maximum(out, _next_after(lower, up=True)), _next_after(upper, up=False))
  return out._broadcast_to(shape)


# more distributions (they build on the samplers above)
from tgfn.random_dists import *  # noqa: E402,F401,F403
from tgfn.random_dists import __all__ as _more  # noqa: E402

__all__ += _more
