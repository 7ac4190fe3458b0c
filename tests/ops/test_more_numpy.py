"""The tgfn.numpy breadth functions that the op table (tests/op_registry.py) cannot describe: sorting's
two algorithms and its transforms, searchsorted, quantiles, data-dependent sizes (nonzero, argwhere,
unique, one-argument where) with and without `size=`, take / take_along_axis, and the small array
helpers, each against NumPy. Runs on CPU."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.ops import sorting
from tgfn.test_util import check_grads
from tgfn.transforms.trace import ConcretizationError


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: Any) -> None:
  monkeypatch.setenv("DEV", "CPU")


# ---- sorting
def _values_with_ties_and_specials(rng: np.random.Generator, shape: tuple) -> np.ndarray:
  x = rng.integers(-2, 3, shape).astype(np.float32)
  x.flat[0], x.flat[1], x.flat[-1] = np.nan, np.inf, -0.0
  return x


def test_the_network_sorts_like_the_rank_count(monkeypatch: Any) -> None:
  """The bitonic network (used beyond RANK_MAX entries) on a length that is not a power of two,
  with ties, NaN, inf and -0.0: same values and stable order as NumPy."""
  x = _values_with_ties_and_specials(np.random.default_rng(0), (2, 6))
  monkeypatch.setattr(sorting, "RANK_MAX", 1)
  assert_close(tnp.sort(tnp.array(x), axis=1), np.sort(x, axis=1))
  assert_close(tnp.argsort(tnp.array(x), axis=1), np.lexsort((~np.signbit(x), x), axis=1).astype(np.int32))
  assert_close(tnp.argsort(tnp.array(np.array([3, 1, 3, 2, 1], np.int64)), descending=True),
               np.array([0, 2, 3, 1, 4], np.int32))


def test_descending_is_stable_and_puts_nan_first() -> None:
  x = np.array([1.0, np.nan, 3.0, 1.0, 3.0], np.float32)
  assert_close(tnp.argsort(tnp.array(x), descending=True), np.array([1, 2, 4, 0, 3], np.int32))
  assert_close(tnp.sort(tnp.array(x), descending=True), np.array([np.nan, 3, 3, 1, 1], np.float32))


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_a_nan_with_its_sign_bit_set_sorts_last(device: str, network: bool, dtype: Any, monkeypatch: Any) -> None:
  """-nan's bits order below -inf as integers: the keys treat every NaN as one (JAX and NumPy: last)."""
  monkeypatch.setenv("DEV", device)
  if network: monkeypatch.setattr(sorting, "RANK_MAX", 1)
  x = np.array([1, -np.nan, -np.inf, 0], dtype)
  assert np.signbit(x[1])
  np.testing.assert_array_equal(tnp.sort(tnp.array(x)).numpy(), np.array([-np.inf, 0, 1, np.nan], dtype))
  np.testing.assert_array_equal(tnp.argsort(tnp.array(x)).numpy(), [2, 3, 0, 1])
  np.testing.assert_array_equal(tnp.argsort(tnp.array(x), descending=True).numpy(), [1, 0, 3, 2])
  rows = np.array([[1, -np.nan, -np.inf, 0], [np.nan, -1, -np.nan, 2]], dtype)
  for axis, data in ((1, rows), (0, rows.T)):
    np.testing.assert_array_equal(tnp.sort(tnp.array(data), axis=axis).numpy(), np.sort(data, axis=axis))
    np.testing.assert_array_equal(tnp.argsort(tnp.array(data), axis=axis).numpy(),
                                  np.argsort(data, axis=axis, kind="stable"))


def test_sort_transforms() -> None:
  rng = np.random.default_rng(1)
  x = rng.permutation(12).reshape(3, 4) * 0.5  # distinct values: the derivative is a permutation
  check_grads(lambda v: tnp.sort(v, axis=0), [tnp.array(x)], order=2)
  # the gradient is the cotangent gathered back through the permutation (JAX's rule)
  ct = rng.normal(size=(4,))
  order = np.argsort(x[0])
  want = np.zeros(4)
  want[order] = ct
  assert_close(tgfn.vjp(tnp.sort, tnp.array(x[0]))[1](tnp.array(ct))[0], want)
  batch = _values_with_ties_and_specials(rng, (3, 5))
  assert_close(tgfn.vmap(tnp.argsort)(tnp.array(batch)), np.stack([np.asarray(tnp.argsort(r)) for r in batch]))
  assert_close(tgfn.jit(tnp.sort)(tnp.array(batch)), np.sort(batch, axis=-1))


def test_sort_axis_none_and_errors() -> None:
  x = np.array([[3, 1], [2, 0]], np.int8)
  assert_close(tnp.sort(tnp.array(x), axis=None), np.sort(x, axis=None))
  assert_close(tnp.argsort(tnp.array(x), axis=None), np.argsort(x, axis=None, kind="stable").astype(np.int32))
  with pytest.raises(ValueError, match="0-d"):
    tnp.sort(tnp.array(3.0), axis=0)
  with pytest.raises(NotImplementedError, match="order"):
    tnp.sort(tnp.array(x), order="f")


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side: str) -> None:
  a = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
  v = np.array([[0.0, 2.0, 2.5], [3.0, np.nan, 9.0]], np.float32)
  assert_close(tnp.searchsorted(tnp.array(a), tnp.array(v), side=side),
               np.searchsorted(a, v, side=side).astype(np.int32))
  unsorted = np.array([3, 1, 2])
  assert_close(tnp.searchsorted(tnp.array(unsorted), tnp.array([2, 0]), side=side, sorter=tnp.array([1, 2, 0])),
               np.searchsorted(unsorted, [2, 0], side=side, sorter=[1, 2, 0]).astype(np.int32))
  with pytest.raises(ValueError, match="side"):
    tnp.searchsorted(tnp.array(a), 1.0, side="middle")


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_methods(method: str) -> None:
  x = np.random.default_rng(2).normal(size=(4, 7)).astype(np.float32)
  q = np.array([0.0, 0.1, 0.5, 0.77, 1.0])
  assert_close(tnp.quantile(tnp.array(x), q, axis=1, method=method),
               np.quantile(x, q, axis=1, method=method).astype(np.float32), 1e-6, 1e-6)
  assert_close(tnp.percentile(tnp.array(x), 30.0, axis=(0, 1), method=method, keepdims=True),
               np.percentile(x, 30.0, axis=(0, 1), method=method, keepdims=True).astype(np.float32), 1e-6, 1e-6)


def test_quantile_nan_traced_q_and_grad() -> None:
  x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
  assert_close(tnp.median(tnp.array(x), axis=1), np.array([np.nan, 5.0], np.float32))
  f = tgfn.jit(lambda v, q: tnp.quantile(v, q, axis=1))
  assert_close(f(tnp.array(x[1:]), tnp.array(0.25)), np.quantile(x[1:], 0.25, axis=1).astype(np.float32))
  check_grads(lambda v: tnp.quantile(v, 0.3), [tnp.array(np.array([0.4, -1.0, 2.0, 0.1]))], order=1)


# ---- data-dependent sizes
def test_nonzero_argwhere_where_eager() -> None:
  x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]], np.float32)
  for got, want in zip(tnp.nonzero(tnp.array(x)), np.nonzero(x)): assert_close(got, want.astype(np.int32))
  for got, want in zip(tnp.where(tnp.array(x)), np.nonzero(x)): assert_close(got, want.astype(np.int32))
  assert_close(tnp.argwhere(tnp.array(x)), np.argwhere(x).astype(np.int32))
  assert_close(tnp.flatnonzero(tnp.array(x)), np.flatnonzero(x).astype(np.int32))
  assert_close(tnp.count_nonzero(tnp.array(x), axis=0), np.count_nonzero(x, axis=0).astype(np.int32))
  with pytest.raises(ValueError, match="both x and y"):
    tnp.where(tnp.array(x), 1.0)


def test_nonzero_with_size_under_jit_and_vmap() -> None:
  x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]], np.float32)
  rows, cols = tgfn.jit(lambda v: tnp.nonzero(v, size=5, fill_value=-1))(tnp.array(x))
  assert_close(rows, np.array([0, 1, 1, -1, -1], np.int32))
  assert_close(cols, np.array([1, 0, 2, -1, -1], np.int32))
  assert_close(tnp.argwhere(tnp.array(x), size=2), np.argwhere(x)[:2].astype(np.int32))  # extra ones dropped
  per_row = tgfn.vmap(lambda r: tnp.flatnonzero(r, size=2))(tnp.array(x))
  assert_close(per_row, np.array([[1, 0], [0, 2]], np.int32))
  with pytest.raises(ConcretizationError):
    tgfn.jit(lambda v: tnp.nonzero(v))(tnp.array(x))


def test_unique() -> None:
  u = np.array([3, 1, 3, np.nan, 2, np.nan, 1], np.float32)
  values, index, inverse, counts = tnp.unique(tnp.array(u), return_index=True, return_inverse=True,
                                              return_counts=True)
  want = np.unique(u, return_index=True, return_inverse=True, return_counts=True)
  for got, ref in zip((values, index, inverse, counts), want): assert_close(got, ref.astype(np.asarray(got).dtype))
  f = tgfn.jit(lambda v: tnp.unique(v, size=6, fill_value=-7.0, return_counts=True))
  values, counts = f(tnp.array(u))
  assert_close(values, np.array([1, 2, 3, np.nan, -7, -7], np.float32))
  assert_close(counts, np.array([2, 1, 2, 2, 0, 0], np.int32))
  assert_close(tnp.unique(tnp.array([2, 2, 5]), size=3), np.array([2, 5, 2], np.int32))  # default fill: the minimum


# ---- take
def test_take_and_take_along_axis() -> None:
  a = np.arange(12.0).reshape(3, 4)
  idx = np.array([[0, 3], [-1, 2]])
  assert_close(tnp.take(tnp.array(a), tnp.array(idx), axis=1), np.take(a, idx, axis=1))
  assert_close(tnp.take(tnp.array(a), tnp.array([13, 2])), np.array([np.nan, 2.0]))  # JAX's default: fill
  assert_close(tnp.take(tnp.array(a), tnp.array([13, 2]), mode="clip"), np.take(a, [13, 2], mode="clip"))
  ii = np.array([[1, 0, 3], [2, 2, 0], [0, 0, 0]])
  assert_close(tnp.take_along_axis(tnp.array(a), tnp.array(ii), axis=1), np.take_along_axis(a, ii, axis=1))
  col = np.array([[2, 0, 1, 1]])
  assert_close(tnp.take_along_axis(tnp.array(a), tnp.array(col), axis=0), np.take_along_axis(a, col, axis=0))
  assert_close(tnp.take_along_axis(tnp.array(a), tnp.array([[5], [0], [-1]]), axis=1),
               np.array([[np.nan], [4.0], [11.0]]))
  check_grads(lambda v: tnp.take_along_axis(v, tnp.array(ii), axis=1), [tnp.array(a)], order=1)


# ---- small helpers
def test_array_helpers_match_numpy() -> None:
  a = np.arange(1.0, 13.0).reshape(3, 4) ** 2
  assert_close(tnp.diff(tnp.array(a)), np.diff(a))
  assert_close(tnp.diff(tnp.array(a), n=2, axis=0), np.diff(a, n=2, axis=0))
  assert_close(tnp.diff(tnp.array([1.0, 2.0, 4.0]), prepend=0.0, append=[7.0]),
               np.diff([1.0, 2.0, 4.0], prepend=0.0, append=[7.0]).astype(np.float32))
  assert_close(tnp.diff(tnp.array([True, False, False])), np.diff([True, False, False]))
  for k in (-1, 0, 2):
    assert_close(tnp.triu(tnp.array(a), k), np.triu(a, k))
    assert_close(tnp.tril(tnp.array(a), k), np.tril(a, k))
  for indexing in ("xy", "ij"):
    for got, want in zip(tnp.meshgrid(tnp.arange(3), tnp.arange(2), tnp.arange(4), indexing=indexing),
                         np.meshgrid(np.arange(3), np.arange(2), np.arange(4), indexing=indexing)):
      assert_close(got, want.astype(np.int32))
  assert_close(tnp.dstack([tnp.array([1, 2]), tnp.array([3, 4])]), np.dstack([[1, 2], [3, 4]]).astype(np.int32))
  assert_close(tnp.column_stack([tnp.array([1, 2]), tnp.array([[3], [4]])]),
               np.column_stack([[1, 2], [[3], [4]]]).astype(np.int32))
  for shape in ((), (2,), (2, 3), (1, 2, 3)):
    assert tnp.atleast_3d(tnp.zeros(shape)).shape == np.atleast_3d(np.zeros(shape)).shape
  assert_close(tnp.cumulative_sum(tnp.array([1, 2, 3]), include_initial=True), np.array([0, 1, 3, 6], np.int32))
  assert_close(tnp.cumulative_prod(tnp.array([[1, 2], [3, 4]]), axis=0, include_initial=True),
               np.array([[1, 1], [1, 2], [3, 8]], np.int32))


def test_isclose_edges() -> None:
  a = np.array([0.0, 1.0, np.inf, np.inf, np.nan, 1e10, 1.0], np.float32)
  b = np.array([-0.0, 1.0 + 1e-6, np.inf, -np.inf, np.nan, 1.00001e10, np.inf], np.float32)
  assert_close(tnp.isclose(tnp.array(a), tnp.array(b)), np.isclose(a, b))
  assert_close(tnp.isclose(tnp.array(a), tnp.array(b), equal_nan=True), np.isclose(a, b, equal_nan=True))
  assert_close(tnp.isclose(tnp.array([1, 5]), tnp.array([2, 5]), atol=1), np.array([True, True]))
  assert bool(tnp.allclose(tnp.array([1.0, 2.0]), tnp.array([1.0, 2.0 + 1e-9])))
  assert not bool(tnp.allclose(tnp.array([1.0, np.nan]), tnp.array([1.0, np.nan])))
