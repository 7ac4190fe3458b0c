"""Kernel counts for representative programs: fusion is a contract, not an accident."""
import numpy as np

import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.engine.realize import Counters, with_realized
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops


def realized(*shape, seed=0):
  return tnp.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).realize()


def n_kernels(x) -> int: return len(create_schedule([x.uop]))


def test_elementwise_chain_with_reduction_is_one_kernel():
  a, b, c = realized(4, 5), realized(4, 5, seed=1), realized(4, 5, seed=2)
  assert n_kernels(((a * b) + c).sum(1)) == 1


def test_reduction_with_elementwise_consumer_is_one_kernel():
  a = realized(4, 5)
  assert n_kernels(tnp.sqrt(a.sum(1) * 2 + 1)) == 1


def test_stable_softmax_is_at_most_three_kernels(device):
  a = realized(3, 6)
  e = tnp.exp(a - a.max(-1, keepdims=True))
  out = e / e.sum(-1, keepdims=True)
  assert n_kernels(out) <= 3
  x = np.asarray(a)
  ref = np.exp(x - x.max(-1, keepdims=True))
  assert_close(out, ref / ref.sum(-1, keepdims=True), rtol=1e-5)


def test_movement_ops_make_no_kernel():
  a = realized(4, 6)
  moved = a.reshape(6, 4).T[1:3, ::-1].reshape(-1)
  assert n_kernels(moved) == 1  # the single kernel is the copy that materializes the result
  assert n_kernels(moved * 2 + 1) == 1
  assert n_kernels(moved * 2 + a.sum()) == 2  # a broadcast reduction gets a kernel of its own


def test_broadcast_reduction_is_computed_once_not_per_element():
  a = realized(8, 8)
  centered = a - a.mean(1, keepdims=True)
  assert n_kernels(centered) == 2


def test_realized_values_are_reused_not_recomputed(device):
  a = realized(4, 4)
  s = (a * 3).sum(0)
  later = s + 1           # built on the lazy s
  s.realize()
  graph = with_realized(later.uop)
  assert [u for u in graph.toposort() if u.op is Ops.REDUCE_AXIS] == []  # s is loaded, not recomputed
  before = Counters.kernels_launched
  assert_close(later, (np.asarray(a) * 3).sum(0) + 1, rtol=1e-6)
  assert Counters.kernels_launched - before == 1


def test_long_elementwise_chains_fuse_without_hitting_the_recursion_limit():
  x = tnp.array([1.0])
  for _ in range(3000): x = x * 1.0001 + 0.1
  want = np.float32(1.0)
  for _ in range(3000): want = np.float32(want * np.float32(1.0001) + np.float32(0.1))
  assert_close(x, np.array([want]), rtol=1e-5)
