"""Panel packing for contractions: the operand a matmul walks along its output columns, B[k, j], is
copied once into panels of PANEL columns, `[j // PANEL][k][j % PANEL]`, before the contraction runs.

Read in place, consecutive k of a row-major B are a whole row apart: with a power-of-two row length
every load of the inner loop maps to the same few cache sets and the kernel waits on memory. In
panels, the inner loop streams through contiguous memory, PANEL columns (one or two vector
registers) per k. The copy costs O(k*m), against the O(n*k*m) contraction it speeds up, so it is
done only when n is large enough to repay it. The row operand A is copied too when it is read
transposed (`x.T @ dz`, a weight gradient), so that its depth runs contiguously. A contraction with
too few columns for panels gets its column operand copied depth-contiguous instead (`_short_columns`).
Each is a layout change made of tensor-level movement ops and a CONTIGUOUS: the scheduler and codegen
need to know nothing about it.
"""
from __future__ import annotations

import math

from tgfn.device import Device
from tgfn.codegen.opts import VECTOR_DTYPES
from tgfn.uop.ops import Ops, UOp, substitute, toposort

PANEL = 16
MIN_ROWS, MIN_DEPTH = 8, 2  # fewer rows do not repay the copy (it costs depth x columns, the contraction rows x that)
# a contraction too narrow for panels still vectorizes its columns when they are whole vectors of this many
# lanes; below NARROW_MIN_WORK multiply-adds a copy's launch costs more than the dot products save
NARROW_LANES, NARROW_MIN_WORK = 8, 1 << 16


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
  return tuple(order.index(i) for i in range(len(order)))


def _panel_view(b: UOp, k_axis: int, j_axis: int) -> UOp:
  """`b` copied so that axis j is cut into panels of PANEL, each panel holding all of axis k
  (`[j // PANEL][k][j % PANEL]`), and viewed back in its own shape."""
  rest = [i for i in range(len(b.shape)) if i not in (k_axis, j_axis)]
  to_kj = (*rest, k_axis, j_axis)
  kj = UOp(Ops.PERMUTE, b.dtype, (b,), to_kj)
  lead, k, m = tuple(b.shape[i] for i in rest), b.shape[k_axis], b.shape[j_axis]
  nl = len(lead)
  split = UOp(Ops.RESHAPE, b.dtype, (kj,), (*lead, k, m // PANEL, PANEL))
  panels = (*range(nl), nl + 1, nl, nl + 2)  # (..., m/PANEL, k, PANEL); its own inverse
  packed = UOp(Ops.CONTIGUOUS, b.dtype, (UOp(Ops.PERMUTE, b.dtype, (split,), panels),))
  back = UOp(Ops.RESHAPE, b.dtype, (UOp(Ops.PERMUTE, b.dtype, (packed,), panels),), (*lead, k, m))
  return UOp(Ops.PERMUTE, b.dtype, (back,), _inverse(to_kj))


def _packed(red: UOp) -> UOp | None:
  alu_op, axes = red.arg
  src = red.src[0]
  if alu_op is not Ops.ADD or len(axes) != 1 or src.op is not Ops.MUL or src.dtype not in VECTOR_DTYPES: return None
  shape, k_axis = src.shape, axes[0]
  outputs = [i for i in range(len(shape)) if i != k_axis and shape[i] > 1]
  if len(outputs) < 2: return None
  j_axis = outputs[-1]  # the output axis the kernel vectorizes: the innermost one
  k, m = shape[k_axis], shape[j_axis]
  if k < MIN_DEPTH: return None
  if m % PANEL or m < 2 * PANEL: return _short_columns(red, shape, k_axis, j_axis, outputs)
  for i, operand in enumerate(src.src):
    if operand.op is not Ops.EXPAND: continue
    b = operand.src[0]
    # the operand broadcast over the other output axes, varying along j and k only
    if [a for a in range(len(shape)) if b.shape[a] > 1] != sorted((k_axis, j_axis)): continue
    if math.prod(shape[a] for a in outputs[:-1]) < MIN_ROWS: return None
    expanded = UOp(Ops.EXPAND, operand.dtype, (_panel_view(b, k_axis, j_axis),), operand.arg)
    new_src = tuple(expanded if n == i else _rows_along_k(s, shape, k_axis, j_axis) for n, s in enumerate(src.src))
    return red.replace(src=(src.replace(src=new_src),))
  return None


def _short_columns(red: UOp, shape: tuple[int, ...], k_axis: int, j_axis: int, outputs: list[int]) -> UOp | None:
  """A contraction with too few columns for panels (the 10 classes of `h @ w`): its kernel vectorizes the
  depth k instead, a dot product per output. When the row operand already runs contiguously along k and the
  column operand B[k, j] does not, B is copied so that it does (`[j][k]`): its k-vector is then one load
  instead of a gather of one scalar per lane (256x512 @ 512x10: 119 -> 52 us; the copy is k*j elements)."""
  src = red.src[0]
  if shape[j_axis] % NARROW_LANES == 0 or math.prod(shape) < NARROW_MIN_WORK: return None
  if math.prod(shape[a] for a in outputs if a != j_axis) < MIN_ROWS: return None
  b_at = [i for i, x in enumerate(src.src) if x.op is Ops.EXPAND and _varying(x.src[0]) == sorted((k_axis, j_axis))]
  rows = [x for i, x in enumerate(src.src) if i not in b_at]
  if len(b_at) != 1 or len(rows) != 1 or rows[0].op is not Ops.EXPAND: return None
  a, b = rows[0].src[0], src.src[b_at[0]].src[0]
  a_axes = _varying(a)
  if k_axis not in a_axes or j_axis in a_axes or _k_strided(a, a_axes[-1] == k_axis): return None
  if not _k_strided(b, _varying(b)[-1] == k_axis): return None
  copied = _contiguous_along(b, k_axis)
  new_src = tuple(UOp(Ops.EXPAND, x.dtype, (copied,), x.arg) if i == b_at[0] else x for i, x in enumerate(src.src))
  return red.replace(src=(src.replace(src=new_src),))


def _varying(x: UOp) -> list[int]:
  return [i for i in range(len(x.shape)) if x.shape[i] > 1]


def _contiguous_along(x: UOp, k_axis: int) -> UOp:
  """`x` copied with axis k last (contiguous), viewed back in its own shape."""
  order = tuple(i for i in range(len(x.shape)) if i != k_axis) + (k_axis,)
  copied = UOp(Ops.CONTIGUOUS, x.dtype, (UOp(Ops.PERMUTE, x.dtype, (x,), order),))
  return UOp(Ops.PERMUTE, x.dtype, (copied,), _inverse(order))


def _rows_along_k(operand: UOp, shape: tuple[int, ...], k_axis: int, j_axis: int) -> UOp:
  """The row operand (A in `a.T @ b`) copied so that k runs contiguously, when it is read transposed:
  each k step would otherwise touch a new cache line for a few rows' values (the weight gradient
  x.T @ dz ran at 67 GFLOP/s per core against 88 for x @ w)."""
  if operand.op is not Ops.EXPAND: return operand
  a = operand.src[0]
  varying = _varying(a)
  if j_axis in varying or k_axis not in varying or not _k_strided(a, varying[-1] == k_axis): return operand
  return UOp(Ops.EXPAND, operand.dtype, (_contiguous_along(a, k_axis),), operand.arg)


def _k_strided(x: UOp, k_last: bool) -> bool:
  """Whether the view `x` of a computed or stored value walks memory with a stride along k: k is its last
  axis and the view moves the source's last (contiguous) axis elsewhere (`x.T`), or k is not its last
  axis and the view keeps the source's order (roughly: reshapes are taken as order-preserving). A view
  of a constant, or a broadcast, is left alone (a copy would only stop the constant from folding)."""
  transposed = False
  while x.op in (Ops.RESHAPE, Ops.PERMUTE):
    if x.op is Ops.PERMUTE and x.arg[-1] != len(x.arg) - 1: transposed = True
    x = x.src[0]
  if x.op in (Ops.CONST, Ops.EXPAND) or math.prod(x.shape) == 1: return False
  return k_last == transposed


def pack_contraction_operands(outs: list[UOp]) -> list[UOp]:
  """`outs` with the column operand of each large enough contraction read from packed panels, on devices
  whose kernels are optimized. Rebuilt bottom-up, so a contraction inside another's operand is packed
  once and every consumer sees the same node."""
  done: dict[UOp, UOp] = {}
  for u in toposort(outs):
    src = tuple(done[s] for s in u.src)
    new = u if src == u.src else u.replace(src=src)
    if new.op is Ops.REDUCE_AXIS and Device[new.device or Device.DEFAULT].renderer.supports_opts:
      new = _packed(new) or new
    done[u] = new
  return [done[o] for o in outs]
