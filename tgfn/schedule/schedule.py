"""Turn the outputs to realize into an ordered list of work items: kernels, copies and host calls."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tgfn.helpers import track
from tgfn.schedule.grouping import group_kernels, inline_shared_reductions
from tgfn.schedule.packing import pack_contraction_operands
from tgfn.schedule.kernelize import LoweredKernel, find_realize_points, lower_kernel
from tgfn.uop.body import inline_calls
from tgfn.uop.ops import Ops, UOp, toposort


@dataclass(frozen=True)
class ScheduleItem:
  outputs: tuple[UOp, ...]          # the tensor-level nodes this item materializes
  kernel: Optional[LoweredKernel]   # None for a COPY between devices, a CALL or a HOST call
  inputs: tuple[UOp, ...]           # tensor-level nodes whose buffers it reads
  host: bool = False                # a HOST node: a NumPy function run on the host (tgfn/ops/host.py)

  @property
  def output(self) -> UOp: return self.outputs[0]


def create_schedule(outs: list[UOp]) -> list[ScheduleItem]:
  """Kernels and copies that compute `outs`, in order; the last items compute `outs` themselves."""
  rewritten = pack_contraction_operands(copy_to_where_read(inline_calls(outs)))
  track("pack contraction operands", outs, rewritten)
  # a rewritten output is still the caller's node: items name it as the caller does
  name = {new: old for old, new in zip(outs, rewritten) if new is not old}
  realize = find_realize_points(rewritten)
  groups, realize = inline_shared_reductions(group_kernels(realize, toposort(rewritten)), realize, rewritten)
  items = []
  for group in groups:
    node = group[0]
    if node.op in (Ops.COPY, Ops.HOST):
      items.append(ScheduleItem((name.get(node, node),), None, tuple(name.get(s, s) for s in node.src), node.op is Ops.HOST))
    elif node.op is Ops.CALL:  # a sub-graph call: the engine runs its body (tgfn/engine/call.py)
      items.append(ScheduleItem((name.get(node, node),), None, tuple(name.get(s, s) for s in node.src)))
    else:
      kernel = lower_kernel(group, realize)
      track("lower to loops", group, kernel)
      kernel.buffers = [name.get(b, b) for b in kernel.buffers]
      items.append(ScheduleItem(tuple(kernel.outputs), kernel, tuple(kernel.inputs)))
  track(f"schedule: {len(items)} item(s)", rewritten, [i.kernel.ast if i.kernel else i.output for i in items])
  return items


def copy_to_where_read(outs: list[UOp]) -> list[UOp]:
  """`outs` with every value read on another device than its own moved there (UOp.device): an uncommitted
  value meeting a committed one is computed on the committed device, from copies of the buffers it reads.
  (Copying it where it meets would compute an op's own constants, bit masks or iotas, on the default device
  and copy each one over.)"""
  nodes = toposort(outs)
  if all(_reads_own_device(n) for n in nodes): return outs
  moved: dict[str, dict[UOp, UOp]] = {}  # device -> {uncommitted node: the same computed on that device}
  rebuilt: dict[UOp, UOp] = {}
  for node in nodes:
    src = tuple(rebuilt.get(s, s) for s in node.src)
    if not _reads_own_device(node):
      done = moved.setdefault(node.device, {})
      src = tuple(s if s.device in (None, node.device) else _computed_on(s, node.device, done) for s in src)
    if src != node.src: rebuilt[node] = _with_sources(node, src)
  return [rebuilt.get(o, o) for o in outs]


def _computed_on(value: UOp, device: str, done: dict[UOp, UOp]) -> UOp:
  """Uncommitted `value` computed on `device`. Nothing under it is committed (UOp.committed): the only
  values it reads that live on a device are leaves (buffers, or placeholders standing for them), copied over."""
  for node in toposort([value]):
    if node in done: continue
    if node.device in (None, device): done[node] = node
    elif not node.src: done[node] = UOp(Ops.COPY, node.dtype, (node,), device)
    else: done[node] = _with_sources(node, tuple(done[s] for s in node.src))
  return done[value]


def _with_sources(node: UOp, src: tuple[UOp, ...]) -> UOp:
  new = UOp(node.op, node.dtype, src, node.arg)
  if (line := node.__dict__.get("_user_line")) is not None: new.__dict__.setdefault("_user_line", line)
  return new


def _reads_own_device(node: UOp) -> bool:
  if node.op is Ops.COPY or node.device is None: return True  # (a copy moves a value between devices)
  return all(s.device in (None, node.device) for s in node.src)
