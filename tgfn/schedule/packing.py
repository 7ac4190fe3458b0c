"""Panel packing for contractions: the operand a matmul walks along its output columns, B[k, j], is
copied once into panels of PANEL columns, `[j // PANEL][k][j % PANEL]`, before the contraction runs.

Read in place, consecutive k of a row-major B are a whole row apart: with a power-of-two row length
every load of the inner loop maps to the same few cache sets and the kernel waits on memory. In
panels, the inner loop streams through contiguous memory, PANEL columns (one or two vector
registers) per k. The copy costs O(k*m), against the O(n*k*m) contraction it speeds up, so it is
done only when n is large enough to repay it. It is a layout change made of tensor-level movement
ops and a CONTIGUOUS: the scheduler and codegen need to know nothing about it.
"""
from __future__ import annotations

from tgfn.device import Device
from tgfn.codegen.opts import VECTOR_DTYPES
from tgfn.uop.ops import Ops, UOp, substitute, toposort

PANEL = 16
MIN_ROWS, MIN_DEPTH = 8, 16  # smaller contractions do not repay the copy


def _panel_view(b: UOp) -> UOp:
  """`b` (shape (..., k, m)) copied into panels and viewed back in its own shape."""
  *lead, k, m = b.shape
  nl = len(lead)
  split = UOp(Ops.RESHAPE, b.dtype, (b,), (*lead, k, m // PANEL, PANEL))
  order = (*range(nl), nl + 1, nl, nl + 2)  # (..., m/PANEL, k, PANEL)
  packed = UOp(Ops.CONTIGUOUS, b.dtype, (UOp(Ops.PERMUTE, b.dtype, (split,), order),))
  back = UOp(Ops.PERMUTE, b.dtype, (packed,), order)  # the order is its own inverse
  return UOp(Ops.RESHAPE, b.dtype, (back,), b.shape)


def _packed(red: UOp) -> UOp | None:
  alu_op, axes = red.arg
  src = red.src[0]
  if alu_op is not Ops.ADD or len(axes) != 1 or src.op is not Ops.MUL or src.dtype not in VECTOR_DTYPES: return None
  *_, n, k, m = src.shape if len(src.shape) >= 3 else (0, 0, 0)
  if axes[0] != len(src.shape) - 2 or m % PANEL or m < 2 * PANEL or k < MIN_DEPTH or n < MIN_ROWS: return None
  for i, operand in enumerate(src.src):
    if operand.op is not Ops.EXPAND: continue
    b = operand.src[0]
    if b.shape[-3] != 1 or b.shape[-1] != m or b.shape[-2] != k: continue  # not the one broadcast over rows
    if b.op is Ops.RESHAPE and b.src[0].op is Ops.PERMUTE and b.src[0].src[0].op is Ops.CONTIGUOUS: return None
    expanded = UOp(Ops.EXPAND, operand.dtype, (_panel_view(b),), operand.arg)
    new_src = src.replace(src=tuple(expanded if j == i else s for j, s in enumerate(src.src)))
    return red.replace(src=(new_src,))
  return None


def pack_contraction_operands(outs: list[UOp]) -> list[UOp]:
  """`outs` with the column operand of each large enough contraction read from packed panels, on devices
  whose kernels are optimized."""
  mapping = {}
  for u in toposort(outs):
    if u.op is not Ops.REDUCE_AXIS: continue
    if not Device[u.device or Device.DEFAULT].renderer.supports_opts: continue
    if (new := _packed(u)) is not None: mapping[u] = new
  if not mapping: return outs
  return [substitute(o, mapping) for o in outs]
