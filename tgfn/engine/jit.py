"""A traced function compiled once: a flat list of kernel launches over numbered buffer slots.

Slots hold, in order: the function's inputs (bound per call), buffers the function captured as
constants, intermediates (allocated once, and shared by intermediates whose lifetimes do not
overlap), and outputs (fresh buffers every call, so results handed to the user are never reused --
except that an output may take over the memory of a *donated* input).
Replaying a call is: bind inputs, allocate outputs, run the prepared (program, slots) list.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from tgfn.device import Buffer, Device
from tgfn.engine.realize import CompiledKernel, Counters, compile_kernel
from tgfn.ops.host import run_host
from tgfn.schedule.kernelize import LoweredKernel
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops, UOp


@dataclass
class Step:
  kernel: Optional[CompiledKernel]   # None: a copy between devices, or a host call
  lowered: Optional[LoweredKernel]
  slots: tuple[int, ...]             # buffer slots of the kernel's arguments (output first)
  host: Optional[UOp] = None         # a HOST node: run its NumPy function on the host (tgfn/ops/host.py)


class HostLaunch:
  """A host call as a replay step: called with the Buffers of its slots (output first), not raw pointers."""
  def __init__(self, node: UOp): self.node = node
  def __call__(self, out: Buffer, *inputs: Buffer) -> None: run_host(self.node, out, inputs)


@dataclass
class SlotInfo:
  device: str
  size: int
  dtype: Any
  shape: tuple[int, ...]

  @staticmethod
  def of(node: UOp) -> SlotInfo:
    return SlotInfo(node.device or Device.DEFAULT, math.prod(node.shape), node.dtype, node.shape)

  def key(self) -> tuple: return (self.device, self.dtype, self.size)


class CompiledGraph:
  def __init__(self, inputs: Sequence[UOp], outputs: Sequence[UOp], donated: Sequence[int] = ()):
    self.n_inputs = len(inputs)
    slot_of: dict[UOp, int] = {p: i for i, p in enumerate(inputs)}
    self.slots = [SlotInfo.of(p) for p in inputs]
    self.fixed: dict[int, Buffer] = {}   # captured constants and planned intermediates

    def slot(node: UOp) -> int:
      if node not in slot_of:
        slot_of[node] = len(self.slots)
        self.slots.append(SlotInfo.of(node))
        if node.op is Ops.BUFFER: self.fixed[slot_of[node]] = node.buffer
      return slot_of[node]

    computed = [o for o in outputs if o.op not in (Ops.BUFFER, Ops.PLACEHOLDER)]
    self.steps: list[Step] = []
    for item in create_schedule(computed):
      out_slot = slot(item.output)
      if item.host: self.steps.append(Step(None, None, (out_slot,) + tuple(slot(i) for i in item.inputs), item.output))
      elif item.kernel is None: self.steps.append(Step(None, None, (out_slot, slot(item.inputs[0]))))
      else:
        kernel = compile_kernel(item.kernel, self.slots[out_slot].device)
        self.steps.append(Step(kernel, item.kernel, (out_slot,) + tuple(slot(b) for b in item.kernel.buffers[1:])))
    self.output_slots = [slot(o) for o in outputs]
    self._plan_intermediates()
    self.donation = self._plan_donation(set(donated))
    self.kernels = [s.kernel for s in self.steps if s.kernel is not None]
    # the launch list the replay loop walks: (program, slots) for kernels, (HostLaunch, slots) for host
    # calls, (None, slots) for copies
    self._launches = [(s.kernel.program if s.kernel else HostLaunch(s.host) if s.host is not None else None, s.slots)
                      for s in self.steps if s.kernel is None or self.slots[s.slots[0]].size]
    # per fresh output: what allocating it needs, looked up once here rather than on every call
    self._fresh_outputs = [(s, info.device, info.size, info.dtype, Device[info.device].allocator,
                            Device[info.device].kernel_arg)
                           for s in dict.fromkeys(self.output_slots)
                           if s >= self.n_inputs and s not in self.fixed and s not in self.donation
                           for info in (self.slots[s],)]
    self._n_launches = len(self._launches)
    plain = not self.donation and all(program is not None for program, _ in self._launches)
    self._replay = self._make_replay() if plain else None

  def _plan_intermediates(self) -> None:
    """Give intermediates buffers, reusing one once its last reader has run (greedy, by exact size).
    They belong to the graph, so two calls of it must not run at once (`has_scratch` says when)."""
    self.has_scratch = False
    per_call = set(self.output_slots) | set(range(self.n_inputs)) | set(self.fixed)
    last_use: dict[int, int] = {}
    for i, step in enumerate(self.steps):
      for s in step.slots: last_use[s] = i
    free: dict[tuple, list[Buffer]] = {}
    for i, step in enumerate(self.steps):
      out = step.slots[0]
      if out not in per_call:
        self.has_scratch = True
        info = self.slots[out]
        self.fixed[out] = free[info.key()].pop() if free.get(info.key()) else Buffer(info.device, info.size, info.dtype)
      for s in set(step.slots):
        if last_use[s] == i and s not in per_call and s in self.fixed:
          free.setdefault(self.slots[s].key(), []).append(self.fixed[s])

  def _plan_donation(self, donated: set[int]) -> dict[int, int]:
    """output slot -> donated input slot whose memory it may take. Safe when no later step reads the
    input, and the producing kernel reads it, if at all, only at the element it writes."""
    last_read: dict[int, int] = {}
    for k, step in enumerate(self.steps):
      for s in step.slots[1:]: last_read[s] = k
    plan: dict[int, int] = {}
    for k, step in enumerate(self.steps):
      out = step.slots[0]
      if out not in self.output_slots or out in self.fixed or step.kernel is None: continue
      for i in sorted(donated - set(plan.values())):
        if self.slots[i].key() == self.slots[out].key() and last_read.get(i, -1) <= k and \
            self._reads_only_in_place(step, i):
          plan[out] = i
          break
    return plan

  @staticmethod
  def _reads_only_in_place(step: Step, input_slot: int) -> bool:
    if input_slot not in step.slots[1:]: return True
    position = step.slots.index(input_slot)
    store = step.lowered.ast.src[0]
    loads = [u for u in step.lowered.ast.toposort() if u.op is Ops.LOAD and u.src[0].arg == position]
    return all(len(u.src) == 2 and u.src[1] is store.src[1] for u in loads)

  def __call__(self, inputs: Sequence[Buffer]) -> list[Buffer]:
    if self._replay is not None:
      Counters.kernels_launched += self._n_launches
      return self._replay(inputs)
    buffers: list[Any] = list(inputs) + [None] * (len(self.slots) - self.n_inputs)
    for s, buf in self.fixed.items(): buffers[s] = buf
    for s, device, size, dtype, allocator, kernel_arg in self._fresh_outputs:
      buffers[s] = Buffer.allocated(device, size, dtype, allocator, kernel_arg)
    for out, i in self.donation.items():
      donor = buffers[i]
      # a buffer passed in two argument positions cannot be given away: fall back to fresh memory
      if sum(b is donor for b in inputs) > 1: buffers[out] = Buffer(donor.device, donor.size, donor.dtype)
      else: buffers[out] = buffers[i] = donor.donate()
    args = [b.arg if b is not None else None for b in buffers]
    for program, slots in self._launches:
      if program is None: buffers[slots[0]].copyin(buffers[slots[1]].numpy())
      elif type(program) is HostLaunch: program(*[buffers[s] for s in slots])
      else: program(*[args[s] for s in slots])
    Counters.kernels_launched += len(self._launches)
    return [buffers[s] for s in self.output_slots]

  def _make_replay(self) -> Callable[[Sequence[Buffer]], list[Buffer]]:
    """The common case (kernels only, no donation) as one straight-line Python function, generated
    once: read the input pointers, allocate the outputs, call each kernel, return the outputs. No
    loops, lists or lookups are left on the per-call path."""
    env: dict[str, Any] = {"allocated": Buffer.allocated}
    lines = ["def replay(inputs, reuse=None):"]
    lines += [f"  b{i} = inputs[{i}]; a{i} = b{i}.arg" for i in range(self.n_inputs)]
    for s, buf in self.fixed.items(): env[f"b{s}"], env[f"a{s}"] = buf, buf.arg
    if self._fresh_outputs:  # fresh buffers, or (reuse) the recycled ones of an earlier call
      lines.append("  if reuse is None:")
      for s, device, size, dtype, allocator, kernel_arg in self._fresh_outputs:
        env[f"spec{s}"] = (device, size, dtype, allocator, kernel_arg)
        lines.append(f"    b{s} = allocated(*spec{s}); a{s} = b{s}._arg")
      lines.append("  else:")
      lines += [f"    b{s} = reuse[{k}]; a{s} = b{s}._arg" for k, (s, *_) in enumerate(self._fresh_outputs)]
    for k, (program, slots) in enumerate(self._launches):
      env[f"p{k}"] = program
      prefix = "b" if type(program) is HostLaunch else "a"  # a host call takes Buffers, a kernel pointers
      lines.append(f"  p{k}({', '.join(f'{prefix}{s}' for s in slots)})")
    lines.append(f"  return [{', '.join(f'b{s}' for s in self.output_slots)}]")
    exec("\n".join(lines), env)  # our own generated code, built from slot numbers only
    return env["replay"]

  @property
  def can_reuse_outputs(self) -> bool:
    """One fresh output buffer and nothing else returned: the case where recycling it is simple."""
    return self._replay is not None and len(self._fresh_outputs) == 1 and len(self.output_slots) == 1

  def replay_into(self, inputs: Sequence[Buffer], output: Buffer) -> None:
    """Run again writing the result into `output`, a buffer from an earlier call nobody holds anymore."""
    Counters.kernels_launched += self._n_launches
    self._replay(inputs, (output,))

  def source(self) -> str:
    return "\n".join(f"// kernel {k.name} on {k.device}\n{k.source}" for k in self.kernels)
