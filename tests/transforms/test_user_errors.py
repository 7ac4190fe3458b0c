"""Messages and edge cases a new user meets: item assignment, grad of integers, softmax of nothing."""
import numpy as np
import pytest

import tgfn
import tgfn.nn as nn
import tgfn.numpy as tnp


def test_item_assignment_points_to_at_set():
  x = tnp.zeros((3, 3))
  with pytest.raises(TypeError, match=r"immutable.*x\[0\] = y, use x = x\.at\[0\]\.set\(y\)"):
    x[0] = 1
  with pytest.raises(TypeError, match=r"x\.at\[1, :2\]\.set\(y\)"):
    x[1, :2] = 1
  np.testing.assert_array_equal(np.asarray(x.at[0].set(1))[0], [1, 1, 1])


def test_grad_of_an_integer_output_names_the_dtype():
  with pytest.raises(TypeError, match="float scalar, got an Array of dtype int32 and shape \\(\\); cast it"):
    tgfn.grad(lambda x: (x * 2).astype(tnp.int32))(1.0)
  with pytest.raises(TypeError, match="dtype float32 and shape \\(2,\\); use vjp or jacrev"):
    tgfn.grad(lambda x: x * 2)(tnp.array([1.0, 2.0]))
  with pytest.raises(TypeError, match="requires float inputs.*int32"):
    tgfn.grad(lambda x: x * 2.0)(3)


@pytest.mark.parametrize("fn", [nn.softmax, nn.log_softmax])
@pytest.mark.parametrize("shape,axis", [((0,), -1), ((2, 0), -1), ((0, 3), 0), ((0, 3), 1)])
def test_softmax_of_an_empty_axis_is_empty(fn, shape, axis):
  out = fn(tnp.zeros(shape), axis=axis)
  assert out.shape == shape and out.dtype == tnp.float32
  assert np.asarray(out).shape == shape
  assert tgfn.jit(lambda v: fn(v, axis=axis))(tnp.zeros(shape)).shape == shape
