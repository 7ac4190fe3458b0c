"""vmap's axis handling: in_axes/out_axes as ints, negatives, None and pytrees; axis_size; nesting; errors."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4, 5)).astype(np.float32)
B = rng.standard_normal((5,)).astype(np.float32)


def loop(f, xs, axis=0):
  return np.stack([np.asarray(f(tnp.array(np.take(xs, i, axis)))) for i in range(xs.shape[axis])])


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_in_axes_int_and_negative(axis):
  f = lambda x: (tnp.sin(x) * 2).sum(0)
  assert_close(tgfn.vmap(f, in_axes=axis)(tnp.array(A)), loop(f, A, axis), rtol=1e-6)


@pytest.mark.parametrize("out_axis", [0, 1, -1])
def test_out_axes(out_axis):
  f = lambda x: x[:2] * 3
  got = tgfn.vmap(f, out_axes=out_axis)(tnp.array(A))
  assert_close(got, np.moveaxis(loop(f, A), 0, out_axis))


def test_unmapped_arguments_and_pytree_axes():
  f = lambda d, b: d["x"] * b + d["y"].sum()
  got = tgfn.vmap(f, in_axes=({"x": 0, "y": None}, None))({"x": tnp.array(A[:, 0]), "y": tnp.array(B)}, tnp.array(B))
  want = A[:, 0] * B + B.sum()
  assert_close(got, want, rtol=1e-5)


def test_out_axes_none_for_unbatched_outputs_and_pytree_out_axes():
  f = lambda x: {"mapped": x * 2, "const": tnp.ones(2)}
  got = tgfn.vmap(f, out_axes={"mapped": 1, "const": None})(tnp.array(A[:, :, 0]))
  assert_close(got["mapped"], (A[:, :, 0] * 2).T)
  assert_close(got["const"], np.ones(2, np.float32))
  with pytest.raises(ValueError, match="out_axes=None.*depends on the mapped inputs"):
    tgfn.vmap(lambda x: x, out_axes=None)(tnp.array(B))


def test_unbatched_output_is_broadcast():
  got = tgfn.vmap(lambda x: tnp.ones(2))(tnp.array(A))
  assert_close(got, np.ones((3, 2), np.float32))


def test_nested_vmap_equals_double_loop():
  f = lambda x, y: (x * y).sum()
  got = tgfn.vmap(tgfn.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(tnp.array(A[0]), tnp.array(A[1]))
  want = np.array([[(A[0][i] * A[1][j]).sum() for i in range(4)] for j in range(4)], np.float32)
  assert_close(got, want, rtol=1e-5)


def test_axis_size_with_no_mapped_inputs():
  got = tgfn.vmap(lambda x: x + 1, in_axes=None, axis_size=3)(tnp.array(B))
  assert_close(got, np.broadcast_to(B + 1, (3, 5)))


def test_errors_are_clear():
  with pytest.raises(ValueError, match="inconsistent sizes.*shape \\(3, 4, 5\\).*shape \\(5,\\)"):
    tgfn.vmap(lambda a, b: a)(tnp.array(A), tnp.array(B))
  with pytest.raises(ValueError, match="in_axes 3 is out of range.*\\(3, 4, 5\\)"):
    tgfn.vmap(lambda a: a, in_axes=3)(tnp.array(A))
  with pytest.raises(ValueError, match="in_axes has 1 entries but .* got 2"):
    tgfn.vmap(lambda a, b: a, in_axes=(0,))(tnp.array(A), tnp.array(A))
  with pytest.raises(ValueError, match="needs at least one mapped input"):
    tgfn.vmap(lambda a: a, in_axes=None)(tnp.array(A))


def test_kwargs_are_mapped_over_axis_zero():
  got = tgfn.vmap(lambda x, *, scale: x * scale)(tnp.array(A[:, 0, 0]), scale=tnp.array(A[:, 1, 1]))
  assert_close(got, A[:, 0, 0] * A[:, 1, 1])


def test_per_example_gradients():
  w = tnp.array(B)
  xs = tnp.array(A[:, 0])

  def loss(w, x): return tnp.tanh((w * x).sum())

  per_example = tgfn.vmap(tgfn.grad(loss), in_axes=(None, 0))(w, xs)
  want = np.stack([(1 - np.tanh((B * A[i, 0]).sum()) ** 2) * A[i, 0] for i in range(3)])
  assert_close(per_example, want, rtol=1e-5)
