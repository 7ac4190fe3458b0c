"""STRICT_FLOAT=1 on reductions too short to be blocked: no partial sums in vector lanes and no fused
multiply-add, so every reduction rounds as the sequential float32 loop does (tgfn/codegen/policy.py)."""
from collections import OrderedDict

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.codegen import search
from tgfn.codegen.opts import OptOps, kernel_axes
from tgfn.uop.ops import AxisType
from tgfn_drivers import BackendUnavailable, require_backend

try:
  require_backend("LLVM")
  LLVM_MISSING = ""
except BackendUnavailable as e:
  LLVM_MISSING = str(e)


def sequential_float32_sum(values: np.ndarray) -> np.float32:
  total = np.float32(0)
  for v in values.astype(np.float32): total = np.float32(total + v)
  return total


@pytest.fixture
def strict(monkeypatch):
  monkeypatch.setenv("STRICT_FLOAT", "1")
  monkeypatch.setattr("tgfn.engine.realize._compiled", OrderedDict())


def rows_with_a_lost_one() -> np.ndarray:
  """1e8 + 1 rounds to 1e8, so each row sums to 0 in order. Summed in vector lanes (of 4, 8 or 16) the
  second row's 1e8 and -1e8 meet first, and the 1 survives."""
  rows = np.zeros((4, 64), np.float32)
  for row, (one_at, minus_at) in zip(rows, [(1, 63), (2, 17), (2, 33), (3, 9)]):
    row[0], row[one_at], row[minus_at] = 1e8, 1.0, -1e8
  assert [sequential_float32_sum(r) for r in rows] == [0.0] * 4
  return rows


def test_rows_are_not_split_into_vector_lanes(device, strict):
  rows = rows_with_a_lost_one()
  np.testing.assert_array_equal(np.asarray(tnp.array(rows).sum(axis=1)), [0.0] * 4)
  assert [float(tnp.array(r).sum()) for r in rows] == [0.0] * 4


def test_a_kernel_compiled_before_strict_float_was_set_is_not_reused(device, monkeypatch):
  monkeypatch.setattr("tgfn.engine.realize._compiled", OrderedDict())
  rows = rows_with_a_lost_one()
  tnp.array(rows).sum(axis=1).numpy()   # the default policy's kernel, kept in memory
  monkeypatch.setenv("STRICT_FLOAT", "1")
  np.testing.assert_array_equal(np.asarray(tnp.array(rows).sum(axis=1)), [0.0] * 4)


def test_beam_offers_no_vector_lanes_along_a_reduction(strict, monkeypatch, tmp_path):
  monkeypatch.setenv("DEV", "CPU")
  monkeypatch.setenv("BEAM", "2")
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(search, "MAX_CANDIDATES", 3)
  monkeypatch.setattr(search, "MAX_ROUNDS", 1)
  offered, real_actions = [], search._Search._actions
  def actions(self, ast):
    found = real_actions(self, ast)
    axes = kernel_axes(ast)
    offered.extend(o for o in found if o.op is OptOps.VECTOR and axes[o.axis].kind is AxisType.REDUCE)
    return found
  monkeypatch.setattr(search._Search, "_actions", actions)
  searches = search.SearchCounters.searches
  np.testing.assert_array_equal(np.asarray(tnp.array(rows_with_a_lost_one()).sum(axis=1)), [0.0] * 4)
  assert search.SearchCounters.searches > searches, "BEAM=2 did not search"
  assert offered == []


def test_products_are_rounded_before_they_are_added(device, strict):
  """(1 + 2**-12)**2 rounds to 1 + 2**-11 in float32; a fused multiply-add keeps the 2**-24 and returns it."""
  x = np.array([-1.0, 1.0 + 2.0 ** -12], np.float32)
  y = np.array([1.0 + 2.0 ** -11, 1.0 + 2.0 ** -12], np.float32)
  want = sequential_float32_sum(x * y)
  assert want == 0.0
  assert float((tnp.array(x) * tnp.array(y)).sum()) == want
  assert float(tnp.dot(tnp.array(x), tnp.array(y))) == want


@pytest.mark.skipif(bool(LLVM_MISSING), reason=LLVM_MISSING)
def test_llvm_keeps_the_strict_order_too(strict, monkeypatch):
  monkeypatch.setenv("DEV", "LLVM")
  test_products_are_rounded_before_they_are_added("LLVM", None)
  test_rows_are_not_split_into_vector_lanes("LLVM", None)
