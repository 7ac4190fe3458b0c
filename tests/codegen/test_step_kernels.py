"""The work in the kernels of a training step (issue 8): each optimized kernel equals the PYTHON reference,
and the generated program does no more work than needed (counted in its source, not timed)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine import realize as realize_mod
from tests.codegen.test_vector_ops import FLOATS, WIDE_INTS, _check, _pair, _run

WIDENED_BOOL = "(-__builtin_convertvector("  # a bool vector widened from its 0/1 bytes into a select mask


def _selects_from_bytes(fn, inputs, monkeypatch) -> int:
  _, sources = _run(fn, inputs, "CPU", monkeypatch)
  return sum(s.count(WIDENED_BOOL) for s in sources)


@pytest.mark.parametrize("dtype", FLOATS + WIDE_INTS)
def test_select_on_negated_comparisons_uses_masks(dtype, monkeypatch):
  """`a == b` is `(a != b) != True` and `p != q` on bools compares two comparisons: a select on either
  combines the comparison masks, never through 0/1 bytes (gcc narrows int lanes to bytes one at a time:
  the ReLU gradient ran 5x slower)."""
  def fn(a, b):
    p, q = a < b, b < a
    return tnp.where(a == b, a, b) + tnp.where(p != q, b, a) + tnp.where(tnp.logical_not(p), a, b)
  _check(fn, _pair(dtype), monkeypatch)
  assert _selects_from_bytes(fn, _pair(dtype), monkeypatch) == 0


def test_relu_gradient_uses_masks(monkeypatch):
  """The gradient of maximum(x, 0) (half at ties) selects on x > 0 and x == 0: masks only."""
  def fn(x, g):
    return tgfn.vjp(lambda v: tnp.maximum(v, 0.0), x)[1](g)[0]
  _check(fn, _pair("float32"), monkeypatch)
  assert _selects_from_bytes(fn, _pair("float32"), monkeypatch) == 0


def _threaded_kernels(fn, shapes, monkeypatch) -> list[bool]:
  monkeypatch.setenv("DEV", "CPU")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  rng = np.random.default_rng(0)
  tgfn.jit(fn)(*[tnp.array(rng.standard_normal(s).astype(np.float32)) for s in shapes]).block_until_ready()
  return [("tg_parallel_for(" in k.source) for k in realize_mod._compiled.values()]


def test_small_matmul_runs_on_one_thread(monkeypatch):
  """A 64x128x128 matmul (the main job's hidden layer) is 2M loads but 23 us of vector work on one core:
  waking the worker pool made it 58 us."""
  assert not any(_threaded_kernels(lambda a, b: a @ b, [(64, 128), (128, 128)], monkeypatch))


def test_large_matmul_and_long_reduction_use_threads(monkeypatch):
  assert any(_threaded_kernels(lambda a, b: a @ b, [(256, 512), (512, 512)], monkeypatch))
  # 8 MB read by a vectorized row sum: bound by memory, which the second core speeds up
  assert all(_threaded_kernels(lambda a: a.sum(1), [(2048, 1024)], monkeypatch))
