"""Optimized kernels equal the reference interpreter: the heuristic's opt list and random other opt
lists, on a corpus of kernel shapes (contractions both ways, elementwise with casts and selects,
reductions along each axis, gathers through flips and pads, several dtypes)."""
import random
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.array import Array
from tgfn.codegen.opts import Opt, OptError, OptOps, apply_opts, kernel_axes
from tgfn.codegen.pipeline import optimize
from tgfn.device import Device
from tgfn.engine import realize as realize_mod
from tgfn.nn import functional as F
from tgfn.uop.ops import AxisType, Ops
from tests.conftest import panel_columns


def _data(shape, dtype, seed):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind == "f": return rng.standard_normal(shape).astype(dtype)
  return rng.integers(-50, 50, shape).astype(dtype)


CASES = {
  "matmul": (lambda a, b: a @ b, [((8, 32), "float32"), ((32, 32), "float32")]),
  "matmul_bT": (lambda a, b: a @ b.T, [((16, 32), "float32"), ((24, 32), "float32")]),
  # rows no tile amount divides: a ragged last tile (opts.py) repeats the last row
  "matmul_ragged": (lambda a, b: a @ b + 1, [((13, 40), "float32"), ((40, 32), "float32")]),
  "matmul_aT": (lambda a, b: a.T @ b, [((40, 11), "float32"), ((40, 16), "float32")]),
  "matmul_aT_narrow": (lambda a, b: a.T @ b, [((24, 64), "float32"), ((24, 10), "float32")]),
  # b packed into panels, a.T copied so that the depth runs contiguously (schedule/packing.py)
  "matmul_aT_packed": (lambda a, b: a.T @ b, [((24, 16), "float32"), ((24, 32), "float32")]),
  # 10 columns: b copied depth-contiguous, lanes along the depth (schedule/packing.py)
  "matmul_narrow": (lambda a, b: a @ b, [((64, 128), "float32"), ((128, 10), "float32")]),
  "matmul_bT_shallow": (lambda a, b: a @ b.T, [((64, 10), "float32"), ((48, 10), "float32")]),
  "matmul_f64": (lambda a, b: a @ b, [((4, 16), "float64"), ((16, 16), "float64")]),
  "matmul_int": (lambda a, b: a @ b, [((8, 16), "int32"), ((16, 16), "int32")]),
  "batched": (lambda a, b: tnp.einsum("bij,bjk->bik", a, b), [((2, 4, 8), "float32"), ((2, 8, 16), "float32")]),
  "elementwise": (lambda a, b: tnp.where(a > b, a * 2 - b, tnp.maximum(a, b)), [((4, 32), "float32"), ((4, 32), "float32")]),
  "casts": (lambda a, b: (a.astype(tnp.int32) * 3 + b) // 7, [((2, 48), "float32"), ((2, 48), "int32")]),
  "transcendental": (lambda a, b: tnp.exp(a) + tnp.sqrt(tnp.abs(b)), [((16, 16), "float32"), ((16, 16), "float32")]),
  "row_sum": (lambda a, b: (a * b).sum(1), [((8, 64), "float32"), ((8, 64), "float32")]),
  "col_sum": (lambda a, b: (a * b).sum(0), [((64, 16), "float32"), ((64, 16), "float32")]),
  "row_max": (lambda a, b: tnp.max(a - b, axis=1), [((8, 32), "float32"), ((8, 32), "float32")]),
  "full_sum": (lambda a, b: (a + b).sum(), [((16, 32), "float32"), ((16, 32), "float32")]),
  "flip_pad": (lambda a, b: tnp.pad(a[:, ::-1], ((0, 0), (8, 8))) + tnp.pad(b, ((0, 0), (8, 8))), [((4, 16), "float32"), ((4, 16), "float32")]),
  "transpose": (lambda a, b: a.T * 2 + b, [((16, 8), "int64"), ((8, 16), "int64")]),
  # data-dependent indices (int data in [-50, 50): negative, wrapped and clamped positions)
  "gather_rows": (lambda a, i: a[i], [((64, 32), "float32"), ((16,), "int32")]),
  "gather_1d": (lambda a, i: a[i], [((40,), "float32"), ((4, 32), "int32")]),
  "gather_int64": (lambda a, i: a[:, i] * 3, [((6, 48), "int64"), ((16,), "int32")]),
  "take_along": (lambda a, i: tnp.take_along_axis(a, i, 1, mode="clip"), [((8, 32), "float32"), ((8, 24), "int32")]),
  "gather_in_reduction": (lambda a, i: (a[i] * a[i[::-1]]).sum(1), [((48, 64), "float32"), ((8,), "int32")]),
  "gather_of_gather": (lambda a, i: a[i[i + 50]], [((100,), "float32"), ((32,), "int32")]),
  "softmax": (lambda a, b: tnp.exp(a - a.max(1, keepdims=True)) / tnp.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True) + b,
              [((4, 32), "float32"), ((4, 32), "float32")]),
  # a strided, padded convolution and its weight gradient: no load walks an axis contiguously (heuristic.py
  # vectorizes an output axis with a broadcast operand, gathering the other)
  "conv": (lambda x, w: F.conv2d(x, w, stride=2, padding=1), [((8, 4, 8, 8), "float32"), ((8, 4, 3, 3), "float32")]),
  # (a loss linear in w, so no forward convolution runs: the PYTHON reference is slow)
  "conv_weight_grad": (lambda x, w: tgfn.grad(lambda w: (F.conv2d(x, w, stride=2, padding=1) * x[:, :1, ::2, ::2]).sum())(w),
                       [((8, 4, 8, 8), "float32"), ((8, 4, 3, 3), "float32")]),
  # one kernel storing three values, the last two computed from the first (tgfn/schedule/grouping.py)
  "multi_output": (lambda a, b: (a * 0.9 + b, tnp.exp(a * 0.9 + b), (a * 0.9 + b) * b),
                   [((8, 24), "float32"), ((8, 24), "float32")]),
}


def _run(case: str, device: str, monkeypatch, choose_opts=None) -> np.ndarray:
  fn, specs = CASES[case]
  monkeypatch.setenv("DEV", device)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  if choose_opts is not None: monkeypatch.setattr(realize_mod, "default_opts", choose_opts)
  args = [tnp.array(_data(shape, dtype, seed)) for seed, (shape, dtype) in enumerate(specs)]
  outs = fn(*args)
  if not isinstance(outs, tuple): return np.asarray(outs)
  Array.realize_all(outs)
  return np.stack([np.asarray(o) for o in outs])


def _compare(got: np.ndarray, want: np.ndarray) -> None:
  assert got.dtype == want.dtype and got.shape == want.shape
  if got.dtype.kind == "f": np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)  # the float policy
  else: np.testing.assert_array_equal(got, want)


def _random_opts(seed: int):
  """A `default_opts` that draws a valid opt list per kernel from the action space."""
  rng = random.Random(seed)
  def choose(ast, renderer):
    axes = kernel_axes(ast)
    actions = [Opt(op, axis, amount) for op in (OptOps.UPCAST, OptOps.UNROLL, OptOps.VECTOR)
               for axis in range(len(axes)) for amount in (2, 3, 4, 6, 8)] + \
              [Opt(OptOps.THREAD, axis) for axis in range(len(axes))] + \
              [Opt(OptOps.BLOCK, axis, amount) for axis in range(len(axes)) for amount in (2, 3, 5)] + \
              [Opt(OptOps.SWAP, a, b) for a in range(len(axes)) for b in range(a + 1, len(axes))]
    rng.shuffle(actions)
    chosen: list[Opt] = []
    for opt in actions:
      if len(chosen) == 4: break
      try:
        optimize(ast, chosen + [opt])  # raises OptError when the opt does not fit
      except OptError:
        continue
      chosen.append(opt)
    return chosen
  return choose


@pytest.mark.parametrize("case", sorted(CASES))
def test_heuristic_kernels_equal_the_reference(case, monkeypatch):
  _compare(_run(case, "CPU", monkeypatch), _run(case, "PYTHON", monkeypatch))


# the PYTHON reference takes seconds per convolution: random opt lists for them are a slow run
SLOW_RANDOM = {"conv", "conv_weight_grad"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_RANDOM else c for c in sorted(CASES)])
def test_random_opt_lists_equal_the_reference(case, monkeypatch):
  want = _run(case, "PYTHON", monkeypatch)
  for seed in range(3):
    _compare(_run(case, "CPU", monkeypatch, _random_opts(seed)), want)


def test_heuristic_tiles_and_vectorizes_a_matmul(monkeypatch):
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  a, b = tnp.ones((64, 64)), tnp.ones((64, 64))
  pack, kernel = __import__("tgfn").jit(lambda a, b: a @ b).lower(a, b).kernels
  assert pack.name.startswith("E_1_4_64_16")  # b copied into panels of 16 columns first
  ops = [o.op for o in kernel.opts]
  # a 2-D tile of vector accumulators; no unrolled reduction under it (that only makes gcc spill)
  assert OptOps.VECTOR in ops and ops.count(OptOps.UPCAST) == 2 and OptOps.UNROLL not in ops, kernel.opts
  # the rows (the longer side of the tile) upcast first: each row's updates then stand together
  rows, cols = [o for o in kernel.opts if o.op is OptOps.UPCAST]
  assert rows.amount > cols.amount, kernel.opts
  assert ("__builtin_fma" in kernel.source or "__builtin_ia32_vfmadd" in kernel.source) and "vector_size" in kernel.source


def test_opts_are_checked():
  from tgfn.schedule.schedule import create_schedule
  x = tnp.ones((6, 10)).realize()
  ast = create_schedule([(x * 2).sum(1).uop])[-1].kernel.ast
  axes = kernel_axes(ast)
  assert [a.kind for a in axes] == [AxisType.GLOBAL, AxisType.REDUCE]
  with pytest.raises(OptError, match="does not split"): apply_opts(ast, [Opt(OptOps.UNROLL, 1, 4)])
  with pytest.raises(OptError, match="does not split"): apply_opts(ast, [Opt(OptOps.UPCAST, 0, 8)])
  with pytest.raises(OptError, match="UNROLL needs a reduction"): apply_opts(ast, [Opt(OptOps.UNROLL, 0, 2)])
  with pytest.raises(OptError, match="only an output axis"): apply_opts(ast, [Opt(OptOps.THREAD, 1)])
  with pytest.raises(OptError, match="has 2 axes"): apply_opts(ast, [Opt(OptOps.UPCAST, 5, 2)])
  assert repr(Opt(OptOps.UNROLL, 1, 5)) == "Opt(UNROLL, 1, 5)"


def test_swap_exchanges_the_nesting_of_two_output_loops():
  from tgfn.schedule.schedule import create_schedule
  x = tnp.ones((6, 10)).realize()
  ast = create_schedule([(x * 2 + 1).uop])[-1].kernel.ast
  def outer_size(opts):
    return next(u for u in optimize(ast, opts) if u.op is Ops.RANGE).src[0].arg
  assert outer_size([]) == 6 and outer_size([Opt(OptOps.SWAP, 0, 1)]) == 10
  with pytest.raises(OptError): apply_opts(ast, [Opt(OptOps.SWAP, 0, 0)])
  with pytest.raises(OptError): apply_opts(ast, [Opt(OptOps.SWAP, 0, 5)])


def test_block_cuts_an_output_loop_and_nests_its_inner_part_innermost():
  from tgfn.schedule.schedule import create_schedule
  x = tnp.ones((6, 10)).realize()
  ast = create_schedule([(x * 2 + 1).uop])[-1].kernel.ast
  def loop_sizes(opts):
    return [u.src[0].arg for u in optimize(ast, opts) if u.op is Ops.RANGE]
  assert loop_sizes([Opt(OptOps.BLOCK, 0, 3)]) == [2, 10, 3]  # rows in 2 blocks of 3, each under the columns
  assert loop_sizes([Opt(OptOps.BLOCK, 0, 4)]) == [2, 10, 4]  # a ragged last block
  assert loop_sizes([Opt(OptOps.BLOCK, 0, 3), Opt(OptOps.SWAP, 0, 1)]) == [10, 2, 3]
  with pytest.raises(OptError, match="does not split"): apply_opts(ast, [Opt(OptOps.BLOCK, 0, 7)])
  # the threads take the blocks
  assert loop_sizes([Opt(OptOps.THREAD, 1), Opt(OptOps.BLOCK, 1, 5)]) == [2, 6, 5]
  red = create_schedule([(x * 2).sum(1).uop])[-1].kernel.ast
  with pytest.raises(OptError, match="only an output loop"): apply_opts(red, [Opt(OptOps.BLOCK, 1, 2)])


def test_a_large_contraction_walks_its_rows_under_groups_of_panels(monkeypatch):
  """A 2048^2 matmul's column panels are cut into groups of about PANEL_GROUP_BYTES of B (BLOCK of the panel
  loop, its inner part innermost), rows walked inside each group; a 1024^2 one (4 MiB of B, too few groups to
  split between threads) is not cut."""
  from tgfn.codegen.heuristic import PANEL_GROUP_BYTES
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  jit = __import__("tgfn").jit
  _, big = jit(lambda a, b: a @ b).lower(tnp.ones((2048, 2048)), tnp.ones((2048, 2048))).kernels
  assert Opt(OptOps.BLOCK, 0, PANEL_GROUP_BYTES // (2048 * panel_columns(large=True) * 4)) in big.opts, big.opts
  assert big.opts[-1] == Opt(OptOps.THREAD, 0), big.opts  # the groups split between the threads
  _, small = jit(lambda a, b: a @ b).lower(tnp.ones((1024, 1024)), tnp.ones((1024, 1024))).kernels
  assert all(o.op is not OptOps.BLOCK for o in small.opts), small.opts


def test_a_copy_moving_much_memory_runs_on_the_threads(monkeypatch):
  """A kernel without a reduction is bound by memory: one moving COPY_THREAD_BYTES or more (the packing of a
  784x512 matmul operand: 1.6 MB read, 1.6 MB written) is split between the threads, a small one is not."""
  from tgfn.codegen.heuristic import COPY_THREAD_BYTES
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  jit = __import__("tgfn").jit
  pack, _ = jit(lambda a, b: a @ b).lower(tnp.ones((256, 784)), tnp.ones((784, 512))).kernels
  assert 2 * 784 * 512 * 4 >= COPY_THREAD_BYTES and Opt(OptOps.THREAD, 0) in pack.opts, pack.opts
  (small,) = jit(lambda x: x * 2 + 1).lower(tnp.ones((256, 256))).kernels
  assert all(o.op is not OptOps.THREAD for o in small.opts), small.opts


def test_a_grouped_contraction_equals_the_reference(monkeypatch):
  """Rows walked under groups of column panels compute the reference's product: the heuristic's group
  size lowered so that a small matmul's 8 panels form 4 groups."""
  from tgfn.codegen import heuristic
  monkeypatch.setattr(heuristic, "PANEL_GROUP_BYTES", 2 * 48 * panel_columns() * 4)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  a, b = _data((61, 48), "float32", 0), _data((48, 8 * panel_columns()), "float32", 1)
  (_, kernel) = __import__("tgfn").jit(lambda a, b: a @ b).lower(tnp.array(a), tnp.array(b)).kernels
  assert any(o.op is OptOps.BLOCK for o in kernel.opts), kernel.opts
  want = np.asarray(_with_device("PYTHON", monkeypatch, lambda: tnp.array(a) @ tnp.array(b)))
  got = np.asarray(_with_device("CPU", monkeypatch, lambda: tnp.array(a) @ tnp.array(b)))
  _compare(got, want)
  np.testing.assert_allclose(got, a @ b, rtol=2e-5, atol=1e-5)


def _with_device(device, monkeypatch, fn):
  monkeypatch.setenv("DEV", device)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  return np.asarray(fn())


def _ragged_tile(ast, renderer):
  """A 6x16 register tile over rows that 6 does not divide, rows upcast first (row-major updates)."""
  return [Opt(OptOps.VECTOR, 1, 8), Opt(OptOps.UPCAST, 0, 6), Opt(OptOps.UPCAST, 1, 2)]


def test_a_ragged_tile_repeats_the_last_row(monkeypatch):
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  monkeypatch.setattr(realize_mod, "default_opts", _ragged_tile)
  a, b = _data((13, 40), "float32", 0), _data((40, 16), "float32", 1)
  np.testing.assert_allclose(np.asarray(tnp.array(a) @ tnp.array(b)), a @ b, rtol=2e-5, atol=1e-5)


def _ast_of(fn, shape):
  from tgfn.schedule.schedule import create_schedule
  x = tnp.ones(shape).realize()
  return create_schedule([fn(x).uop])[-1].kernel.ast


def test_a_ragged_tile_updates_a_donated_buffer_in_place(monkeypatch):
  """The repeated last rows read the donated weights before any row is stored (linearize.py): reading
  after the first store would subtract the gradient twice."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  monkeypatch.setattr(realize_mod, "default_opts", _ragged_tile)
  w, x, g = _data((13, 16), "float32", 0), _data((40, 13), "float32", 1), _data((40, 16), "float32", 2)
  step = __import__("tgfn").jit(lambda w, x, g: w - 0.5 * (x.T @ g), donate_argnums=0)
  got = np.asarray(step(tnp.array(w), tnp.array(x), tnp.array(g)))
  np.testing.assert_allclose(got, w - 0.5 * (x.T @ g), rtol=2e-5, atol=1e-5)


def test_tile_updates_stand_next_to_their_operands(monkeypatch):
  """In a register tile's reduction loop each update's operands are computed just before it (the C
  compiler then keeps one broadcast row live, not the whole tile's operands): a 6x16 tile's loop body
  alternates loads and updates instead of loading everything first."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  from tgfn.codegen.pipeline import scalar_passes
  from tgfn.device import Device
  ast = scalar_passes(_ast_of(lambda x: x @ x, (48, 48)), Device["CPU"].renderer)
  linear = optimize(ast, _ragged_tile(ast, None))
  inner = max(i for i, u in enumerate(linear) if u.op is Ops.RANGE)
  body = [u.op for u in linear[inner:]]
  first_assign = body.index(Ops.ASSIGN)
  loads_after = sum(1 for op in body[first_assign:body.index(Ops.ENDRANGE)] if op is Ops.LOAD)
  assert loads_after >= 5, body  # the other five rows' broadcasts come after the first row's updates


def test_a_copy_into_panels_reads_blocks_of_rows(monkeypatch):
  """B's copy into panels walks its depth inside the panels, a row 4 KiB apart per step: the heuristic
  swaps the two loops and reads 8 rows at a time."""
  from tgfn.codegen.heuristic import hand_coded_opts
  from tgfn.codegen.pipeline import scalar_passes
  from tgfn.device import Device
  from tgfn.schedule.schedule import create_schedule
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  a, b = tnp.ones((8, 64)).realize(), tnp.ones((64, 1024)).realize()
  pack = create_schedule([(a @ b).uop])[0].kernel.ast
  assert [u.size for u in kernel_axes(pack)] == [64, 64, 16]  # panels, depth, columns of a panel
  opts = hand_coded_opts(scalar_passes(pack, Device["CPU"].renderer), 32, 16)
  assert opts[1:] == [Opt(OptOps.SWAP, 0, 1), Opt(OptOps.UPCAST, 0, 8)], opts
  x, w = _data((8, 64), "float32", 0), _data((64, 1024), "float32", 1)
  np.testing.assert_allclose(np.asarray(tnp.array(x) @ tnp.array(w)), x @ w, rtol=2e-5, atol=1e-5)


def test_narrow_and_shallow_contractions_are_vectorized(monkeypatch):
  """x.T @ g with 10 output columns vectorizes the rows (its loads walk them; each output is stored
  once), and w.T with 10 rows of depth is still packed into panels, so a @ w.T vectorizes its columns."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  jit = __import__("tgfn").jit
  a, g = tnp.ones((256, 512)), tnp.ones((256, 10))
  (kernel,) = jit(lambda a, g: a.T @ g).lower(a, g).kernels
  assert Opt(OptOps.VECTOR, 0, 8) in kernel.opts or Opt(OptOps.VECTOR, 0, 16) in kernel.opts, kernel.opts
  d, w = tnp.ones((256, 10)), tnp.ones((512, 10))
  pack, kernel = jit(lambda d, w: d @ w.T).lower(d, w).kernels
  assert pack.name.startswith("E_1_32_10_16"), pack.name
  assert any(o.op is OptOps.VECTOR for o in kernel.opts) and any(o.op is OptOps.UPCAST for o in kernel.opts), kernel.opts
  # a @ w with 10 columns: lanes along the depth. w is first copied depth-contiguous ([column][depth]), so
  # each lane vector of either operand is one load, never a gather of one scalar per lane
  copy, kernel = jit(lambda a, w: a @ w).lower(tnp.ones((256, 512)), tnp.ones((512, 10))).kernels
  assert copy.name.startswith("E_1_10_512"), copy.name
  assert any(o.op is OptOps.VECTOR and o.axis == 2 for o in kernel.opts), kernel.opts
  body = kernel.source[kernel.source.index(f"void {kernel.name}("):]
  assert "vector_size" in kernel.source and "{val" not in body, "a lane vector assembled from scalars (a gather)"
  # a few rows do not repay the copy
  kernels = jit(lambda a, w: a @ w).lower(tnp.ones((4, 512)), tnp.ones((512, 10))).kernels
  assert len(kernels) == 1, [k.name for k in kernels]


def test_convolution_kernels_are_vectorized(monkeypatch):
  """The conv step's second convolution (bench/conv_step.py): its forward, input-gradient and weight-gradient
  contractions read windows a stride apart and weights a kernel apart, so no load walks any axis
  contiguously. Each is still vectorized, along an output axis one operand does not move along (loaded once
  and broadcast, the other gathered), under a register tile that reuses each gather."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  x, w = tnp.ones((64, 8, 8, 8)), tnp.ones((16, 8, 3, 3))
  loss = lambda x, w: (F.conv2d(x, w, stride=2, padding=1) ** 2).sum()  # noqa: E731
  kernels = tgfn.jit(tgfn.grad(loss, argnums=(0, 1))).lower(x, w).kernels
  contractions = [k for k in kernels if k.name.startswith("r_") and len(k.name.split("_")) > 3]
  assert len(contractions) >= 3, [k.name for k in kernels]
  for k in contractions:
    assert any(o.op is OptOps.VECTOR for o in k.opts) and any(o.op is OptOps.UPCAST for o in k.opts), (k.name, k.opts)
    assert "vector_size" in k.source, k.name


def test_a_transposed_row_operand_is_copied_depth_contiguous(monkeypatch):
  """x.T @ g reads x a row apart per step of the depth: x.T is copied first (a transposing copy, its
  gathers upcast over whole cache lines), then the contraction reads it as it reads x @ w."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  x, g = tnp.ones((256, 784)), tnp.ones((256, 512))
  kernels = __import__("tgfn").jit(lambda x, g: x.T @ g).lower(x, g).kernels
  copy = next(k for k in kernels if k.name.startswith("E_784_1_256"))
  assert any(o.op is OptOps.UPCAST for o in copy.opts) and any(o.op is OptOps.VECTOR for o in copy.opts), copy.opts
  assert len(kernels) == 3 and kernels[-1].name.startswith("r_784_512"), [k.name for k in kernels]


def test_gathered_lanes_stay_eight_wide_on_wide_vectors(monkeypatch):
  """With 64-byte vectors (AVX-512) a transposing copy gathers its lanes one scalar at a time: it keeps 8
  lanes (an 8x8 block, not 16x16: a quarter of the C), while a contiguous copy takes all 16."""
  from tgfn.codegen.heuristic import GATHER_LANES, hand_coded_opts
  from tgfn.codegen.pipeline import scalar_passes
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  vectors = lambda fn: [o.amount for o in hand_coded_opts(scalar_passes(_ast_of(fn, (512, 256)), Device["CPU"].renderer), 64, 32)
                        if o.op is OptOps.VECTOR]  # noqa: E731
  assert vectors(lambda x: x.T * 2) == [GATHER_LANES] == [8]
  assert vectors(lambda x: x * 2) == [16]
  # the kernels whose lanes gather or scatter, on this machine's CPU driver against the PYTHON reference: a
  # transposing copy, and a 10-column weight gradient fused with its update (rows in the lanes, w scattered)
  x, g, w = _data((64, 128), "float32", 0), _data((64, 10), "float32", 1), _data((128, 10), "float32", 2)
  runs = (lambda: tnp.array(x).T * 2, lambda: tnp.array(w) - 0.01 * (tnp.array(x).T @ tnp.array(g)))
  got = [_with_device("CPU", monkeypatch, run) for run in runs]
  for run, cpu_result in zip(runs, got): _compare(cpu_result, _with_device("PYTHON", monkeypatch, run))
  np.testing.assert_array_equal(got[0], x.T * 2)
  np.testing.assert_allclose(got[1], w - 0.01 * (x.T @ g), rtol=2e-5, atol=1e-5)


def test_a_kernel_computing_in_64_bits_takes_lanes_of_64_bits(monkeypatch):
  """A float32 kernel whose values pass through float64 (JAX's fused multiply-add emulated in random.normal)
  gets the lanes of a 64-bit vector, 8 on AVX-512, not 16: gcc splits 16-lane float64 vectors into pieces and
  took 20x longer on them (a 12 K-element normal sample: 10 s against 0.5 s of gcc, and the kernel ran 2.6x
  slower). Plain float32 math keeps 16 lanes; float64 values and uint64 bits take 8; the sample is JAX's."""
  from tgfn.codegen.heuristic import hand_coded_opts
  from tgfn.codegen.pipeline import scalar_passes
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  vectors = lambda fn: [o.amount for o in hand_coded_opts(scalar_passes(_ast_of(fn, (512, 256)), Device["CPU"].renderer), 64, 32)
                        if o.op is OptOps.VECTOR]  # noqa: E731
  assert vectors(lambda x: tnp.exp(x) * 2) == [16]
  assert vectors(lambda x: (x.astype("float64") * 3).astype("float32")) == [8]
  assert vectors(lambda x: (x.astype("uint64") << 3).astype("float32")) == [8]
  import tgfn
  sample = tgfn.random.normal(tgfn.random.PRNGKey(0), (64, 192))
  expected = np.array([1.6226422, 2.0252647, -0.43359444, -0.07861735])  # jax.random.normal(PRNGKey(0), (64, 192))[0, :4]
  np.testing.assert_allclose(np.asarray(sample)[0, :4], expected, rtol=1e-6)


def test_a_small_contraction_keeps_a_small_tile(monkeypatch):
  """A contraction doing little work (the MLP step's 10-class kernels: tens of microseconds) keeps its
  register tile to SMALL_TILE accumulators, since each one adds to the C of its epilogue; a large one keeps
  the full tile. Both equal the PYTHON reference."""
  from tgfn.codegen.heuristic import SMALL_TILE, hand_coded_opts
  from tgfn.codegen.pipeline import scalar_passes
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  renderer = Device["CPU"].renderer

  def accumulators(fn, *shapes):
    from tgfn.schedule.schedule import create_schedule
    args = [tnp.ones(s).realize() for s in shapes]
    kernel = create_schedule([fn(*args).uop])[-1].kernel  # the contraction (after any copy of an operand)
    opts = hand_coded_opts(scalar_passes(kernel.ast, renderer), 64, 32)
    return int(np.prod([o.amount for o in opts if o.op is OptOps.UPCAST]))

  # the last layer's weight gradient fused with its update: w (512, 10) - lr * h.T @ g over a batch of 256
  assert 1 < accumulators(lambda w, h, g: w - 0.01 * (h.T @ g), (512, 10), (256, 512), (256, 10)) <= SMALL_TILE
  assert accumulators(lambda a, b: a @ b, (256, 784), (784, 512)) > SMALL_TILE
  h, g, w = _data((96, 64), "float32", 0), _data((96, 10), "float32", 1), _data((64, 10), "float32", 2)
  run = lambda: tnp.array(w) - 0.01 * (tnp.array(h).T @ tnp.array(g))  # noqa: E731
  got = _with_device("CPU", monkeypatch, run)
  _compare(got, _with_device("PYTHON", monkeypatch, run))
  np.testing.assert_allclose(got, w - 0.01 * (h.T @ g), rtol=2e-5, atol=1e-5)


def test_a_large_tile_is_four_vectors_by_four_rows_on_32_registers():
  """With 32 vector registers a large contraction's tile is 4 rows by 4 vectors (4 loads of B and 4
  broadcasts of A per step of the depth for 16 multiply-adds), rows outer; with 16 it stays 6 rows by 2
  vectors; a small contraction keeps its small tile either way."""
  from tgfn.codegen.heuristic import hand_coded_opts
  from tgfn.codegen.pipeline import scalar_passes
  from tgfn.schedule.schedule import create_schedule
  def tile(n, vector_bytes, registers):
    a, b = tnp.ones((n, n)).realize(), tnp.ones((n, n)).realize()
    ast = scalar_passes(create_schedule([(a @ b).uop])[-1].kernel.ast, Device["CPU"].renderer)
    return [o for o in hand_coded_opts(ast, vector_bytes, registers) if o.op is OptOps.UPCAST]
  assert tile(1024, 64, 32) == [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4)]
  assert tile(1024, 32, 16) == [Opt(OptOps.UPCAST, 1, 6), Opt(OptOps.UPCAST, 0, 2)]
  assert tile(64, 64, 32) == [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 2)]


def test_affine_indices_are_read_without_splitting_the_kernel(monkeypatch):
  """Where every index moves by a fixed stride along an axis, the heuristic reads its lanes' strides off the
  indices; it splits the axis and simplifies the kernel only where some index is not affine in it (a packed
  panel's column). Both ways choose the same vector axis."""
  import tgfn.codegen.heuristic as heuristic
  from tgfn.codegen.pipeline import scalar_passes
  from tgfn.schedule.schedule import create_schedule
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  rewrites = []
  real_rewrite = heuristic.graph_rewrite
  monkeypatch.setattr(heuristic, "graph_rewrite", lambda *a, **k: (rewrites.append(1), real_rewrite(*a, **k))[1])
  renderer = Device["CPU"].renderer
  for fn, vector in ((lambda x: x * 2 + 1, Opt(OptOps.VECTOR, 1, 16)), (lambda x: x.T * 2, Opt(OptOps.VECTOR, 1, 8)),
                     (lambda x: x.sum(axis=1), Opt(OptOps.VECTOR, 1, 16))):
    hand_opts = heuristic.hand_coded_opts(scalar_passes(_ast_of(fn, (512, 256)), renderer), 64, 32)
    assert hand_opts[:1] == [vector], hand_opts
  assert rewrites == []
  a, b = tnp.ones((8, 64)).realize(), tnp.ones((64, 1024)).realize()
  product = create_schedule([(a @ b).uop])[-1].kernel.ast  # reads B from its panels
  product_opts = heuristic.hand_coded_opts(scalar_passes(product, renderer), 64, 32)
  assert product_opts[:2] == [Opt(OptOps.SWAP, 0, 1), Opt(OptOps.VECTOR, 0, 16)], product_opts
  assert rewrites
