"""The work in the kernels of a training step (issue 8): each optimized kernel equals the PYTHON reference,
and the generated program does no more work than needed (counted in its source, not timed)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine import realize as realize_mod
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops
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


def _adam(p, g, m, v, lr=1e-3, b1=0.9, b2=0.999):
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  return p - lr * m / (tnp.sqrt(v) + 1e-8), m, v


def _bias_step(dz, x, p, m, v):  # Adam on a bias: its gradient a reduction that all three outputs read
  return _adam(p, (dz * (x > 0)).sum(0), m, v)


def _transposed_step(dz, x, p, m, v):  # the gradient read through a transpose and a reshape
  return _adam(p, (dz * x).sum(0).reshape(8, 4).T, m, v)


def _weight_step(dz, x, p, m, v):  # a contraction: tiled in a kernel of its own, the update after it
  return _adam(p, dz.T @ x, m, v)


# the kernels' names ("r..." reduces, "E..." is elementwise): a fused update is one reducing kernel
STEPS = {"bias": (_bias_step, [(64, 32), (64, 32), (32,), (32,), (32,)], ["r_32"]),
         "transposed": (_transposed_step, [(64, 32), (64, 32), (4, 8), (4, 8), (4, 8)], ["r_4_8"]),
         "weight": (_weight_step, [(64, 32), (64, 32), (32, 32), (32, 32), (32, 32)], None)}


@pytest.mark.parametrize("name", STEPS)
def test_reduction_read_by_an_update_group_joins_it(name, monkeypatch):
  """A reduction that only a multi-output kernel's members read, element for element, is computed inside
  that kernel (once per element): Adam's update of a bias is one kernel with its gradient."""
  fn, shapes, kernels = STEPS[name]
  rng = np.random.default_rng(0)
  inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  inputs[4] = inputs[4] ** 2  # v >= 0
  results = {}
  for device in ("CPU", "PYTHON"):
    monkeypatch.setenv("DEV", device)
    jitted = tgfn.jit(fn)
    results[device] = [np.asarray(o) for o in jitted(*[tnp.array(a) for a in inputs])]
    names = [k.name for k in jitted.lower(*[tnp.array(a) for a in inputs]).kernels]
    if kernels is None: assert "E_32_32" in names and sum(n.startswith("r") for n in names) == 1, names
    else: assert names == kernels
  for got, want in zip(results["CPU"], results["PYTHON"]): np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # reductions reorder (docs/compiler.md)


@pytest.mark.parametrize("name", ["bias", "transposed"])
def test_joined_reduction_is_computed_once(name):
  fn, shapes, _ = STEPS[name]
  rng = np.random.default_rng(0)
  outs = fn(*[tnp.array(rng.standard_normal(s).astype(np.float32)).realize() for s in shapes])
  [item] = create_schedule([o.uop for o in outs])
  assert item.kernel.n_outputs == 3
  assert sum(u.op is Ops.REDUCE for u in item.kernel.ast.toposort()) == 1


def _inside_loops_without_a_loop(linear) -> list:
  """The computed values placed inside a loop that depend on no loop: loop-invariant work done per trip."""
  depends: dict = {}
  depth, misplaced = 0, []
  for u in linear:
    if u.op is Ops.RANGE: depends[u], depth = True, depth + 1
    elif u.op is Ops.ENDRANGE: depth -= 1
    elif u.op in (Ops.DEFINE_ACC, Ops.ASSIGN, Ops.STORE): depends[u] = True
    else:
      depends[u] = any(depends.get(s, False) for s in u.src)
      if depth and not depends[u] and u.op not in (Ops.CONST, Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR): misplaced.append(u)
  return misplaced


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_loop_invariant_work_is_computed_once_before_the_loops(device, monkeypatch):
  """Adam's bias correction 1 - b1**t depends only on the step count: it is computed before the output
  loops open, not once per element (a pow: about 100 scalar ops), and the results still equal NumPy's."""
  monkeypatch.setenv("DEV", device)
  rng = np.random.default_rng(0)
  p, g, m, v = (tnp.array(rng.standard_normal((16, 32)).astype(np.float32)).realize() for _ in range(4))
  count = tnp.array(np.int32(3)).realize()
  correction = 1 - 0.9 ** count.astype(tnp.float32)
  outs = _adam(p, g, m, v * v)
  new_p = outs[0] / correction
  [item] = create_schedule([new_p.uop])
  linear = realize_mod.prepare_kernel(item.kernel, device).linear
  assert sum(u.op is Ops.RANGE for u in linear) >= 1
  assert _inside_loops_without_a_loop(linear) == []
  P, G, M, V = (np.asarray(a, np.float64) for a in (p, g, m, v))
  M2, V2 = 0.9 * M + 0.1 * G, 0.999 * V * V + 0.001 * G * G
  want = (P - 1e-3 * M2 / (np.sqrt(V2) + 1e-8)) / (1 - 0.9 ** 3)
  np.testing.assert_allclose(np.asarray(new_p), want, rtol=1e-5, atol=1e-6)
