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

import math

from tgfn.device import Device
from tgfn.codegen.opts import VECTOR_DTYPES
from tgfn.uop.ops import Ops, UOp, substitute, toposort

PANEL = 16
MIN_ROWS, MIN_DEPTH = 8, 2  # fewer rows do not repay the copy (it costs depth x columns, the contraction rows x that)


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
  if m % PANEL or m < 2 * PANEL or k < MIN_DEPTH: return None
  for i, operand in enumerate(src.src):
    if operand.op is not Ops.EXPAND: continue
    b = operand.src[0]
    # the operand broadcast over the other output axes, varying along j and k only
    if [a for a in range(len(shape)) if b.shape[a] > 1] != sorted((k_axis, j_axis)): continue
    if math.prod(shape[a] for a in outputs[:-1]) < MIN_ROWS: return None
    expanded = UOp(Ops.EXPAND, operand.dtype, (_panel_view(b, k_axis, j_axis),), operand.arg)
    new_src = src.replace(src=tuple(expanded if n == i else s for n, s in enumerate(src.src)))
    return red.replace(src=(new_src,))
  return None


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
