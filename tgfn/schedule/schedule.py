"""Turn the outputs to realize into an ordered list of work items: kernels and copies."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tgfn.schedule.kernelize import LoweredKernel, find_realize_points, lower_kernel
from tgfn.uop.ops import Ops, UOp, toposort


@dataclass(frozen=True)
class ScheduleItem:
  output: UOp                       # the tensor-level node this item materializes
  kernel: Optional[LoweredKernel]   # None for a COPY between devices
  inputs: tuple[UOp, ...]           # tensor-level nodes whose buffers it reads


def create_schedule(outs: list[UOp]) -> list[ScheduleItem]:
  realize = find_realize_points(outs)
  items = []
  for node in toposort(outs):
    if node not in realize: continue
    if node.op is Ops.COPY: items.append(ScheduleItem(node, None, (node.src[0],)))
    else:
      kernel = lower_kernel(node, realize)
      items.append(ScheduleItem(node, kernel, tuple(kernel.buffers[1:])))
  return items
