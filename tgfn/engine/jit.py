"""A traced function compiled once: a flat list of kernel launches over numbered buffer slots.

Slots hold, in order: the function's inputs (bound per call), buffers the function captured as
constants, intermediates (allocated once, and shared by intermediates whose lifetimes do not
overlap), and outputs (fresh buffers every call, so results handed to the user are never reused).
Replaying a call is: bind inputs, allocate outputs, run the prepared (program, slots) list.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tgfn.device import Buffer, Device
from tgfn.engine.realize import CompiledKernel, Counters, compile_kernel
from tgfn.helpers import prod
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops, UOp


@dataclass
class Step:
  kernel: Optional[CompiledKernel]   # None: a copy between devices
  slots: tuple[int, ...]             # buffer slots of the kernel's arguments (output first)


@dataclass
class SlotInfo:
  device: str
  size: int
  dtype: Any
  shape: tuple[int, ...]


class CompiledGraph:
  def __init__(self, inputs: Sequence[UOp], outputs: Sequence[UOp]):
    self.n_inputs = len(inputs)
    slot_of: dict[UOp, int] = {p: i for i, p in enumerate(inputs)}
    self.slots: list[SlotInfo] = [SlotInfo(p.device or Device.DEFAULT, prod(p.shape), p.dtype, p.shape) for p in inputs]
    self.fixed: dict[int, Buffer] = {}   # captured constants and planned intermediates

    def slot(node: UOp) -> int:
      if node not in slot_of:
        slot_of[node] = len(self.slots)
        self.slots.append(SlotInfo(Device.canonicalize(node.device or Device.DEFAULT), prod(node.shape),
                                   node.dtype, node.shape))
        if node.op is Ops.BUFFER: self.fixed[slot_of[node]] = node.buffer
      return slot_of[node]

    computed = [o for o in outputs if o.op not in (Ops.BUFFER, Ops.PLACEHOLDER)]
    self.steps: list[Step] = []
    for item in create_schedule(computed):
      out_slot = slot(item.output)
      if item.kernel is None: self.steps.append(Step(None, (out_slot, slot(item.inputs[0]))))
      else:
        kernel = compile_kernel(item.kernel, self.slots[out_slot].device)
        self.steps.append(Step(kernel, (out_slot,) + tuple(slot(b) for b in item.kernel.buffers[1:])))
    self.output_slots = [slot(o) for o in outputs]
    self._plan_intermediates()
    self.kernels = [s.kernel for s in self.steps if s.kernel is not None]

  def _plan_intermediates(self) -> None:
    """Give intermediates buffers, reusing one once its last reader has run (greedy, by exact size)."""
    per_call = set(self.output_slots) | set(range(self.n_inputs)) | set(self.fixed)
    last_use: dict[int, int] = {}
    for i, step in enumerate(self.steps):
      for s in step.slots: last_use[s] = i
    free: dict[tuple, list[Buffer]] = {}
    for i, step in enumerate(self.steps):
      out = step.slots[0]
      if out not in per_call:
        info = self.slots[out]
        key = (info.device, info.dtype, info.size)
        self.fixed[out] = free[key].pop() if free.get(key) else Buffer(info.device, info.size, info.dtype)
      for s in set(step.slots):
        if last_use[s] == i and s not in per_call and s in self.fixed:
          info = self.slots[s]
          free.setdefault((info.device, info.dtype, info.size), []).append(self.fixed[s])

  def __call__(self, inputs: Sequence[Buffer]) -> list[Buffer]:
    buffers: list[Optional[Buffer]] = list(inputs) + [None] * (len(self.slots) - self.n_inputs)
    for s, buf in self.fixed.items(): buffers[s] = buf
    for s in self.output_slots:
      if buffers[s] is None:
        info = self.slots[s]
        buffers[s] = Buffer(info.device, info.size, info.dtype)
    for step in self.steps:
      if step.kernel is None:
        buffers[step.slots[0]].copyin(buffers[step.slots[1]].numpy())
      elif buffers[step.slots[0]].size:
        step.kernel.program(*[buffers[s].arg for s in step.slots])
        Counters.kernels_launched += 1
    return [buffers[s] for s in self.output_slots]

  def source(self) -> str:
    return "\n".join(f"// kernel {k.name} on {k.device}\n{k.source}" for k in self.kernels)

