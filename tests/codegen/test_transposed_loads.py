"""Gathers that together read a block become row loads (tgfn/codegen/transposed_loads.py), and a square
block of them is transposed in registers with shuffles (tgfn/renderer/ctranspose.py): the same values as
NumPy and the PYTHON reference, in far fewer statements of C."""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.codegen.opts import OptOps
from tgfn.codegen.transposed_loads import transposed_loads
from tgfn.engine import realize as realize_mod
from tgfn.dtype import dtypes
from tgfn.uop.ops import AxisType, Ops, UOp
from tgfn.uop.symbolic import split_sum
from tests.codegen.test_opts import _compare, _with_device


def _kernels(monkeypatch, fn, *args):
  """The kernels `fn` compiles to on the CPU (C source), whatever device the suite runs on."""
  monkeypatch.setenv("DEV", "CPU")
  return tgfn.jit(fn).lower(*[tnp.array(a) for a in args]).kernels


def _scalar_loads(src: str) -> int:
  """Element loads `dataN[...]` on the right of an assignment: gathered lanes, one scalar each."""
  return len(re.findall(r"= data\d+\[", src))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("shape", [(256, 512), (264, 520), (250, 514), (64, 40)])
def test_a_transposing_copy_reads_rows_and_shuffles_them(dtype, shape, monkeypatch):
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  x = (np.random.default_rng(0).standard_normal(shape) * 100).astype(dtype)
  got = _with_device("CPU", monkeypatch, lambda: tnp.array(x).T + 0)
  np.testing.assert_array_equal(got, x.T)
  _compare(got, _with_device("PYTHON", monkeypatch, lambda: tnp.array(x).T + 0))
  (kernel,) = _kernels(monkeypatch, lambda a: a.T + 0, x)
  tiled = {o.op for o in kernel.opts} >= {OptOps.VECTOR, OptOps.UPCAST}  # a small or unvectorizable copy is not
  assert tiled or shape != (256, 512), kernel.opts
  if tiled and shape[0] % 8 == 0 and shape[1] % 8 == 0:  # whole 8x8 blocks
    assert "__builtin_shuffle" in kernel.source or "__builtin_shufflevector" in kernel.source, kernel.source[-3000:]
    assert _scalar_loads(kernel.source) == 0, kernel.source[-3000:]


def test_the_packed_transposed_operand_of_a_matmul_is_shuffled_and_right(monkeypatch):
  """dz @ w.T packs w.T into column panels: a transposing copy, now row loads and shuffles (against NumPy:
  the copy itself is checked against the PYTHON reference above; a matmul this size takes it minutes)."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  rng = np.random.default_rng(1)
  dz, w = rng.standard_normal((16, 512)).astype(np.float32), rng.standard_normal((256, 512)).astype(np.float32)
  run = lambda: tnp.array(dz) @ tnp.array(w).T  # noqa: E731
  got = _with_device("CPU", monkeypatch, run)
  np.testing.assert_allclose(got, dz @ w.T, rtol=2e-5, atol=2e-4)
  sources = [k.source for k in _kernels(monkeypatch, lambda a, b: a @ b.T, dz, w)]
  assert any("__builtin_shuffle" in s or "__builtin_shufflevector" in s for s in sources)


def _program_of(columns: list[int], lanes: int = 8, stride: int = 100):
  """A SINK storing gathers of `lanes` loads at `stride`, one per column."""
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 1)
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 0)
  base = UOp.range(4, 0, AxisType.GLOBAL) * 1000
  stores = []
  for n, c in enumerate(columns):
    loads = tuple(UOp(Ops.LOAD, dtypes.float32, (buf, base + (c + lane * stride))) for lane in range(lanes))
    gather = UOp(Ops.VECTORIZE, dtypes.float32.vec(lanes), loads)
    stores.append(UOp(Ops.STORE, None, (out, base + n * lanes, gather)))
  return UOp(Ops.SINK, None, tuple(stores))


def _row_loads(ast: UOp) -> list[UOp]:
  return [u for u in ast.toposort() if u.op is Ops.LOAD and u.dtype.count > 1]


def test_only_whole_runs_of_columns_become_rows():
  # 8 consecutive columns: one block of 8 rows of 8
  assert {u.dtype.count for u in _row_loads(transposed_loads(_program_of(list(range(8)))))} == {8}
  # 5 columns: a run of 4 is read as rows of 4, the fifth stays a gather
  five = transposed_loads(_program_of([0, 1, 2, 3, 4]))
  assert len(_row_loads(five)) == 8 and {u.dtype.count for u in _row_loads(five)} == {4}
  assert sum(1 for u in five.toposort() if u.op is Ops.VECTORIZE and all(s.op is Ops.LOAD for s in u.src)) == 1
  # three columns, or columns that do not follow one another: nothing is read beyond what was read
  assert transposed_loads(_program_of([0, 1, 2])) is _program_of([0, 1, 2])
  assert transposed_loads(_program_of([0, 2, 4, 6, 8, 10, 12, 14])) is _program_of([0, 2, 4, 6, 8, 10, 12, 14])


def test_each_row_reads_exactly_the_elements_its_gathers_read():
  ast = _program_of([3, 4, 5, 6, 7, 8, 9, 10])
  before = {split_sum(u.src[1])[1] for u in ast.toposort() if u.op is Ops.LOAD}
  after = set()
  for row in _row_loads(transposed_loads(ast)):
    start = split_sum(row.src[1])[1]
    after |= {start + i for i in range(row.dtype.count)}
  assert after == before
