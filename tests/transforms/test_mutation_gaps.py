"""Tests that catch deliberate bugs a mutation check once slipped past: the derivative of prod at zeros,
the dtypes of derivatives through astype, jit's memory plan for intermediates of different dtypes, and
vmap of a scatter whose positions run past a member's end."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp


def reverse_and_forward_prod_derivative(x: np.ndarray, axis=None) -> tuple[np.ndarray, np.ndarray]:
  """d sum(prod(x, axis)) / dx by grad, and the same column by column by jvp."""
  f = lambda v: tnp.prod(v, axis=axis).sum()  # noqa: E731
  reverse = np.asarray(tgfn.grad(f)(tnp.array(x)))
  forward = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    e = np.zeros_like(x)
    e[i] = 1
    forward[i] = float(tgfn.jvp(f, (tnp.array(x),), (tnp.array(e),))[1])
  return reverse, forward


@pytest.mark.parametrize("x,want", [([0.0, 0.0, 2.0], [0.0, 0.0, 0.0]), ([0.0, 3.0, 2.0], [6.0, 0.0, 0.0]),
                                    ([4.0, 3.0, 2.0], [6.0, 8.0, 12.0]), ([0.0], [1.0]), ([-0.0, 5.0], [5.0, 0.0])])
def test_prod_derivative_at_zeros(x, want):
  for got in reverse_and_forward_prod_derivative(np.array(x, np.float32)):
    np.testing.assert_array_equal(got, want)


def test_prod_derivative_at_zeros_along_an_axis():
  x = np.array([[0.0, 0.0, 2.0], [0.0, 3.0, 2.0], [4.0, 3.0, 2.0]], np.float32)
  want = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [6.0, 8.0, 12.0]], np.float32)
  for got in reverse_and_forward_prod_derivative(x, axis=1): np.testing.assert_array_equal(got, want)
  for got in reverse_and_forward_prod_derivative(x.T.copy(), axis=0): np.testing.assert_array_equal(got, want.T)


@pytest.mark.parametrize("inner", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("outer", ["float32", "float16", "float64"])
def test_cotangent_has_the_input_dtype_whatever_the_computation_dtype(outer, inner):
  f = lambda v: (v.astype(inner) * 3).astype("float32").sum()  # noqa: E731
  g = tgfn.grad(f)(tnp.array([1.0, 2.0], dtype=outer))
  assert g.dtype == tnp.dtype(outer)
  np.testing.assert_array_equal(np.asarray(g).astype(np.float64), [3.0, 3.0])


@pytest.mark.parametrize("inner", ["float16", "float32", "float64"])
@pytest.mark.parametrize("outer", ["float16", "bfloat16", "float32"])
def test_tangent_has_the_output_dtype(inner, outer):
  f = lambda v: (v.astype(inner) * 3).astype(outer)  # noqa: E731
  x = tnp.array([1.0, 2.0], dtype=inner)
  value, tangent = tgfn.jvp(f, (x,), (tnp.ones(2, dtype=inner),))
  assert value.dtype == tangent.dtype == tnp.dtype(outer)
  np.testing.assert_array_equal(np.asarray(tangent.astype("float32")), [3.0, 3.0])


def test_jit_intermediates_of_one_element_count_but_different_dtypes_get_their_own_memory():
  def f(x):  # three broadcast reductions, each read only by the next kernel: a's memory is free for c
    a = x.astype(tnp.float16).sum(1, keepdims=True)                          # (64, 1) float16
    b = (x * a.astype(tnp.float32)).astype(tnp.float64).sum(0, keepdims=True)  # (1, 64) float64
    c = (x * b.astype(tnp.float32)).astype(tnp.float64).sum(1, keepdims=True)  # (64, 1) float64
    return x.astype(tnp.float64) * c

  x = np.random.default_rng(0).integers(-3, 4, (64, 64)).astype(np.float32)  # sums exact in float16
  graph = tgfn.jit(f).lower(tnp.array(x)).graph
  planned = {s: b for s, b in graph.fixed.items() if s >= graph.n_inputs and s not in graph.output_slots}
  # (the casts of a and b, broadcast inside reductions, may get float32 buffers of their own too)
  assert {"float16", "float64"} <= {graph.slots[s].dtype.name for s in planned}
  for s, buf in planned.items():  # each planned buffer holds its slot's dtype and size exactly
    assert (buf.dtype, buf.size) == (graph.slots[s].dtype, graph.slots[s].size)
  a = x.sum(1, keepdims=True)
  b = (x * a).astype(np.float64).sum(0, keepdims=True)
  c = (x * b.astype(np.float32)).astype(np.float64).sum(1, keepdims=True)
  np.testing.assert_array_equal(np.asarray(tgfn.jit(f)(tnp.array(x))), x.astype(np.float64) * c)


def test_vmap_of_a_scatter_drops_each_members_positions_past_its_end():
  """SCATTER drops positions outside [0, size) (Array._scatter). Batched, the members' blocks lie end to
  end: member b's position `size` would be member b + 1's first element."""
  scatter = lambda x, p, u: x._scatter(p, u, None)  # noqa: E731
  x = tnp.zeros((3, 4))
  positions = tnp.array([[1, 4], [-1, 2], [4, 9]])
  updates = tnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  want = [[0, 1, 0, 0], [0, 0, 4, 0], [0, 0, 0, 0]]
  one_by_one = np.stack([np.asarray(scatter(x[i], positions[i], updates[i])) for i in range(3)])
  np.testing.assert_array_equal(one_by_one, want)
  np.testing.assert_array_equal(np.asarray(tgfn.vmap(scatter)(x, positions, updates)), want)
  shared_operand = tgfn.vmap(scatter, in_axes=(None, 0, 0))(x[0], positions, updates)
  np.testing.assert_array_equal(np.asarray(shared_operand), want)
