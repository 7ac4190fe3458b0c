"""An eager op with a Python scalar reuses the scalar's broadcast PARAM nodes (tgfn/array.py
_broadcast_scalar): a loop doing `x * 2 + 1` builds no new nodes for its scalars, and values that compare
equal but differ (-0.0 and 0.0) never share one."""
import gc
import weakref

import numpy as np
import pytest

import tgfn.array as array_module
import tgfn.numpy as tnp


def _scalar_operand(y):
  return y.uop.src[1]


def test_a_repeated_scalar_reuses_its_broadcast_nodes():
  x = tnp.ones(16)
  first = weakref.ref(_scalar_operand(x * 2.0))
  gc.collect()  # the graph that used it is gone
  assert first() is not None and _scalar_operand(x * 2.0) is first(), "the broadcast 2.0 should be kept and reused"
  np.testing.assert_array_equal(np.asarray(x * 2.0 + 1), np.full(16, 3.0, np.float32))


@pytest.mark.parametrize("a, b", [(0.0, -0.0), (-0.0, 0.0)])
def test_equal_but_different_scalars_do_not_share_nodes(a, b):
  x = tnp.ones(4, dtype=tnp.float32)
  ya, yb = x * a, x * b
  assert _scalar_operand(ya) is not _scalar_operand(yb)
  np.testing.assert_array_equal(np.asarray(1 / ya), 1 / (np.ones(4, np.float32) * np.float32(a)))
  np.testing.assert_array_equal(np.asarray(1 / yb), 1 / (np.ones(4, np.float32) * np.float32(b)))


def test_nan_and_large_shapes_are_built_each_time_and_overflow_still_raises():
  assert np.isnan(np.asarray(tnp.ones(3) * float("nan"))).all()
  big = tnp.ones(array_module.SCALAR_NODE_MAX_SIZE + 1)
  keys = set(array_module._scalar_nodes)
  np.testing.assert_array_equal(np.asarray(big + 3.0), np.full(big.shape, 4.0, np.float32))
  assert not [k for k in set(array_module._scalar_nodes) - keys if k[-1] == big.shape], "a large broadcast was kept"
  small = tnp.ones(3, dtype=tnp.int8)
  for _ in range(2):
    with pytest.raises(OverflowError): small * 1000


def test_the_kept_nodes_are_bounded():
  x = tnp.ones(2)
  for v in range(array_module.SCALAR_NODES + 10): x + float(v)
  assert len(array_module._scalar_nodes) <= array_module.SCALAR_NODES
