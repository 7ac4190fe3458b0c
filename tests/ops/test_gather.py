"""GATHER, the data-dependent read behind `x[int_array]`, `take`, `take_along_axis`, embeddings and
integer-label cross-entropy: values against NumPy (wrapping once, then clamping or filling), on both
drivers; the clamp inside the kernel; grad, jvp, vmap and jit; and the work it does (no loop over the
table)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.nn as nn
import tgfn.nn.functional as F
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.array import Array
from tgfn.engine import realize as realize_mod
from tgfn.test_util import check_grads
from tgfn.uop.ops import Ops, toposort


def _gathers(a: Array) -> Array:
  """`a`, after checking it is computed by a real gather (no one-hot compare-and-sum)."""
  assert any(u.op is Ops.GATHER for u in toposort([a.uop])), "expected a GATHER in the graph"
  return a


def _wrap_clamp(i: np.ndarray, n: int) -> np.ndarray:
  """The documented read rule: a negative index wraps once, then it is clamped into [0, n)."""
  i = np.asarray(i, np.int64)
  return np.clip(np.where(i < 0, i + n, i), 0, n - 1)


def _data(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  if dtype is np.bool_: return rng.integers(0, 2, shape).astype(bool)
  if np.dtype(dtype).kind == "f": return rng.standard_normal(shape).astype(dtype)
  return rng.integers(-100, 100, shape).astype(dtype)


CASES = [  # (array shape, index shape, axis)
  ((7,), (5,), 0), ((7,), (2, 3), 0), ((4, 6), (9,), 0), ((4, 6), (3, 2), 1), ((3, 4, 5), (2,), 1),
  ((3, 4, 5), (4, 1), 2), ((5,), (0,), 0), ((0, 3), (4,), 1), ((6, 1), (3,), 0), ((2, 3), (), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16])
@pytest.mark.parametrize("shape,ishape,axis", CASES)
def test_integer_array_index_matches_numpy(device, dtype, shape, ishape, axis):
  a = _data(shape, dtype)
  n = shape[axis]
  i = np.random.default_rng(1).integers(-2 * n - 3, 2 * n + 3, ishape).astype(np.int32)  # some out of range
  got = _gathers(tnp.array(a)[(slice(None),) * axis + (tnp.array(i),)])
  want = np.take(a, _wrap_clamp(i, n), axis=axis)
  assert got.dtype == tnp.array(a).dtype
  assert_close(got, want)


@pytest.mark.parametrize("shape,ishape,axis", CASES)
def test_take_fills_and_clips_as_jax(device, shape, ishape, axis):
  a = _data(shape, np.float32)
  n = shape[axis]
  i = np.random.default_rng(2).integers(-2 * n - 3, 2 * n + 3, ishape).astype(np.int32)
  wrapped = np.where(i < 0, i + n, i)
  inside = (wrapped >= 0) & (wrapped < n)
  shape_out = shape[:axis] + i.shape + shape[axis + 1:]
  mask = np.broadcast_to(inside.reshape((1,) * axis + i.shape + (1,) * (len(shape) - axis - 1)), shape_out)
  want = np.where(mask, np.take(a, np.clip(wrapped, 0, max(n - 1, 0)), axis=axis) if n else 0, np.nan)
  assert_close(_gathers(tnp.take(a, i, axis=axis)) if n else tnp.take(a, i, axis=axis), want)
  assert_close(tnp.take(a, i, axis=axis, fill_value=-7.0), np.where(mask, want, -7.0))
  if n: assert_close(tnp.take(a, i, axis=axis, mode="clip"), np.take(a, _wrap_clamp(i, n), axis=axis))
  assert_close(tnp.take(a, np.arange(a.size)[::-1] - 1), np.where(np.arange(a.size)[::-1] - 1 < 0, a.ravel()[-1:], a.ravel()[np.arange(a.size)[::-1] - 1]))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_take_along_axis_matches_numpy(device, dtype):
  a = _data((4, 5, 6), dtype)
  for axis, ishape in ((0, (3, 5, 6)), (1, (4, 8, 1)), (2, (1, 5, 9)), (-1, (4, 5, 0))):
    n = a.shape[axis]
    i = np.random.default_rng(axis + 5).integers(-n, n, ishape).astype(np.int32)  # in range after wrapping
    want = np.take_along_axis(a, np.where(i < 0, i + n, i), axis)
    assert_close(_gathers(tnp.take_along_axis(a, i, axis)), want)
    far = i + 3 * n  # out of range: clamped with mode='clip', filled by default
    assert_close(tnp.take_along_axis(a, far, axis, mode="clip"), np.take_along_axis(a, _wrap_clamp(far, n), axis))
    if dtype is np.float32: assert np.isnan(tnp.take_along_axis(a, far, axis).numpy()).all()
  assert_close(tnp.take_along_axis(a, np.array([3, -1, 200]), None, mode="clip"), a.ravel()[[3, -1, -1]])
  with pytest.raises(ValueError, match="must have the array's rank"):
    tnp.take_along_axis(a, np.zeros((4, 5), np.int32), 1)
  with pytest.raises(TypeError, match="indices must be integers"):
    tnp.take(a, np.zeros(3, np.float32))


def test_the_kernel_clamps_any_index_value(device):
  """The primitive's own bounds: every index value, even the extremes of its dtype, reads inside x."""
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  for dtype in (np.int8, np.int32, np.int64, np.uint32):
    info = np.iinfo(dtype)
    raw = np.array([[info.min, info.max, 0, 2], [1, info.max, info.min, 5]], dtype)
    got = tnp.array(x)._gather(tnp.array(raw), 0)
    assert_close(got, x[np.clip(raw.astype(np.int64), 0, 2), np.arange(4)])
  with pytest.raises(TypeError, match="other than uint64"):
    tnp.array(x)._gather(tnp.array(np.zeros((1, 4), np.uint64)), 0)
  with pytest.raises(ValueError, match="except along that axis"):
    tnp.array(x)._gather(tnp.array(np.zeros((1, 3), np.int32)), 0)


def test_grad_and_jvp_against_finite_differences():
  x = np.random.default_rng(3).standard_normal((6, 4))
  rows = tnp.array(np.array([0, 5, -1, 9, 2, 2, -8]))
  check_grads(lambda x: x[rows] * x[rows], (x,), order=2)
  check_grads(lambda x: tnp.take_along_axis(x, tnp.array(np.array([[3, 0], [1, 1], [0, 2], [3, 3], [2, 0], [1, 3]])), 1),
              (x,), order=1)
  check_grads(lambda x: tnp.take(x, tnp.array(np.array([1, -1, 1])), axis=1).sum(0), (x,), order=1)
  # repeated and clamped rows accumulate their cotangents (the scatter-add)
  g = tgfn.grad(lambda x: x[rows].sum())(tnp.array(x))
  assert_close(g, np.bincount(_wrap_clamp(rows.numpy(), 6), minlength=6)[:, None] * np.ones((6, 4)))


def test_vmap_against_a_loop():
  table = np.random.default_rng(4).standard_normal((10, 3)).astype(np.float32)
  ids = np.random.default_rng(5).integers(-12, 12, (5, 4)).astype(np.int32)
  tables = np.random.default_rng(6).standard_normal((5, 10, 3)).astype(np.float32)
  lookup = lambda t, i: t[i]  # noqa: E731
  want_ids = np.stack([table[_wrap_clamp(i, 10)] for i in ids])
  assert_close(_gathers(tgfn.vmap(lambda i: lookup(tnp.array(table), i))(tnp.array(ids))), want_ids)
  assert_close(tgfn.vmap(lambda t: lookup(t, tnp.array(ids[0])))(tnp.array(tables)),
               np.stack([t[_wrap_clamp(ids[0], 10)] for t in tables]))
  assert_close(tgfn.vmap(lookup)(tnp.array(tables), tnp.array(ids)),
               np.stack([t[_wrap_clamp(i, 10)] for t, i in zip(tables, ids)]))
  assert_close(tgfn.vmap(tgfn.grad(lambda t, i: (lookup(t, i) ** 2).sum()))(tnp.array(tables), tnp.array(ids)),
               np.stack([tgfn.grad(lambda t: (lookup(t, tnp.array(i)) ** 2).sum())(tnp.array(t)).numpy()
                         for t, i in zip(tables, ids)]))


def test_jit_equals_eager():
  table = tnp.array(np.random.default_rng(7).standard_normal((20, 8)).astype(np.float32))
  ids = tnp.array(np.array([[0, 19, -1], [25, 3, 3]], np.int32))
  labels = tnp.array(np.array([1, 7, 0], np.int32))
  f = lambda t, i, y: (F.cross_entropy(t[i][0], y), tnp.take_along_axis(t[:, :2], i.T % 20, 0))  # noqa: E731
  for got, want in zip(tgfn.jit(f)(table, ids, labels), f(table, ids, labels)):
    assert_close(got, want)


def test_cross_entropy_and_embedding_gather():
  logits = np.random.default_rng(8).standard_normal((5, 7))
  labels = np.array([0, 6, 3, 3, 1], np.int32)
  assert any(u.op is Ops.GATHER for u in toposort([F.cross_entropy(tnp.array(logits), labels).uop]))
  log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  assert_close(F.cross_entropy(tnp.array(logits), labels, reduction="none"), -log_p[np.arange(5), labels])
  # an out-of-range label is a zero one-hot row: only the smoothing term is left
  odd = np.array([0, 7, -1, 3, 1], np.int32)
  want = np.where((odd >= 0) & (odd < 7), -log_p[np.arange(5), np.clip(odd, 0, 6)], 0) * 0.9 - log_p.mean(1) * 0.1
  assert_close(F.cross_entropy(tnp.array(logits), odd, reduction="none", label_smoothing=0.1), want)
  check_grads(lambda z: F.cross_entropy(z, labels, label_smoothing=0.2), (logits,), order=2)
  emb = nn.Embedding.init(tgfn.random.key(0), 11, 4)
  ids = np.array([[1, -1], [10, 50]])
  assert_close(_gathers(emb(ids)), emb.weight.numpy()[_wrap_clamp(ids, 11)])


def test_an_embedding_lookup_does_not_loop_over_the_table(monkeypatch):
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  table = tnp.zeros((50_000, 64))
  ids = tnp.array(np.array([0, 7, 49_999, -1, 12, 3, 3, 60_000], np.int32))
  (kernel,) = tgfn.jit(lambda t, i: t[i]).lower(table, ids).kernels
  sizes = [u.src[0].arg for u in kernel.linear if u.op is Ops.RANGE]
  assert sizes and max(sizes) <= 64, sizes  # loops over the 8 ids and the 64 features only
  assert kernel.flops <= 8 * 64  # at most one op per output (the id's wrap); a one-hot did 2 per table row
  # the table's load takes its position from a loaded id
  assert any(u.op is Ops.LOAD and any(s.op is Ops.LOAD for s in toposort([u.src[1]])) for u in kernel.linear)


@pytest.mark.parametrize("noopt", ["0", "1"])
def test_gathers_with_and_without_the_optimizer(monkeypatch, noopt):
  """On the CPU driver with the heuristic's opts (vector loads of a row, per-lane index loads, threads
  for a large output) and with NOOPT=1 (plain scalar loops)."""
  monkeypatch.setenv("NOOPT", noopt)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  rng = np.random.default_rng(9)
  table = rng.standard_normal((300, 64)).astype(np.float32)
  ids = rng.integers(-400, 400, (2048,)).astype(np.int32)
  assert_close(_gathers(tnp.array(table)[tnp.array(ids)]), table[_wrap_clamp(ids, 300)])
  flat = table.ravel()
  assert_close(tnp.array(flat)[tnp.array(ids)], flat[_wrap_clamp(ids, flat.size)])  # lanes across the ids
  i2 = rng.integers(0, 64, (300, 16)).astype(np.int64)
  assert_close(tnp.take_along_axis(table, i2, 1), np.take_along_axis(table, i2, 1))
  # a sum the float policy lets the kernel reassociate (vector lanes, partial sums): float32 rounding of 64 terms
  assert_close((tnp.array(table)[tnp.array(ids[:8])] * 2).sum(1), (table[_wrap_clamp(ids[:8], 300)] * 2).sum(1),
               rtol=1e-5, atol=2e-5)
