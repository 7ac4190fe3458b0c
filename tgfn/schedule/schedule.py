"""Turn the outputs to realize into an ordered list of work items: kernels and copies."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tgfn.schedule.packing import pack_contraction_operands
from tgfn.schedule.kernelize import LoweredKernel, find_realize_points, lower_kernel
from tgfn.uop.ops import Ops, UOp, toposort


@dataclass(frozen=True)
class ScheduleItem:
  output: UOp                       # the tensor-level node this item materializes
  kernel: Optional[LoweredKernel]   # None for a COPY between devices or a CALL
  inputs: tuple[UOp, ...]           # tensor-level nodes whose buffers it reads


def create_schedule(outs: list[UOp]) -> list[ScheduleItem]:
  """Kernels and copies that compute `outs`, in order; the last items compute `outs` themselves."""
  rewritten = pack_contraction_operands(outs)
  # a rewritten output is still the caller's node: items name it as the caller does
  name = {new: old for old, new in zip(outs, rewritten) if new is not old}
  realize = find_realize_points(rewritten)
  items = []
  for node in toposort(rewritten):
    if node not in realize: continue
    if node.op is Ops.COPY: items.append(ScheduleItem(name.get(node, node), None, (name.get(node.src[0], node.src[0]),)))
    elif node.op is Ops.CALL:  # a sub-graph call: the engine runs its body (tgfn/engine/call.py)
      items.append(ScheduleItem(name.get(node, node), None, tuple(name.get(s, s) for s in node.src)))
    else:
      kernel = lower_kernel(node, realize)
      kernel.buffers = [name.get(b, b) for b in kernel.buffers]
      items.append(ScheduleItem(name.get(node, node), kernel, tuple(kernel.buffers[1:])))
  return items
