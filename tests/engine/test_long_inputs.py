"""Inputs past the sizes where 32-bit indices wrap and sequential float sums lose precision."""
from collections import OrderedDict

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.codegen import policy


def test_long_float32_sum_and_mean_are_accurate():
  x = tnp.array(np.ones(20_000_000, np.float32))
  assert float(x.sum()) == 2e7   # one-by-one accumulation stops at 16777216
  assert float(x.mean()) == 1.0  # it was 0.839


@pytest.mark.parametrize("strict", [False, True])
def test_blocked_reduction_on_every_driver(device, strict, monkeypatch):
  """A small block size exercises the same blocking on the reference interpreter: a large first
  element swallows one-by-one additions of 1.0, but not whole blocks. STRICT_FLOAT=1 keeps the
  sequential order, bit for bit."""
  monkeypatch.setattr(policy, "REDUCE_BLOCK", 16)
  monkeypatch.setattr("tgfn.codegen.blocking.REDUCE_BLOCK", 16)
  monkeypatch.setattr("tgfn.engine.realize._compiled", OrderedDict())
  if strict: monkeypatch.setenv("STRICT_FLOAT", "1")
  data = np.ones(1001, np.float32)
  data[0] = 2.0 ** 24
  total = float(tnp.array(data).sum())
  if strict: assert total == 2.0 ** 24
  else: assert 2.0 ** 24 + 900 <= total <= 2.0 ** 24 + 1000


def test_ragged_blocks_read_nothing_past_the_end(device, monkeypatch):
  monkeypatch.setattr("tgfn.codegen.blocking.REDUCE_BLOCK", 16)
  monkeypatch.setattr("tgfn.engine.realize._compiled", OrderedDict())
  data = np.arange(1, 38, dtype=np.float32).reshape(1, 37)
  assert float(tnp.array(data).sum()) == data.sum()
  assert np.asarray(tnp.array(np.ones((3, 37, 2), np.float32)).sum((1, 2))).tolist() == [74.0] * 3


def test_arrays_past_two_to_the_31_elements():
  n = 2 ** 31 + 64
  y = tnp.ones((n,), dtype=tnp.uint8) * 3    # the loop bound and index need 64 bits
  assert np.asarray(y[-4:]).tolist() == [3, 3, 3, 3]


def test_deep_graphs_lower_without_raising_the_recursion_limit():
  import sys
  limit = sys.getrecursionlimit()
  x = tnp.array(np.ones(4, np.float32))
  for _ in range(5000): x = x * 1.0 + 0.0   # one kernel, 10,000 ops deep
  assert np.asarray(x).tolist() == [1.0] * 4
  assert sys.getrecursionlimit() == limit
