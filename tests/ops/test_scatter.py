"""SCATTER, the data-dependent write behind `x.at[idx].add/set` and the gradient of every gather
(embeddings, take, take_along_axis): values against NumPy on both drivers (repeated positions
accumulate or the last one wins, out-of-range positions are dropped), empty operands and updates;
grad, jvp and vmap rules; jit against eager; and the work it does (one pass over the updates, never a
loop over the table per update)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.engine import realize as realize_mod
from tgfn.test_util import check_grads
from tgfn.uop.ops import AxisType, Ops, toposort


def _scatters(a):
  assert any(u.op is Ops.SCATTER for u in toposort([a.uop])), "expected a SCATTER in the graph"
  return a


CASES = [  # (array shape, index array, update shape or None for the indexed shape)
  ((7,), [0, 3, 3, 6, 3], None), ((4, 5), [[0, 1], [3, 3]], None), ((4, 5), [2, 2, 0], (3, 5)),
  ((3, 4, 2), [1, 1, 2, 0], None), ((5,), [], None), ((0,), [], None), ((6,), [-1, -6, 5], None),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.float16])
@pytest.mark.parametrize("shape,index,ushape", CASES)
def test_at_add_and_set_match_numpy(device, dtype, shape, index, ushape):
  rng = np.random.default_rng(0)
  x = (rng.standard_normal(shape) * 10).astype(dtype)
  idx = np.array(index, np.int32)
  target = x[idx].shape if ushape is None else ushape
  u = (rng.standard_normal(target) * 10).astype(dtype)
  added = x.copy()
  np.add.at(added, idx, u)
  out = tnp.array(x).at[tnp.array(idx)].add(tnp.array(u))
  assert_close(_scatters(out) if u.size else out, added)
  got = np.asarray(tnp.array(x).at[tnp.array(idx)].set(tnp.array(u)))
  expected = x.copy()
  for k, i in enumerate(idx.reshape(-1)):  # in order: the last of repeated positions wins
    expected[i] = u.reshape((-1,) + x.shape[1:])[k]
  np.testing.assert_array_equal(got, expected)


def test_out_of_range_positions_are_dropped_or_clipped():
  x = np.arange(6, dtype=np.float32)
  idx = np.array([0, 9, -9, 5])
  np.testing.assert_array_equal(tnp.array(x).at[idx].add(1.0, mode="drop"), x + [1, 0, 0, 0, 0, 1])
  np.testing.assert_array_equal(tnp.array(x).at[idx].add(1.0, mode="clip"), x + [2, 0, 0, 0, 0, 2])
  np.testing.assert_array_equal(tnp.array(x).at[idx].set(-1.0, mode="clip"), [-1, 1, 2, 3, 4, -1])
  # the primitive itself: positions are flat and never wrap
  out = tnp.array(x)._scatter(tnp.array([0, 6, -1, 2 ** 40, 5], dtype=tnp.int64), tnp.ones(5), Ops.ADD)
  np.testing.assert_array_equal(out, x + [1, 0, 0, 0, 0, 1])


def test_grad_jvp_and_second_order_against_finite_differences():
  pos = tnp.array([0, 2, 2, 7, -1, 4])
  x0, u0 = tnp.arange(5.0), tnp.array([1., 2., 3., 4., 5., 6.])
  for op in (Ops.ADD, None):
    check_grads(lambda x, u: x._scatter(pos, u, op) ** 2, (x0, u0), order=2)
  # setting: only the update that wins a position receives its cotangent
  g = tgfn.grad(lambda u: (tnp.arange(5.0)._scatter(pos, u, None) * tnp.arange(5.0)).sum())(tnp.ones(6))
  np.testing.assert_array_equal(g, [0, 0, 2, 0, 0, 4])


@pytest.mark.parametrize("op", [Ops.ADD, None])
def test_vmap_against_a_loop(op):
  rng = np.random.default_rng(1)
  pos = tnp.array([[0, 4, 4], [9, 1, -2], [3, 3, 3]])
  f = lambda x, p, u: x._scatter(p, u, op)  # noqa: E731
  xs = tnp.array(rng.standard_normal((3, 5)).astype(np.float32))
  us = tnp.array(rng.standard_normal((3, 3)).astype(np.float32))
  for axes in [(0, 0, 0), (None, 0, 0), (0, None, 0), (0, 0, None)]:
    args = [a[0] if ax is None else a for a, ax in zip((xs, pos, us), axes)]
    loop = np.stack([np.asarray(f(*[a if ax is None else a[i] for a, ax in zip(args, axes)])) for i in range(3)])
    assert_close(tgfn.vmap(f, in_axes=axes)(*args), loop)


def test_jit_equals_eager_and_keeps_the_input_when_donated():
  x = np.arange(8, dtype=np.float32)
  f = lambda x, i, u: x.at[i].add(u * 2)  # noqa: E731
  i, u = tnp.array([1, 1, 7]), tnp.array([1., 2., 3.])
  assert_close(tgfn.jit(f)(tnp.array(x), i, u), f(tnp.array(x), i, u))
  donated = tgfn.jit(f, donate_argnums=0)
  assert_close(donated(tnp.array(x), i, u), x + np.float32([0, 6, 0, 0, 0, 0, 0, 6]))
  # updates read from the donated operand at other positions must see its old values
  g = tgfn.jit(lambda x: x.at[tnp.array([0, 0, 1])].add(x[tnp.array([0, 0, 0])]), donate_argnums=0)
  assert_close(g(tnp.array(x + 1)), x + 1 + np.float32([2, 1, 0, 0, 0, 0, 0, 0]))


def test_an_embedding_gradient_does_not_loop_over_the_table(monkeypatch):
  """The gather's vjp is one pass over the looked-up rows (a sequential LOOP), not a compare of every
  table row with every id (O(ids x rows x features))."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  table = tnp.zeros((50_000, 16))
  ids = tnp.array(np.array([0, 7, 49_999, 3, 3], np.int32))
  grad = tgfn.jit(tgfn.grad(lambda t, i: (t[i] * 2.0).sum()))
  kernels = grad.lower(table, ids).kernels
  assert all(not (u.op is Ops.RANGE and u.src[0].arg >= 50_000 and u.kind is not AxisType.LOOP)
             for k in kernels for u in k.linear), "a loop over the table that is not the output copy"
  assert sum(k.flops for k in kernels) <= 50_000 * 16 + 100 * 5 * 16  # the zero fill, then per-update work
  expected = np.zeros((50_000, 16), np.float32)
  np.add.at(expected, [0, 7, 49_999, 3, 3], 2.0)
  assert_close(grad(table, ids), expected)


def test_complex_values_scatter_both_parts(device):
  """A complex value is two stores per update in the kernel (codegen lowers it to a pair of reals): both
  run in the same sequential loop."""
  x = np.array([1 + 1j, 2, 3], np.complex64)
  u = np.array([1j, 1, 2 - 1j], np.complex64)
  idx = np.array([0, 0, 2])
  added = x.copy()
  np.add.at(added, idx, u)
  assert_close(tnp.array(x).at[tnp.array(idx)].add(tnp.array(u)), added)
  np.testing.assert_array_equal(tnp.array(x).at[tnp.array(idx)].set(tnp.array(u)), np.complex64([1, 2, 2 - 1j]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_scalar_position_reads_the_copy_not_the_memory_before_it(device, dtype, monkeypatch):
  """An update at one traced position (x.at[i].add, the gradient of x[i]) reads the operand's copy at
  that position after the copy loop wrote it: a read hoisted above the loop returned the buffer's old
  bytes (2.8e209 for these), silently."""
  monkeypatch.setenv("POISON_MEMORY", "1")  # new buffers hold garbage, as reused blocks do in real runs
  x = np.array([0.4, -1.0, 2.0, 0.1], dtype)
  i = tnp.array(1, dtype=tnp.int32)
  np.testing.assert_allclose(np.asarray(tnp.asarray(x).at[i].add(tnp.asarray(dtype(1.5)))), x + [0, 1.5, 0, 0])
  grad = tgfn.grad(lambda v: v[i] * 0.25 + v[i + 1] * 0.75)(tnp.asarray(x))
  np.testing.assert_allclose(np.asarray(grad), [0.0, 0.25, 0.75, 0.0])
  np.testing.assert_allclose(np.asarray(tgfn.grad(lambda v: tnp.quantile(v, 0.3))(tnp.asarray(x))), [0, 0.1, 0, 0.9],
                             rtol=1e-6, atol=1e-7)
  program = tgfn.jit(lambda v, j: v.at[j].add(1.0)).lower(tnp.asarray(x), i).kernels[0].linear
  ends = [k for k, u in enumerate(program) if u.op is Ops.ENDRANGE and u.src[0].kind is AxisType.LOOP]
  out_reads = [k for k, u in enumerate(program) if u.op is Ops.LOAD and u.src[0].arg == 0]
  assert ends and out_reads and min(out_reads) > ends[0], "the output is read before its copy loop ends"
