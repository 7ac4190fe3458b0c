"""The hand-coded optimizer: a good opt list for a kernel without searching.

It reads the kernel's memory access pattern -- each load's stride along each axis -- and picks:
  - a VECTOR axis: the output axis that the store and some load walk contiguously (elementwise
    kernels, the columns of a matmul), else (when the float policy allows reordering) a reduction
    axis that the loads walk contiguously (row sums, dot products of rows); at most GATHER_LANES wide
    where a load gathers the lanes or the store scatters them (wider vectors only add C);
  - a register tile for reductions: UPCAST the axes along which some operand does not change, so each
    value loaded is used for several outputs (a matmul's 2-D block of accumulators), within the
    register budget;
  - UNROLL of the innermost reduction axis (accumulated in the original order) when there is no tile;
  - for a tiled contraction: the column panels outside the rows (SWAP), and for a large one the panels in
    groups walked innermost under the rows (BLOCK), so the tile's rows of A are reused from cache;
  - THREAD on the outermost output axis when the kernel does enough work to pay for waking threads.
GPU-style devices (OpenCL, CUDA) take only `work_group_opts`: work groups along the first kernel id.
"""
from __future__ import annotations

import math
from typing import Optional

from tgfn.codegen.opts import VECTOR_DTYPES, Opt, OptOps, apply_opt, kernel_axes
from tgfn.codegen.policy import strict_float
from tgfn.dtype import dtypes
from tgfn.uop.ops import AxisType, GroupOp, Ops, UOp, graph_rewrite, toposort
from tgfn.uop.symbolic import split_sum, symbolic

# a kernel doing less work than this (loop iterations x loads, per vector lane group when a reduction is
# vectorized) runs on the calling thread: below about 250 us of work, waking the worker pool costs as much
# as it saves (tgfn_drivers/_cpu_threads.py)
THREAD_MIN_WORK = 2_000_000
# ... unless it reads this many bytes: a long reduction is bound by memory, which a second core speeds up
THREAD_MIN_BYTES = 2_500_000
# ... and a kernel without a reduction (a copy, packing, an elementwise op) when it reads and writes this
# many bytes together: in a training step its input was written moments before by other kernels, often on
# the other core, and comes from L3. The MLP step's packings of w1 and w2 took 259 and 347 us there (52 and
# 82 in a loop that keeps them in L2); split between the two cores, 166 and 146, and its transposing copies
# of x and h1 114 and 96 -> 44 and 38 (1.5 MB instead of 1 left the second on one core: the step 4% slower)
COPY_THREAD_BYTES = 1_000_000
# vector lanes that some load gathers (or the store scatters) one scalar at a time: wider vectors do not
# speed the gather and multiply the C. On AVX-512 the MLP step's transposing copies (16x16 blocks of scalar
# loads), its 10-class epilogues and the packing of a transposed operand were 5 kernels of 30-35 K characters
# and 0.47 s of gcc's 0.67 CPU-s; at 8 lanes (the AVX2 layout) the step is 179 K characters instead of 274 K,
# gcc takes 0.38 CPU-s, its cold first call 0.70 s instead of 1.01 (5 alternating cold processes each), and
# the step runs as fast
GATHER_LANES = 8
# a register tile or an unrolled reduction saves at most microseconds on a kernel doing less work than
# this, and multiplies the C the compiler must digest: the MLP step's five such kernels (softmax rows of
# 10 classes, the loss) took 0.3 s of its 1 s of gcc time with them; the step's run time did not change
TILE_MIN_WORK = 65_536
# a contraction doing less work than this runs in tens of microseconds whatever its tile; its tile is kept
# to SMALL_TILE accumulators, since every accumulator adds its share of the epilogue's C (a gathered update,
# a horizontal sum). The MLP step's two 10-class kernels with 10- and 16-accumulator tiles: 33 K characters
# of C, ~70 ms of gcc and ~30 ms of codegen; with 5 and 8 they ran within 8 us of that per step in half
# the compile time
SMALL_TILE_WORK = 16_000_000
SMALL_TILE = 8
# with 32 vector registers (AVX-512) a large tile is 4 vectors wide and 4 rows deep: per step of the depth 4
# loads of B and 4 broadcasts of A feed 16 multiply-adds, against 2 loads and 8 broadcasts for the 8x2 tile
# (1024^2 matmul 10.72 -> 10.21 ms, 2048^2 84.2 -> 81.0, kernels timed alone and interleaved; the same C size)
WIDE_TILE_REGISTERS, WIDE_TILE_VECTORS, WIDE_TILE_ACCUMULATORS = 32, 4, 16


def stride(idx: UOp, rng: UOp) -> Optional[int]:
  """How far `idx` moves when `rng` steps by one: 0 if it does not depend on rng, None if not affine."""
  terms, _ = split_sum(idx)
  coeff = 0
  for term, c in terms:
    if term is rng: coeff += c
    elif rng in toposort([term]): return None
  return coeff


def _largest_divisor(size: int, choices: tuple[int, ...]) -> int:
  return next((c for c in choices if size % c == 0), 1)


# a tile that does not divide its axis recomputes the last element for the missing ones (opts.py):
# worth it while that adds at most this fraction of the axis
RAGGED_WASTE = 0.05


def _tile_amount(size: int, cap: int, ragged: bool) -> int:
  """The tile length along an axis of `size`: the largest of 8, 6, 5, 4, 3, 2 within `cap` that divides it,
  unless `cap` itself (a tile that does not divide, `ragged`) wastes little and is longer."""
  exact = _largest_divisor(size, tuple(a for a in (8, 6, 5, 4, 3, 2) if a <= cap))
  if ragged and cap > exact and size >= cap and -size % cap <= RAGGED_WASTE * size: return cap
  return exact


def hand_coded_opts(ast: UOp, vector_bytes: int, registers: int) -> list[Opt]:
  nodes = toposort([ast])
  buffers = [u for u in nodes if u.op is Ops.DEFINE_GLOBAL]
  loads = [u for u in nodes if u.op is Ops.LOAD]
  stores = [u for u in nodes if u.op is Ops.STORE]
  axes = kernel_axes(ast)
  out_axes = [i for i, a in enumerate(axes) if a.kind is AxisType.GLOBAL]
  red_axes = [i for i, a in enumerate(axes) if a.kind is AxisType.REDUCE]
  opts: list[Opt] = []
  sizes = [a.size for a in axes]
  if 0 in sizes: return opts  # an empty loop: nothing to optimize

  width = 1
  # a multi-output kernel stores every output at one index (tgfn/schedule/grouping.py)
  if buffers and all(b.dtype in VECTOR_DTYPES for b in buffers) and len({s.src[1] for s in stores}) == 1:
    width = vector_bytes // max(b.dtype.itemsize for b in buffers + _wide_values(nodes))
  store_idx = stores[0].src[1] if stores else None

  def contiguous(axis: int) -> tuple[bool, int]:
    """Whether the store walks `axis` contiguously within a vector, and how many loads do: split the
    axis into vector lanes and read the strides along the lanes (a packed layout is contiguous only
    within its panels)."""
    if sizes[axis] % width: return False, 0
    # an index affine in the axis moves by its stride along the lanes too: read it off without splitting
    direct = [stride(u.src[1], axes[axis]) for u in stores + loads]
    if None not in direct:
      return all(d in (0, 1) for d in direct[:len(stores)]), sum(1 for d in direct[len(stores):] if d == 1)
    parts = toposort([graph_rewrite(apply_opt(ast, Opt(OptOps.VECTOR, axis, width)), symbolic)])
    lane = next(u for u in parts if u.op is Ops.RANGE and u.kind is AxisType.VECTOR)
    store_ok = all(stride(u.src[1], lane) in (0, 1) for u in parts if u.op is Ops.STORE)
    return store_ok, sum(1 for u in parts if u.op is Ops.LOAD and stride(u.src[1], lane) == 1)

  def invariant_loads(axis: int) -> int:
    return sum(1 for ld in loads if stride(ld.src[1], axes[axis]) == 0)

  vector_axis = None
  if width > 1:
    last_out = out_axes[-1] if out_axes else None
    store_ok, n_loads = contiguous(last_out) if last_out is not None else (False, 0)
    if store_ok and stride(store_idx, axes[last_out]) != 0 and (not red_axes or n_loads):
      vector_axis = last_out
    elif red_axes and not strict_float() and contiguous(red_axes[-1])[1]:
      vector_axis = red_axes[-1]
    elif red_axes:
      # another output axis that the loads walk contiguously: a reduction stores each output once, so
      # scattering the lanes there costs little (x.T @ y with 10 output columns)
      vector_axis = next((a for a in reversed(out_axes[:-1]) if contiguous(a)[1]), None)
    if vector_axis is None and red_axes and math.prod(sizes) * max(1, len(loads)) >= TILE_MIN_WORK:
      vector_axis = _broadcast_lanes(axes, out_axes, loads, width)
  # lanes a fixed stride apart: a gather (a packed panel's index is not affine, and is not one)
  gathered = [] if vector_axis is None else _strided(vector_axis, axes, loads)
  if gathered or (vector_axis is not None and _strided(vector_axis, axes, stores)): width = min(width, GATHER_LANES)
  if vector_axis is not None:
    opts.append(Opt(OptOps.VECTOR, vector_axis, width))
    sizes[vector_axis] //= width

  tile = 1
  work = math.prod(a.size for a in axes) * max(1, len(loads))
  if not red_axes and gathered and work >= TILE_MIN_WORK:
    # a transposing copy: upcast the axis a gathered load walks contiguously, so the cache lines of
    # one gather serve a whole block (x.T copied: 0.095 ms -> 0.052 per core)
    along = [a for a in out_axes if a != vector_axis and sizes[a] % width == 0 and stride(gathered[0].src[1], axes[a]) == 1]
    if along:
      opts.append(Opt(OptOps.UPCAST, along[-1], width))
      sizes[along[-1]] //= width
  elif not red_axes and vector_axis is not None and work >= TILE_MIN_WORK:
    opts += _row_blocks(axes, [a for a in out_axes if a != vector_axis], loads, stores, sizes)
  if red_axes and work >= TILE_MIN_WORK:
    # a register tile: upcast output axes along which some load does not move (its value is reused).
    # Two vectors wide along the vector axis, and as many rows as the registers left hold accumulators
    # (one broadcast register and the row of loaded vectors stay live when each row's updates stand
    # together: 6x16 on AVX2 ran at 88 GFLOP/s per core, the 2x32 tile at 72, 4x16 at 60); a large tile
    # on 32 registers four vectors by four rows (WIDE_TILE_*)
    small = work < SMALL_TILE_WORK
    wide = not small and registers >= WIDE_TILE_REGISTERS
    budget = SMALL_TILE if small else WIDE_TILE_ACCUMULATORS if wide else max(1, registers - 4)
    upcasts: list[Opt] = []
    # first the axes along which a gathered load does not move: it is then gathered once for the
    # whole row of the tile
    reuses_gather = lambda axis: any(stride(ld.src[1], axes[axis]) == 0 for ld in gathered)  # noqa: E731
    for axis in sorted(reversed(out_axes), key=lambda a: not reuses_gather(a)):
      if not invariant_loads(axis): continue
      cap = (WIDE_TILE_VECTORS if wide else 2) if axis == vector_axis else 8
      if small or axis != vector_axis: cap = min(cap, budget // tile)  # (a large tile's vectors always fit)
      amount = _tile_amount(sizes[axis], cap, ragged=axis != vector_axis)
      if amount > 1:
        upcasts.append(Opt(OptOps.UPCAST, axis, amount))
        sizes[axis] = -(-sizes[axis] // amount)
        tile *= amount
    # the longer side first: its updates then run in the outer order, and only the shorter side's
    # loads stay live across the tile; of equal sides the rows (4x4 vectors: 10.2 ms against 10.6-11.1
    # with the vectors outer, 1024^2)
    opts += sorted(upcasts, key=lambda o: (-o.amount, o.axis == vector_axis))
    last_red = red_axes[-1]
    unroll = _largest_divisor(sizes[last_red], (4, 2))
    # under a register tile, unrolling the reduction only makes gcc keep every unrolled step's operands
    # live at once and spill accumulators (a 1024^2 matmul ran 25% slower with UNROLL 4)
    if unroll > 1 and sizes[last_red] > unroll and tile == 1:
      opts.append(Opt(OptOps.UNROLL, last_red, unroll))
      sizes[last_red] //= unroll

  if tile > 1 and vector_axis is not None and vector_axis == out_axes[-1] and len(out_axes) >= 2:
    # walk the columns' panels outside the rows: a panel of B then stays in cache for every row instead
    # of all of B streaming through it per row block (2.4x on a 2048^2 matmul, 1.3x on 1024^2)
    first = out_axes[-2]
    opts = [Opt(OptOps.SWAP, first, vector_axis)] + [_renumbered(o, first, vector_axis) for o in opts]
    sizes[first], sizes[vector_axis] = sizes[vector_axis], sizes[first]
    grouped = _panel_groups(axes, first, vector_axis, red_axes, loads, sizes)
    if grouped: out_axes.append(len(out_axes))
    opts += grouped

  threadable = [i for i in out_axes if sizes[i] >= 2]  # the outermost loop that can be split
  if _worth_threads(work, axes, loads, stores, red_axes, width if red_axes and vector_axis is not None else 1) and threadable:
    opts.append(Opt(OptOps.THREAD, threadable[0]))
  return opts


def _strided(axis: int, axes: list[UOp], uops: list[UOp]) -> list[UOp]:
  """The loads or stores of `uops` that move along `axis` by a fixed stride other than 0 or 1 element (an
  index that is not affine, a packed panel's, is contiguous within its panels)."""
  return [u for u in uops if stride(u.src[1], axes[axis]) not in (0, 1, None)]


def _broadcast_lanes(axes: list[UOp], out_axes: list[int], loads: list[UOp], width: int) -> Optional[int]:
  """A contraction that no load walks contiguously (a convolution: its window reads skip by the stride and
  its channels lie a plane apart; its weights a kernel apart): vectorize an output axis along which some
  operand does not move, so its value is loaded once and broadcast to the lanes while the other operands
  are gathered. Of those, the axis whose gathered loads stay put along the most other output axes: the
  register tile then reuses one gather for a whole row of accumulators (conv forward: the output channels,
  the weights gathered once for a tile of positions; weight gradient: the output channels, the incoming
  gradient gathered once for a tile of taps)."""
  def reuse(axis: int) -> int:
    moves = [ld for ld in loads if stride(ld.src[1], axes[axis]) != 0]
    return sum(1 for a in out_axes if a != axis and axes[a].size > 1 and all(stride(ld.src[1], axes[a]) == 0 for ld in moves))
  candidates = [a for a in out_axes if axes[a].size % width == 0
                and all(stride(ld.src[1], axes[a]) is not None for ld in loads)
                and any(stride(ld.src[1], axes[a]) == 0 for ld in loads)
                and any(stride(ld.src[1], axes[a]) != 0 for ld in loads)]
  return max(candidates, key=reuse, default=None)


def work_group_opts(ast: UOp, local_size: int) -> list[Opt]:
  """For a renderer with kernel ids in work groups: the innermost output axis (the first kernel id, the one
  consecutive work items walk) runs in groups of `local_size` items, or one group for a shorter axis."""
  axes = kernel_axes(ast)
  out_axes = [i for i, a in enumerate(axes) if a.kind is AxisType.GLOBAL]
  if not out_axes or axes[out_axes[-1]].size < 2: return []
  return [Opt(OptOps.LOCAL, out_axes[-1], min(local_size, axes[out_axes[-1]].size))]


# a load this many bytes from the last one starts a new page (and, at a power-of-two stride, maps to the
# same cache sets)
PAGE_BYTES = 4096
ROW_BLOCK = 8


def _row_blocks(axes: list[UOp], rows: list[int], loads: list[UOp], stores: list[UOp], sizes: list[int]) -> list[Opt]:
  """A copy whose innermost loop makes some load jump a page per step while the store and that load walk
  the loop outside it closely (B copied into panels, schedule/packing.py: each step of k reads 64 bytes of
  the next row of B): swap the two loops and upcast the jumping one by ROW_BLOCK, so each step reads a short
  run of ROW_BLOCK rows and stores ROW_BLOCK consecutive pieces (2048^2: 2.5 ms -> 1.5 ms per core)."""
  if len(rows) < 2 or not stores: return []
  outer, inner = rows[-2], rows[-1]
  near = lambda idx, axis, size: (s := stride(idx, axes[axis])) is not None and abs(s) * size < PAGE_BYTES  # noqa: E731
  jumping = [ld for ld in loads if not near(ld.src[1], inner, ld.dtype.itemsize) and near(ld.src[1], outer, ld.dtype.itemsize)]
  if not jumping or sizes[inner] % ROW_BLOCK or not all(near(st.src[1], inner, st.src[2].dtype.itemsize) for st in stores): return []
  sizes[outer], sizes[inner] = sizes[inner] // ROW_BLOCK, sizes[outer]
  # after the swap the jumping loop is addressed as `outer`
  return [Opt(OptOps.SWAP, outer, inner), Opt(OptOps.UPCAST, outer, ROW_BLOCK)]


# the bytes of the packed column operand (B in a @ b) one group of column panels reads (tiled contractions,
# `_panel_groups`): about four times L2, well within the shared L3
PANEL_GROUP_BYTES = 2 << 20
# fewer groups than this would split unevenly between two threads; a 1024^2 matmul (4 MiB of B, 2 groups)
# ran the same with and without them
MIN_PANEL_GROUPS = 4


def _panel_groups(axes: list[UOp], panels: int, cols: int, red_axes: list[int], loads: list[UOp], sizes: list[int]) -> list[Opt]:
  """A tiled contraction walking its column panels (axis `panels`, after the SWAP) outside its rows reads all
  of the row operand A once per panel, six rows at a time a row apart: a 2048^2 matmul streams its 16 MiB of
  A 128 times. Cut the panels into groups of about PANEL_GROUP_BYTES of B and walk the rows inside each group,
  the group's panels innermost (BLOCK): the tile's six rows of A are then read once per group from L1/L2 for
  every panel, and the group stays in L3. 2048^2 per core, in one process: 90.2 GFLOP/s against 82.9 before
  (OpenBLAS 92.3); on a busier machine 80.9 against 74.7 with blocks of rows under each panel instead and 69
  before (OpenBLAS 80.2). docs/compiler.md has the notes."""
  depth = math.prod(axes[r].size for r in red_axes)
  col_loads = [ld for ld in loads if stride(ld.src[1], axes[panels]) == 0]  # axes[panels] walked the rows before the SWAP
  if not col_loads: return []
  itemsize = max(ld.dtype.itemsize for ld in col_loads)
  per_panel = itemsize * depth * -(-axes[cols].size // sizes[panels])
  amount = max(1, PANEL_GROUP_BYTES // per_panel)
  count = sizes[panels]
  if count < MIN_PANEL_GROUPS * amount or amount < 2 or count % amount: return []
  n_out = sum(1 for a in axes if a.kind is not AxisType.REDUCE)
  sizes.insert(n_out, amount)  # the group's panels: the innermost output loop
  sizes[panels] = count // amount
  return [Opt(OptOps.BLOCK, panels, amount)]


def _worth_threads(work: int, axes: list[UOp], loads: list[UOp], stores: list[UOp], red_axes: list[int], lanes: int) -> bool:
  """Whether the kernel does enough to repay waking the worker pool. A vectorized reduction does `lanes`
  multiply-adds per instruction: a 64x128x128 matmul (2M loads, 23 us on one core) took 58 us on two.
  It is threaded still when its loads read enough memory (each load's footprint: the product of the axes
  it moves along), or, without a reduction, when its loads and stores together move COPY_THREAD_BYTES."""
  if work // lanes >= THREAD_MIN_WORK: return True
  def footprint(accesses: list[tuple[int, UOp]]) -> int:  # (item size, index) -> bytes touched
    return sum(size * math.prod(a.size for a in axes if stride(idx, a) != 0) for size, idx in accesses)
  read = footprint([(ld.dtype.itemsize, ld.src[1]) for ld in loads])
  if not red_axes: return read + footprint([(st.src[2].dtype.itemsize, st.src[1]) for st in stores]) >= COPY_THREAD_BYTES
  return lanes > 1 and read >= THREAD_MIN_BYTES


def _renumbered(opt: Opt, a: int, b: int) -> Opt:
  """`opt` addressing the same loop after axes `a` and `b` traded places."""
  return Opt(opt.op, {a: b, b: a}.get(opt.axis, opt.axis), opt.amount)


def _wide_values(nodes: list[UOp]) -> list[UOp]:
  """Nodes computing 64-bit values other than indices (float64 inside a float32 kernel, uint64 bits)."""
  return [u for u in nodes if u.op in GroupOp.ALU and u.dtype.itemsize == 8 and u.dtype is not dtypes.index]
