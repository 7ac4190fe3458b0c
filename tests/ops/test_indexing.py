"""Indexing `x[idx]` and functional updates `x.at[idx]` against NumPy: basic indices (ints, slices with
any step, None, Ellipsis), integer arrays with NumPy's placement rules, boolean masks, JAX's clamping
of out-of-range reads and dropping of out-of-range writes, the update kinds, dtypes and errors."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.schedule.schedule import create_schedule

DTYPES = [np.float32, np.int32, np.bool_, np.uint8]
KINDS = ["set", "add", "multiply", "min", "max"]

# the `device` fixture only sets the default device, so it is safe to share across a test's examples
examples = settings(suppress_health_check=[*settings.default.suppress_health_check,
                                           HealthCheck.function_scoped_fixture])


def raises(exc: type, text: str):
  return pytest.raises(exc, match=re.escape(text))


def data_for(shape: tuple[int, ...], dtype, seed: int) -> np.ndarray:
  """Small values every dtype holds exactly (so products and sums in any order agree)."""
  rng = np.random.default_rng(seed)
  if dtype is np.bool_: return rng.integers(0, 2, shape).astype(bool)
  if dtype is np.uint8: return rng.integers(0, 256, shape).astype(np.uint8)
  return rng.integers(-4, 5, shape).astype(dtype)


@st.composite
def shapes(draw, max_dims: int = 3) -> tuple[int, ...]:
  return tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=max_dims)))


@dataclass
class Expr:
  idx: tuple           # the index for tgfn (may hold tgfn Arrays)
  np_idx: tuple        # the same index for NumPy
  arrays: list         # (position in idx, size of the axis it indexes) for each integer array


@st.composite
def index_exprs(draw, shape: tuple[int, ...], arrays: bool = True, oob: bool = False) -> Expr:
  """A random index for `shape`: ints, slices (random start/stop/step, negative too), integer arrays
  (NumPy, list or tgfn; multi-dimensional, broadcast together; out of range when `oob`), None, `...`."""
  ndim = len(shape)
  used = draw(st.integers(0, ndim))
  ellipsis = draw(st.none() | st.integers(0, used))  # where `...` goes among the used items
  axes = list(range(used))
  if ellipsis is not None: axes = axes[:ellipsis] + list(range(ndim - used + ellipsis, ndim))
  batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
  idx, np_idx, found = [], [], []
  for axis in axes:
    n = shape[axis]
    kind = draw(st.sampled_from(["int", "slice", "array", "array"] if arrays else ["int", "slice"]))
    if kind == "int":
      item = np_item = draw(st.integers(-n, n - 1))
    elif kind == "slice":
      bound = st.none() | st.integers(-n - 2, n + 2)
      step = st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3])
      item = np_item = slice(draw(bound), draw(bound), draw(step))
    else:
      keep = draw(st.integers(0, len(batch)))
      sub = tuple(s if draw(st.booleans()) else 1 for s in batch[len(batch) - keep:])
      lo, hi = (-2 * n - 2, 2 * n + 1) if oob else (-n, n - 1)
      size = int(np.prod(sub))
      values = np.array(draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size)),
                        draw(st.sampled_from([np.int32, np.int64]))).reshape(sub)
      # a 0-d NumPy array or list is a static int to NumPy; out-of-range values would raise IndexError
      container = draw(st.sampled_from(["tgfn"] if oob and not sub else ["numpy", "list", "tgfn"]))
      item = {"numpy": values, "list": values.tolist(), "tgfn": tnp.array(values)}[container]
      np_item = values
      found.append((len(idx) + (ellipsis is not None and len(idx) >= ellipsis), n))
    idx.append(item)
    np_idx.append(np_item)
  if ellipsis is not None:
    idx.insert(ellipsis, Ellipsis)
    np_idx.insert(ellipsis, Ellipsis)
  for _ in range(draw(st.integers(0, 2))):
    at = draw(st.integers(0, len(idx)))
    idx.insert(at, None)
    np_idx.insert(at, None)
    found = [(p + (p >= at), n) for p, n in found]
  return Expr(tuple(idx), tuple(np_idx), found)


def clamped(expr: Expr) -> tuple:
  """The NumPy index with integer-array values wrapped once, then clamped: JAX's read semantics."""
  out = list(expr.np_idx)
  for pos, n in expr.arrays:
    v = np.asarray(out[pos])
    out[pos] = np.clip(np.where(v < 0, v + n, v), 0, n - 1)
  return tuple(out)


def target_positions(shape: tuple[int, ...], expr: Expr, mode=None) -> np.ndarray:
  """For each element of x[idx], the flat position in x it updates; -1 where the update is dropped.
  Axes indexed by arrays get one extra slot holding -1, where out-of-range values are sent."""
  if mode == "clip": return np.arange(int(np.prod(shape))).reshape(shape)[clamped(expr)]
  out = list(expr.np_idx)
  array_axes = []
  for pos, n in expr.arrays:
    v = np.asarray(out[pos])
    v = np.where(v < 0, v + n, v)
    out[pos] = np.where((v < 0) | (v >= n), n, v)
    before = [i for i in expr.np_idx[:pos] if i is not None]
    if any(i is Ellipsis for i in before):  # count the axes from the end
      array_axes.append(len(shape) - sum(1 for i in expr.np_idx[pos:] if i is not None))
    else: array_axes.append(len(before))
  flat = np.arange(int(np.prod(shape))).reshape(shape)
  widths = [(0, 1) if a in array_axes else (0, 0) for a in range(len(shape))]
  padded = np.pad(flat, widths, constant_values=-1)
  return padded[tuple(out)]


def reference_update(a: np.ndarray, positions: np.ndarray, values: np.ndarray, kind: str) -> np.ndarray:
  out = a.copy().reshape(-1)
  values = np.broadcast_to(np.asarray(values).astype(a.dtype), positions.shape)
  keep = positions >= 0
  if kind == "set":  # apply in order: the last update to a position wins
    for p, v in zip(positions[keep], values[keep]): out[p] = v
  else: {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[kind].at(
    out, positions[keep], values[keep])
  return out.reshape(a.shape)


# ---- reads
@examples
@given(data=st.data(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_basic_indexing_matches_numpy(device, data, dtype, seed):
  shape = data.draw(shapes())
  expr = data.draw(index_exprs(shape, arrays=False))
  a = data_for(shape, dtype, seed)
  assert_close(tnp.array(a)[expr.idx], a[expr.np_idx])


@examples
@given(data=st.data(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_integer_array_indexing_matches_numpy(device, data, dtype, seed):
  shape = data.draw(shapes())
  expr = data.draw(index_exprs(shape))
  a = data_for(shape, dtype, seed)
  assert_close(tnp.array(a)[expr.idx], a[expr.np_idx])


@examples
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_out_of_range_array_indices_clamp(device, data, seed):
  shape = data.draw(shapes())
  expr = data.draw(index_exprs(shape, oob=True))
  a = data_for(shape, np.float32, seed)
  assert_close(tnp.array(a)[expr.idx], a[clamped(expr)])


@pytest.mark.parametrize("axis", [0, 1])
def test_clamping_matches_take_clip(device, axis):
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  i = np.array([-9, -5, -4, -1, 0, 3, 4, 9])
  n = a.shape[axis]
  want = np.take(a, np.where(i < 0, i + n, i), axis=axis, mode="clip")  # negative values wrap once first
  got = tnp.array(a)[(slice(None),) * axis + (tnp.array(i),)]
  assert_close(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_get_fill_mode(device, dtype):
  a = data_for((3, 4), dtype, 0)
  rows, cols = np.array([0, 3, -1, -4, 2]), np.array([1, 1, 5, 0, -4])
  x = tnp.array(a)
  fill = {np.float32: np.nan, np.int32: np.iinfo(np.int32).min, np.uint8: 255, np.bool_: True}[dtype]
  want = np.array([a[0, 1], fill, fill, fill, a[2, 0]], dtype)
  assert_close(x.at[rows, cols].get(mode="fill"), want)
  assert_close(x.at[rows, cols].get(mode="drop"), want)
  want[[1, 2, 3]] = 7
  assert_close(x.at[rows, cols].get(mode="fill", fill_value=7), want)
  assert_close(x.at[rows, cols].get(mode="clip"), a[[0, 2, 2, 0, 2], [1, 1, 3, 0, 0]])
  assert_close(x.at[rows[[0, 4]], cols[[0, 4]]].get(mode="promise_in_bounds"), a[[0, 2], [1, 0]])


@examples
@given(data=st.data(), seed=st.integers(0, 2**16), container=st.sampled_from(["numpy", "list", "tgfn"]))
def test_boolean_masks(device, data, seed, container):
  shape = data.draw(shapes())
  dims = data.draw(st.integers(1, len(shape)))
  lead = data.draw(st.integers(0, len(shape) - dims))
  mask = data_for(shape[lead:lead + dims], np.bool_, seed + 1)
  m = {"numpy": mask, "list": mask.tolist(), "tgfn": tnp.array(mask)}[container]
  a = data_for(shape, np.float32, seed)
  x = tnp.array(a)
  assert_close(x[(slice(None),) * lead + (m,)], a[(slice(None),) * lead + (mask,)])
  if lead: assert_close(x[(0,) * lead + (m,)], a[(0,) * lead + (mask,)])  # ints join the advanced indices


def test_lazy_mask_is_realized(device):
  a = np.arange(-4, 8, dtype=np.float32).reshape(3, 4)
  x = tnp.array(a)
  assert_close(x[x > 0], a[a > 0])
  assert_close(x.at[x > 0].set(0.0), np.where(a > 0, 0, a))


@pytest.mark.parametrize("idx", [True, False, (0, True), (Ellipsis, True), ([0, 1], slice(None), True),
                                 (slice(None), True, [2, 0, 1])])
def test_scalar_bool_index(device, idx):
  a = np.arange(6, dtype=np.int32).reshape(2, 3)
  assert_close(tnp.array(a)[idx], a[idx])


@pytest.mark.parametrize("idx", [([0], Ellipsis, [0]), (slice(None), [0], Ellipsis, [0]),
                                 (slice(None), [0], None, [1]), (0, slice(None), [0, 1]),
                                 ([0, 1], slice(None), 0), (slice(None), 0, [0, 1]),
                                 (Ellipsis, [[0], [1]], [1, 0]),
                                 ([1, 0], np.array([[True, False], [False, True]]))])
def test_advanced_axes_placement(device, idx):
  """Adjacent advanced indices keep their place; separated ones (even by a `...` of no axes) go first."""
  a = np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2)
  assert_close(tnp.array(a)[idx], a[idx])


@pytest.mark.parametrize("idx", [(), Ellipsis, None, (None, Ellipsis, None)])
def test_zero_dim_array(device, idx):
  a = np.array(3.5, np.float32)
  assert_close(tnp.array(a)[idx], a[idx])


@pytest.mark.parametrize("idx", [[], (slice(None), []), slice(2, 1), np.zeros((3, 4), bool)])
def test_empty_results(device, idx):
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  assert_close(tnp.array(a)[idx], a[idx])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int8, np.int64])
def test_index_array_dtypes(device, dtype):
  a = np.arange(10, dtype=np.float32)
  i = np.array([0, 9, 10, 100, 3] + ([-1, -11, -100] if np.dtype(dtype).kind == "i" else []), dtype)
  want = a[np.clip(np.where(i < 0, i.astype(np.int64) + 10, i), 0, 9)]
  assert_close(tnp.array(a)[tnp.array(i)], want)


def test_inf_and_nan_do_not_leak(device):
  a = np.array([[np.inf, 1.0], [np.nan, 2.0], [-np.inf, 3.0]], np.float32)
  x = tnp.array(a)
  assert_close(x[[0, 1, 2], [1, 1, 1]], np.array([1.0, 2.0, 3.0], np.float32))
  assert_close(x[[2, 1, 0], 0], a[[2, 1, 0], 0])


def test_realized_gather_is_at_most_two_kernels(device):
  """The wrapped indices are computed once into a buffer (not once per one-hot compare), then gathered."""
  x = tnp.array(np.arange(20, dtype=np.float32).reshape(4, 5)).realize()
  rows = tnp.array(np.array([3, -1, 0, 9], np.int32)).realize()
  cols = tnp.array(np.array([[1], [4]], np.int32)).realize()
  for out in (x[rows], x[:, rows], x[rows, cols], x[rows, 1:4:2]):
    assert len(create_schedule([out.uop])) <= 2
  assert_close(x[rows, cols], np.arange(20, dtype=np.float32).reshape(4, 5)[[[3, 3, 0, 3]], [[1], [4]]])


# ---- updates
@examples
@given(data=st.data(), dtype=st.sampled_from(DTYPES), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**16),
       oob=st.booleans())
def test_at_updates_match_numpy(device, data, dtype, kind, seed, oob):
  shape = data.draw(shapes())
  expr = data.draw(index_exprs(shape, oob=oob))
  a = data_for(shape, dtype, seed)
  positions = target_positions(shape, expr)
  full = data.draw(st.booleans())  # updates of the full indexed shape, or broadcast from its last axes
  v = data_for(positions.shape if full else positions.shape[len(positions.shape) // 2:], dtype, seed + 1)
  x = tnp.array(a)
  got = getattr(x.at[expr.idx], kind)(tnp.array(v) if data.draw(st.booleans()) else v)
  assert_close(got, reference_update(a, positions, v, kind))
  assert_close(x, a)  # x itself is unchanged


@examples
@given(data=st.data(), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**16))
def test_at_clip_mode(device, data, kind, seed):
  shape = data.draw(shapes())
  expr = data.draw(index_exprs(shape, oob=True))
  a = data_for(shape, np.int32, seed)
  positions = target_positions(shape, expr, mode="clip")
  v = data_for(positions.shape, np.int32, seed + 1)
  got = getattr(tnp.array(a).at[expr.idx], kind)(v, mode="clip")
  assert_close(got, reference_update(a, positions, v, kind))


def test_duplicates(device):
  a = np.zeros(4, np.float32)
  i = np.array([1, 3, 1, 1, -3, 7])
  v = np.array([1, 2, 3, 4, 5, 6], np.float32)
  x = tnp.array(a)
  assert_close(x.at[i].set(v), np.array([0, 5, 0, 2], np.float32))  # the last of 1, 3, 4, 5 at index 1
  assert_close(x.at[i].add(v), np.array([0, 13, 0, 2], np.float32))
  assert_close(x.at[i].multiply(v), np.zeros(4, np.float32))
  assert_close((x + 1).at[i].mul(v), np.array([1, 60, 1, 2], np.float32))
  assert_close(x.at[i].min(v), np.zeros(4, np.float32))
  assert_close(x.at[i].max(v), np.array([0, 5, 0, 2], np.float32))
  assert_close(x.at[i].set(9.0), np.array([0, 9, 0, 9], np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_basic_index_updates(device, dtype):
  a = data_for((3, 4), dtype, 2)
  v = data_for((2, 2), dtype, 3)
  x = tnp.array(a)
  for kind in KINDS:
    want = a.copy()
    view = want[2:0:-1, ::-3]
    reference = reference_update(view, np.arange(4).reshape(2, 2), v, kind)
    want[2:0:-1, ::-3] = reference
    assert_close(getattr(x.at[2:0:-1, ::-3], kind)(v), want)
  want = a.copy()
  want[1, None, 1:] = v[0, 0]
  assert_close(x.at[1, None, 1:].set(v[0, 0]), want)


def test_divide_and_power(device):
  a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
  i = np.array([0, 2, 2, 5])
  v = np.array([2, 4, 0.5, 8], np.float32)
  x = tnp.array(a)
  div = np.ones(3, np.float32)
  np.multiply.at(div, i[:3], v[:3])
  assert_close(x.at[:, i].divide(v), a / div, rtol=1e-5)
  assert_close(x.at[:, i].power(v), a ** div, rtol=1e-5)
  ints = tnp.array(np.array([4, 9, 12], np.int32))
  assert_close(ints.at[1].divide(3), np.array([4, 3, 12], np.float32))  # int arrays divide to float, as JAX
  assert_close(ints.at[[0, 0]].power(2), np.array([256, 9, 12], np.int32))


def test_updates_cast_and_broadcast(device):
  x = tnp.array(np.zeros((2, 3), np.int32))
  assert_close(x.at[:, 1].set(2.7), np.array([[0, 2, 0], [0, 2, 0]], np.int32))
  assert_close(x.at[0].add(np.array([[[1.9, 2, 3]]], np.float32)), np.array([[1, 2, 3], [0, 0, 0]], np.int32))
  b = tnp.array(np.zeros(3, bool))
  assert_close(b.at[[0, 2]].set(1), np.array([True, False, True]))
  with raises(ValueError, "updates of shape (2,) cannot be broadcast to the indexed shape (3,)"):
    x.at[0].set(np.ones(2, np.int32))
  with raises(OverflowError, "does not fit in uint8"):
    tnp.array(np.zeros(2, np.uint8)).at[0].set(300)


def test_bool_accumulation(device):
  a = np.array([True, False, False, True])
  i, v = np.array([1, 1, 2, 3, 3]), np.array([False, True, False, False, True])
  x = tnp.array(a)
  for kind in ["add", "multiply", "min", "max"]:
    assert_close(getattr(x.at[i], kind)(v), reference_update(a, i, v, kind))


def test_empty_updates(device):
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  x = tnp.array(a)
  assert_close(x.at[[]].set(1.0), a)
  assert_close(x.at[:, 2:1].add(1.0), a)


# ---- errors
def test_errors(device):
  x = tnp.array(np.arange(6, dtype=np.float32).reshape(2, 3))
  with raises(IndexError, "too many indices for array: array is 2-dimensional, but 3 were indexed"):
    x[0, 0, 0]
  with raises(IndexError, "too many indices for array"): x[np.ones((2, 3, 1), bool)]
  with raises(IndexError, "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean "
              "arrays are valid indices; got float 1.0"):
    x[1.0]
  with raises(IndexError, "arrays used as indices must be of integer or boolean type, got float32"):
    x[tnp.array([0.0])]
  with raises(IndexError, "arrays used as indices must be of integer or boolean type, got float64"): x[[0.5]]
  with raises(IndexError, "index 2 is out of bounds for axis 0 with size 2"): x[2]
  with raises(IndexError, "index -4 is out of bounds for axis 1 with size 3"): x[..., -4]
  with raises(IndexError, "index 3 is out of bounds for axis 1 with size 3"): x.at[0, 3].set(1.0)
  with raises(IndexError, "an index can only have a single ellipsis"): x[..., ...]
  with raises(IndexError, "boolean index of shape (3,) does not match the indexed axes of shape (2,)"):
    x[np.ones(3, bool)]
  with raises(IndexError, "indexing arrays could not be broadcast together with shapes (2,) (3,)"):
    x[[0, 1], [0, 1, 2]]
  with raises(IndexError, "slice bounds must be static ints or None"): x[tnp.array(1):]
  with raises(ValueError, "slice step cannot be zero"): x[::0]
  with raises(ValueError, "mode must be one of"): x.at[0].get(mode="wrap")
  with raises(ValueError, "mode must be one of"): x.at[0].set(1.0, mode="wrap")
  with raises(IndexError, "cannot clamp indices into an axis of size 0"): tnp.zeros((2, 0))[:, [0]]


def test_abstract_mask_is_an_error(device):
  x = tnp.array(np.arange(3, dtype=np.float32))
  with raises(tgfn.ConcretizationError, "a boolean mask index (its number of True values sets the result's "
              "shape) needs a concrete value"):
    tgfn.jit(lambda x: x[x > 1])(x)
  with raises(tgfn.ConcretizationError, "a boolean mask index"):
    tgfn.vmap(lambda r: r.at[r > 1].set(0.0))(x[None])


# ---- under transforms
def test_transforms(device):
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  x, i = tnp.array(a), tnp.array([2, 0, -1, 7])
  counts = np.zeros((3, 4), np.float32)
  np.add.at(counts, ([2, 0, 2, 2], slice(1, 3)), 2.0)
  assert_close(tgfn.grad(lambda x: (x[i, 1:3] * 2).sum())(x), counts)
  assert_close(tgfn.grad(lambda x: x[x > 3].sum())(x), (a > 3).astype(np.float32))  # concrete inside grad
  kept = np.ones((3, 4), np.float32)
  kept[[2, 0], 1] = 0
  assert_close(tgfn.grad(lambda x: x.at[i, 1].set(5.0).sum())(x), kept)
  added = a.copy()
  added[0] += 1
  added[2] += 2  # indices 2 and -1; 7 is dropped
  assert_close(tgfn.jit(lambda x, i: x.at[i].add(1.0))(x, i), added)
  assert_close(tgfn.vmap(lambda r: r[i])(x), a[:, [2, 0, 3, 3]])
  assert_close(tgfn.vmap(lambda j: x[j, ::-2])(i), a[[2, 0, 2, 2], ::-2])
