"""STRICT_FLOAT=1 on reductions too short to be blocked: no partial sums in vector lanes and no fused
multiply-add, so every reduction rounds as the sequential float32 loop does (tgfn/codegen/policy.py)."""
from collections import OrderedDict

import numpy as np
import pytest

import tgfn.numpy as tnp


def sequential_float32_sum(values: np.ndarray) -> np.float32:
  total = np.float32(0)
  for v in values.astype(np.float32): total = np.float32(total + v)
  return total


@pytest.fixture
def strict(monkeypatch):
  monkeypatch.setenv("STRICT_FLOAT", "1")
  monkeypatch.setattr("tgfn.engine.realize._compiled", OrderedDict())


def test_rows_are_not_split_into_vector_lanes(device, strict):
  """1e8 + 1 rounds to 1e8, so each row sums to 0 in order. Summed in vector lanes (of 4, 8 or 16) the
  second row's 1e8 and -1e8 meet first, and the 1 survives."""
  rows = np.zeros((4, 64), np.float32)
  for row, (one_at, minus_at) in zip(rows, [(1, 63), (2, 17), (2, 33), (3, 9)]):
    row[0], row[one_at], row[minus_at] = 1e8, 1.0, -1e8
  want = [sequential_float32_sum(r) for r in rows]
  assert want == [0.0] * 4
  np.testing.assert_array_equal(np.asarray(tnp.array(rows).sum(axis=1)), want)
  assert [float(tnp.array(r).sum()) for r in rows] == want


def test_products_are_rounded_before_they_are_added(device, strict):
  """(1 + 2**-12)**2 rounds to 1 + 2**-11 in float32; a fused multiply-add keeps the 2**-24 and returns it."""
  x = np.array([-1.0, 1.0 + 2.0 ** -12], np.float32)
  y = np.array([1.0 + 2.0 ** -11, 1.0 + 2.0 ** -12], np.float32)
  want = sequential_float32_sum(x * y)
  assert want == 0.0
  assert float((tnp.array(x) * tnp.array(y)).sum()) == want
  assert float(tnp.dot(tnp.array(x), tnp.array(y))) == want
