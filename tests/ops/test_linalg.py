"""matmul, dot, vdot, inner, outer, tensordot, einsum, diagonal and trace against NumPy.

Shapes stay small (a few elements per axis, size-0 and size-1 axes included): the PYTHON device is a
scalar interpreter, and every new shape is a new C kernel to compile on CPU.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.schedule.schedule import create_schedule

# the `device` fixture only sets the default device, which is the same for every example
fixture_ok = settings(suppress_health_check=[*settings.default.suppress_health_check,
                                              HealthCheck.function_scoped_fixture])

DTYPES = ["float32", "float16", "int32", "bool"]
seeds = st.integers(0, 2**32 - 1)
dims = st.integers(0, 3)


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
  if dtype == "bool": return rng.random(shape) < 0.5
  if dtype == "int32": return rng.integers(-4, 5, shape).astype(np.int32)
  return rng.uniform(-1, 1, shape).astype(dtype)


def _check(got, fn, *xs: np.ndarray) -> None:
  """`got` against NumPy's `fn(*xs)` in the inputs' dtype. float16 is computed by NumPy in float32 and
  rounded once, while tgfn accumulates in float16, hence the looser tolerance."""
  dtype = xs[0].dtype
  if dtype == np.float16:
    want = np.asarray(fn(*[x.astype(np.float32) for x in xs])).astype(np.float16)
    assert_close(got, want, rtol=1e-2, atol=2e-2)
  else:
    assert_close(got, np.asarray(fn(*xs)).astype(dtype), rtol=1e-5, atol=1e-5)


# ---- matmul
@st.composite
def matmul_shapes(draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
  """Operand shapes for matmul: 1-D sides sometimes, batch axes that broadcast (some 1, some missing)."""
  n, k, m = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(0, 4))
  batch = draw(st.lists(dims, max_size=2))

  def batch_for_one_side() -> tuple[int, ...]:
    sizes = [1 if draw(st.booleans()) else d for d in batch]
    return tuple(sizes[draw(st.integers(0, len(sizes))):])

  a = (k,) if draw(st.integers(0, 3)) == 0 else batch_for_one_side() + (n, k)
  b = (k,) if draw(st.integers(0, 3)) == 0 else batch_for_one_side() + (k, m)
  return a, b


@fixture_ok
@given(shapes=matmul_shapes(), dtype=st.sampled_from(DTYPES), seed=seeds)
def test_matmul_matches_numpy(device, shapes, dtype, seed):
  rng = np.random.default_rng(seed)
  a, b = _data(rng, shapes[0], dtype), _data(rng, shapes[1], dtype)
  _check(tnp.matmul(tnp.array(a), tnp.array(b)), np.matmul, a, b)


def test_matmul_operators_and_methods(device):
  rng = np.random.default_rng(0)
  a, b = _data(rng, (3, 4), "float32"), _data(rng, (4, 2), "float32")
  x, y = tnp.array(a), tnp.array(b)
  assert_close(x @ y, a @ b, rtol=1e-5, atol=1e-5)
  assert_close(a @ y, a @ b, rtol=1e-5, atol=1e-5)  # NumPy defers to Array.__rmatmul__
  assert_close(x @ b, a @ b, rtol=1e-5, atol=1e-5)
  assert_close(x.dot(y), a @ b, rtol=1e-5, atol=1e-5)


def test_matmul_is_one_kernel(device):
  rng = np.random.default_rng(0)
  a, b = tnp.array(_data(rng, (2, 3, 4), "float32")), tnp.array(_data(rng, (4, 5), "float32"))
  assert len(create_schedule([(a @ b).uop])) == 1
  assert len(create_schedule([tnp.einsum("bij,jk->bki", a, b).uop])) == 1


def test_bool_matmul_is_logical(device):
  a = np.array([[True, True], [False, False]])
  b = np.array([[True, False], [True, False]])
  out = tnp.array(a) @ tnp.array(b)
  assert out.dtype == tnp.bool_
  assert_close(out, np.array([[True, False], [False, False]]))  # or of ands: never 2


@pytest.mark.parametrize("dta, dtb, want", [
  ("int32", "float32", "float32"), ("float16", "float32", "float32"), ("uint8", "int8", "int16"),
  ("bool", "int32", "int32"), ("int8", "int8", "int8"), ("float16", "float16", "float16"),
])
def test_matmul_promotes_like_jax(device, dta, dtb, want):
  rng = np.random.default_rng(1)
  a = rng.integers(0, 3, (2, 3)).astype(dta)
  b = rng.integers(0, 3, (3, 2)).astype(dtb)
  out = tnp.array(a) @ tnp.array(b)
  assert out.dtype.name == want
  assert_close(out, a.astype(want) @ b.astype(want))


def test_integer_products_wrap_in_their_dtype(device):
  a = np.full((2, 3), 100, np.int8)
  b = np.ones((3, 2), np.int8)
  assert_close(tnp.array(a) @ tnp.array(b), a @ b)  # 300 wraps to 44, as in NumPy and JAX


def test_python_scalars_are_weak(device):
  x = tnp.array(np.arange(3, dtype=np.int32))
  assert tnp.dot(x, 2.0).dtype == tnp.float32
  assert_close(tnp.dot(x, 2.0), np.arange(3, dtype=np.float32) * 2)
  h = tnp.array(np.ones(3, np.float16))
  assert tnp.dot(2, h).dtype == tnp.float16
  assert tnp.outer(h, 3.0).dtype == tnp.float16


# ---- dot, inner, outer, vdot
@st.composite
def dot_shapes(draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
  k = draw(dims)
  a_nd, b_nd = draw(st.integers(0, 3)), draw(st.integers(0, 3))
  a = tuple(draw(dims) for _ in range(a_nd - 1)) + (k,) if a_nd else ()
  if b_nd <= 1: b = (k,) * b_nd
  else: b = tuple(draw(dims) for _ in range(b_nd - 2)) + (k, draw(dims))
  return a, b


@fixture_ok
@given(shapes=dot_shapes(), dtype=st.sampled_from(DTYPES), seed=seeds)
def test_dot_matches_numpy(device, shapes, dtype, seed):
  rng = np.random.default_rng(seed)
  a, b = _data(rng, shapes[0], dtype), _data(rng, shapes[1], dtype)
  _check(tnp.dot(tnp.array(a), tnp.array(b)), np.dot, a, b)


@fixture_ok
@given(k=dims, free_a=st.lists(dims, max_size=2), free_b=st.lists(dims, max_size=2), scalar=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=seeds)
def test_inner_matches_numpy(device, k, free_a, free_b, scalar, dtype, seed):
  rng = np.random.default_rng(seed)
  a = _data(rng, () if scalar else tuple(free_a) + (k,), dtype)
  b = _data(rng, tuple(free_b) + (k,), dtype)
  _check(tnp.inner(tnp.array(a), tnp.array(b)), np.inner, a, b)


@fixture_ok
@given(sa=st.lists(dims, max_size=2), sb=st.lists(dims, max_size=2), dtype=st.sampled_from(DTYPES),
       seed=seeds)
def test_outer_matches_numpy(device, sa, sb, dtype, seed):
  rng = np.random.default_rng(seed)
  a, b = _data(rng, tuple(sa), dtype), _data(rng, tuple(sb), dtype)
  _check(tnp.outer(tnp.array(a), tnp.array(b)), np.outer, a, b)


@fixture_ok
@given(shape=st.lists(dims, max_size=3), dtype=st.sampled_from(["float32", "float16", "int32"]), seed=seeds)
def test_vdot_matches_numpy(device, shape, dtype, seed):
  rng = np.random.default_rng(seed)
  a = _data(rng, tuple(shape), dtype)
  b = _data(rng, tuple(shape[::-1]), dtype)  # any shape of the same size
  _check(tnp.vdot(tnp.array(a), tnp.array(b)), np.vdot, a, b)


# ---- tensordot
@st.composite
def tensordot_case(draw) -> tuple[tuple[int, ...], tuple[int, ...], object]:
  """Shapes and an `axes` argument: an int, or a pair of axis lists (in any order, some negative)."""
  summed = draw(st.lists(dims, max_size=2))
  free_a, free_b = draw(st.lists(dims, max_size=2)), draw(st.lists(dims, max_size=2))
  if draw(st.booleans()): return tuple(free_a + summed), tuple(summed + free_b), len(summed)
  order_a = draw(st.permutations(range(len(free_a) + len(summed))))
  order_b = draw(st.permutations(range(len(free_b) + len(summed))))
  a = [0] * len(order_a)
  b = [0] * len(order_b)
  for pos, n in zip(order_a, free_a + summed): a[pos] = n
  for pos, n in zip(order_b, summed + free_b): b[pos] = n
  axes_a = [order_a[len(free_a) + i] - (len(a) if draw(st.booleans()) else 0) for i in range(len(summed))]
  axes_b = [order_b[i] - (len(b) if draw(st.booleans()) else 0) for i in range(len(summed))]
  return tuple(a), tuple(b), (axes_a, axes_b)


@fixture_ok
@given(case=tensordot_case(), dtype=st.sampled_from(DTYPES), seed=seeds)
def test_tensordot_matches_numpy(device, case, dtype, seed):
  rng = np.random.default_rng(seed)
  sa, sb, axes = case
  a, b = _data(rng, sa, dtype), _data(rng, sb, dtype)
  _check(tnp.tensordot(tnp.array(a), tnp.array(b), axes), lambda x, y: np.tensordot(x, y, axes), a, b)


def test_tensordot_single_int_axes(device):
  rng = np.random.default_rng(0)
  a, b = _data(rng, (2, 3), "float32"), _data(rng, (3, 4), "float32")
  assert_close(tnp.tensordot(tnp.array(a), tnp.array(b), (1, 0)), np.tensordot(a, b, (1, 0)),
               rtol=1e-5, atol=1e-5)
  assert_close(tnp.tensordot(tnp.array(a), tnp.array(b[None]), 0), np.tensordot(a, b[None], 0))


# ---- einsum
EINSUM_CASES = [
  # matrix products and transposes, explicit and implicit
  ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ji,kj->ik", [(3, 2), (4, 3)]),
  ("ij->ji", [(2, 3)]), ("ij", [(2, 3)]), ("ba", [(2, 3)]), ("ijk->kji", [(2, 3, 4)]),
  ("Ab,bA->", [(2, 3), (3, 2)]), ("bA", [(2, 3)]), (" ij , jk -> ik ", [(2, 3), (3, 2)]),
  # sums
  ("ij->", [(2, 3)]), ("ij->j", [(2, 3)]), ("ij->i", [(2, 0)]), ("ij,jk->", [(2, 3), (3, 2)]),
  # diagonals: a label repeated within an operand
  ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ii->", [(3, 3)]), ("iij->ji", [(2, 2, 3)]),
  ("iji->ij", [(2, 3, 2)]), ("iii->i", [(3, 3, 3)]), ("iijj->ij", [(2, 2, 3, 3)]), ("ii->i", [(0, 0)]),
  ("ii,i->i", [(3, 3), (3,)]), ("ij,ji->", [(2, 3), (3, 2)]),
  # vector products
  ("i,i->", [(4,), (4,)]), ("i,i", [(4,), (4,)]), ("i,i->i", [(4,), (4,)]), ("i,j->ij", [(2,), (3,)]),
  ("i,j", [(2,), (3,)]), ("ij,ij->ij", [(2, 3), (2, 3)]), ("ij,ij->", [(2, 3), (2, 3)]),
  ("ij,j->i", [(2, 3), (3,)]),
  # batches and ellipses
  ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("bij,bjk->kbi", [(2, 2, 3), (2, 3, 2)]),
  ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]), ("...ij,...jk", [(2, 2, 3), (3, 2)]),
  ("...i,...i->...", [(2, 3), (3,)]), ("i...->...", [(2, 3, 4)]), ("...ii->...i", [(2, 3, 3)]),
  ("i...i", [(3, 2, 3)]), ("...,...", [(2, 1), (3,)]), ("ij...,jk...->ik...", [(2, 3), (3, 2, 4)]),
  ("a...b->b...a", [(2, 3, 1, 4)]), ("...->...", [(2, 3)]), ("...", [()]),
  # three operands
  ("ab,bc,cd->ad", [(2, 3), (3, 2), (2, 2)]), ("ab,bc,cd", [(2, 3), (3, 2), (2, 2)]),
  ("a,b,c->abc", [(2,), (3,), (2,)]),
  # size-1 labels broadcast; size-0 labels; 0-d operands
  ("ij,jk->ik", [(2, 1), (3, 4)]), ("i,i->i", [(3,), (1,)]), ("ij,jk->ik", [(0, 3), (3, 2)]),
  ("ij,jk->ik", [(2, 0), (0, 2)]), ("", [()]), (",->", [(), ()]), (",i->i", [(), (3,)]),
  ("i,->i", [(3,), ()]),
]


@pytest.mark.parametrize("subscripts, shapes", EINSUM_CASES, ids=[c[0] or "empty" for c in EINSUM_CASES])
def test_einsum_table(device, subscripts, shapes):
  rng = np.random.default_rng(len(subscripts))
  ops = [_data(rng, s, "float32") for s in shapes]
  want = np.einsum(subscripts, *ops)
  assert_close(tnp.einsum(subscripts, *[tnp.array(o) for o in ops]), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int32", "bool", "float16"])
@pytest.mark.parametrize("subscripts, shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->", [(3, 3)]),
                                                ("ij,ij->i", [(2, 3), (2, 3)]), ("...i->...", [(2, 3)])])
def test_einsum_dtypes(device, subscripts, shapes, dtype):
  rng = np.random.default_rng(7)
  ops = [_data(rng, s, dtype) for s in shapes]
  _check(tnp.einsum(subscripts, *[tnp.array(o) for o in ops]), lambda *xs: np.einsum(subscripts, *xs), *ops)


@st.composite
def einsum_case(draw) -> tuple[str, list[tuple[int, ...]]]:
  """Random subscripts over labels 'abcd' (repeats within an operand included) and matching shapes."""
  sizes = {c: draw(dims) for c in "abcd"}
  terms = [draw(st.lists(st.sampled_from("abcd"), max_size=3)) for _ in range(draw(st.integers(1, 3)))]
  subscripts = ",".join("".join(t) for t in terms)
  if draw(st.booleans()):
    used = sorted({c for t in terms for c in t})
    subscripts += "->" + "".join(draw(st.permutations(used))[:draw(st.integers(0, len(used)))])
  return subscripts, [tuple(sizes[c] for c in t) for t in terms]


@fixture_ok
@given(case=einsum_case(), seed=seeds)
def test_einsum_random_matches_numpy(device, case, seed):
  subscripts, shapes = case
  rng = np.random.default_rng(seed)
  ops = [_data(rng, s, "float32") for s in shapes]
  assert_close(tnp.einsum(subscripts, *[tnp.array(o) for o in ops]), np.einsum(subscripts, *ops),
               rtol=1e-5, atol=1e-5)


def test_einsum_accepts_python_scalars_and_lists(device):
  assert_close(tnp.einsum("i,->i", [1.0, 2.0], 3.0), np.array([3.0, 6.0], np.float32))


# ---- diagonal and trace
@st.composite
def diagonal_case(draw) -> tuple[tuple[int, ...], int, int, int]:
  shape = tuple(draw(st.lists(st.integers(0, 4), min_size=2, max_size=3)))
  axis1, axis2 = draw(st.permutations(range(len(shape))))[:2]
  neg1, neg2 = draw(st.booleans()), draw(st.booleans())
  return shape, draw(st.integers(-5, 5)), axis1 - len(shape) * neg1, axis2 - len(shape) * neg2


@fixture_ok
@given(case=diagonal_case(), dtype=st.sampled_from(["float32", "int32", "bool"]), seed=seeds)
def test_diagonal_matches_numpy(device, case, dtype, seed):
  shape, offset, axis1, axis2 = case
  x = _data(np.random.default_rng(seed), shape, dtype)
  assert_close(tnp.diagonal(tnp.array(x), offset, axis1, axis2), np.diagonal(x, offset, axis1, axis2))


@fixture_ok
@given(case=diagonal_case(), dtype=st.sampled_from(["float32", "int32", "bool"]), seed=seeds)
def test_trace_matches_numpy(device, case, dtype, seed):
  shape, offset, axis1, axis2 = case
  x = _data(np.random.default_rng(seed), shape, dtype)
  # JAX's dtypes: int32 and bool traces accumulate in int32 (NumPy's in int64)
  want = np.trace(x, offset, axis1, axis2).astype("float32" if dtype == "float32" else "int32")
  assert_close(tnp.trace(tnp.array(x), offset, axis1, axis2), want, rtol=1e-5, atol=1e-5)


def test_trace_dtype_argument(device):
  x = np.arange(9, dtype=np.int8).reshape(3, 3)
  out = tnp.trace(tnp.array(x), dtype=tnp.float32)
  assert out.dtype == tnp.float32
  assert_close(out, np.float32(12))


# ---- errors
def _raises(fn, message: str) -> None:
  with pytest.raises(ValueError, match=re.escape(message)):
    fn()


def test_matmul_errors(device):
  a, b = tnp.ones((2, 3)), tnp.ones((4, 5))
  _raises(lambda: a @ b,
          "matmul: shapes (2, 3) and (4, 5) are not aligned: 3 (axis -1 of a) != 4 (axis -2 of b)")
  _raises(lambda: a @ tnp.ones(4),
          "matmul: shapes (2, 3) and (4,) are not aligned: 3 (axis -1 of a) != 4 (axis -1 of b)")
  _raises(lambda: tnp.matmul(a, 2.0),
          "matmul: operands must have at least 1 dimension, got shapes (2, 3) and ()")
  _raises(lambda: tnp.ones((2, 2, 3)) @ tnp.ones((3, 3, 5)),
          "matmul: the batch dimensions (2,) of a (2, 2, 3) and (3,) of b (3, 3, 5) cannot be broadcast")


def test_dot_inner_vdot_errors(device):
  _raises(lambda: tnp.dot(tnp.ones((2, 3)), tnp.ones((4, 5))),
          "dot: shapes (2, 3) and (4, 5) are not aligned: 3 (axis -1 of a) != 4 (axis -2 of b)")
  _raises(lambda: tnp.dot(tnp.ones((2, 3)), tnp.ones(4)), "3 (axis -1 of a) != 4 (axis 0 of b)")
  _raises(lambda: tnp.inner(tnp.ones((2, 3)), tnp.ones((3, 2))),
          "inner: shapes (2, 3) and (3, 2) are not aligned: 3 (axis -1 of a) != 2 (axis -1 of b)")
  _raises(lambda: tnp.vdot(tnp.ones((2, 3)), tnp.ones(5)),
          "vdot: arrays of shapes (2, 3) and (5,) have different sizes 6 and 5")


def test_tensordot_errors(device):
  a, b = tnp.ones((2, 3)), tnp.ones((4, 5))
  _raises(lambda: tnp.tensordot(a, b, 1),
          "tensordot: shapes (2, 3) and (4, 5) are not aligned: 3 (axis 1 of a) != 4 (axis 0 of b)")
  _raises(lambda: tnp.tensordot(a, b, 3), "tensordot: axes=3 must be between 0 and")
  _raises(lambda: tnp.tensordot(a, b, -1), "tensordot: axes=-1 must be between 0 and")
  _raises(lambda: tnp.tensordot(a, b, ([0, 1], [0])),
          "tensordot: got 2 axes of a (0, 1) but 1 axes of b (0,)")
  _raises(lambda: tnp.tensordot(a, a, ([0, 0], [0, 1])), "tensordot: repeated axis in the axes of a")
  _raises(lambda: tnp.tensordot(a, b, ([2], [0])),
          "tensordot: axis 2 is out of bounds for a of shape (2, 3), which has 2 dimensions")
  with pytest.raises(TypeError, match="tensordot: axes must be an int or a pair"):
    tnp.tensordot(a, b, "ij")


@pytest.mark.parametrize("subscripts, shapes, message", [
  ("ij,jk->ik", [(2, 3), (4, 5)],
   "einsum: label 'j' has size 3 in operand 0 ('ij') but size 4 in operand 1 ('jk')"),
  ("ij,jk", [(2, 3)], "einsum: subscripts 'ij,jk' name 2 operand(s) but 1 were given"),
  ("ijk", [(2, 3)],
   "einsum: operand 0 has 2 dimensions (shape (2, 3)) but its subscripts 'ijk' have 3 labels"),
  ("i", [(2, 3)], "einsum: operand 0 has 2 dimensions (shape (2, 3)) but its subscripts 'i' have 1 labels"),
  ("ijk...", [(2, 3)],
   "einsum: operand 0 has 2 dimensions (shape (2, 3)) but its subscripts 'ijk...' have 3 labels besides"),
  ("ij->ik", [(2, 3)], "einsum: output label 'k' in the output '->ik' does not appear in any input"),
  ("ij->ii", [(2, 3)], "einsum: output label 'i' appears more than once in the output '->ii'"),
  ("ii", [(2, 3)],
   "einsum: label 'i' repeats in operand 0 ('ii', shape (2, 3)) on axes of different sizes 2 and 3"),
  ("i1", [(2, 3)], "einsum: invalid label '1' in the subscripts of operand 0 'i1'"),
  ("..i", [(2, 3)], "einsum: the subscripts of operand 0 '..i' has a '.' that is not part of an ellipsis"),
  ("...i...", [(2, 3)], "einsum: the subscripts of operand 0 '...i...' has more than one '...'"),
  ("...i->i", [(2, 3)], "einsum: operands have 1 '...' dimension(s) but the output '->i' has no '...'"),
  ("...i,...i", [(2, 3), (4, 3)], "einsum: the '...' dimensions of operand 0 (shape (2, 3)) and operand 1 "
                                  "(shape (4, 3)) cannot be broadcast together"),
  ("i->i->i", [(2,)], "einsum: subscripts 'i->i->i' have more than one '->'"),
])
def test_einsum_errors(device, subscripts, shapes, message):
  _raises(lambda: tnp.einsum(subscripts, *[tnp.ones(s) for s in shapes]), message)


def test_einsum_rejects_sublist_form(device):
  with pytest.raises(TypeError, match="interleaved"):
    tnp.einsum(tnp.ones(2), [0])


def test_diagonal_errors(device):
  _raises(lambda: tnp.diagonal(tnp.ones(3)),
          "diagonal: needs an array of at least 2 dimensions, got shape (3,)")
  _raises(lambda: tnp.diagonal(tnp.ones((2, 3)), 0, 1, -1),
          "diagonal: axis1 (1) and axis2 (-1) are the same axis of shape (2, 3)")
  _raises(lambda: tnp.trace(tnp.ones((2, 3)), 0, 0, 2),
          "diagonal: axis 2 is out of bounds for an array of shape (2, 3), which has 2 dimensions")
