"""A traced function compiled once: a flat list of kernel launches over numbered buffer slots.

Slots hold, in order: the function's inputs (bound per call), buffers the function captured as
constants, intermediates (allocated once, and shared by intermediates whose lifetimes do not
overlap), and outputs (fresh buffers every call, so results handed to the user are never reused --
except that an output may take over the memory of a *donated* input).
Replaying a call is: bind inputs, allocate outputs, run the prepared (program, slots) list.
A CALL (a sub-graph: loop, branch, checkpoint) is one step that writes all of the call's outputs; its
runner (tgfn/engine/call.py) replays the body's own compiled graph, so loops run inside the replay.
A jitted function's graph without calls is kept on disk (tgfn/engine/plan_cache.py): slots, steps and
kernel sources, so another process rebuilds it without scheduling.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from tgfn.device import Buffer, Device
from tgfn.engine import plan_cache as plan_caching
from tgfn.engine.call import BufferView, call_groups, run_call
from tgfn.engine.realize import CompiledKernel, Counters, compile_kernels, home_device
from tgfn.helpers import settings
from tgfn.ops.host import run_host
from tgfn.schedule.kernelize import LoweredKernel
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.body import CallSpec, inline_calls
from tgfn.uop.ops import Ops, UOp, substitute, toposort
from tgfn.viz import debug
from tgfn.viz import nans as debug_nans


@dataclass
class Step:
  kernel: Optional[CompiledKernel]   # None: a copy between devices, a call or a host call
  lowered: Optional[LoweredKernel]
  slots: tuple[int, ...]             # buffer slots of the kernel's arguments (outputs first)
  n_outputs: int = 1
  call: Optional[Callable[[list[Buffer]], None]] = None  # a CALL's or HOST's runner, given the slots' buffers

  @property
  def outputs(self) -> tuple[int, ...]: return self.slots[:self.n_outputs]

  @property
  def inputs(self) -> tuple[int, ...]: return self.slots[self.n_outputs:]


def _call_runner(spec: CallSpec, device: str, n_out: int) -> Callable[[list[Buffer]], None]:
  return lambda buffers: run_call(spec, device, buffers[n_out:], buffers[:n_out])


def _host_runner(node: UOp) -> Callable[[list[Buffer]], None]:
  return lambda buffers: run_host(node, buffers[0], buffers[1:])


@dataclass
class SlotInfo:
  device: str
  size: int
  dtype: Any
  shape: tuple[int, ...]

  @staticmethod
  def of(node: UOp, home: str) -> SlotInfo:
    """A value computed from constants alone has no device: it lives on `home`, where the graph's inputs do."""
    return SlotInfo(node.device or home, math.prod(node.shape), node.dtype, node.shape)

  def key(self) -> tuple: return (self.device, self.dtype, self.size)


def bake_params(outputs: Sequence[UOp]) -> list[UOp]:
  """`outputs` with each PARAM (a Python scalar of the traced function's body) made a CONST again: a jitted
  function is compiled once, so its constants may as well be folded into its kernels (x * 0, x ** 3)."""
  params = {u: UOp.const(u.dtype, u.arg) for u in toposort(list(outputs)) if u.op is Ops.PARAM}
  return [substitute(o, params) for o in outputs] if params else list(outputs)


# Intermediates of this size and more have their pages mapped when planned, where the allocator can do so
# at once (`prefault`): cheaper than the page faults of the first call's kernels
PREFAULT_BYTES = 64 << 10


def _prefault(blocks: list[tuple[Callable[[int, int], None], int, int]]) -> None:
  for prefault, handle, nbytes in blocks: prefault(handle, nbytes)


class CompiledGraph:
  def __init__(self, inputs: Sequence[UOp], outputs: Sequence[UOp], donated: Sequence[int] = (), name: str = "jit",
               plan_cache: bool = False, device: Optional[str] = None):
    """Compile `outputs` over the placeholders `inputs`. With `plan_cache`, a graph compiled before (in any
    process) is loaded from the disk plan cache instead of scheduled (tgfn/engine/plan_cache.py);
    `from_plan` says whether it was. With `device` (a call's body, tgfn/engine/call.py), every value but a
    captured buffer lives on that device, whatever device its placeholders were traced with."""
    self.device = device
    self.name = name  # what DEBUG lines call it
    self.n_inputs = len(inputs)
    # keyed on the graph with its inlinable calls (custom derivative rules: exp, tanh, softplus, ...) inlined,
    # as the schedule runs it: their Python rules are not part of what runs, and would make the graph unkeyable
    key = plan_caching.graph_key(inputs, inline_calls(outputs), donated) if plan_cache and plan_caching.enabled() else None
    # a stored plan's memory is laid out (and its pages mapped, on another thread) while its kernels load
    plan = plan_caching.load(key, len(inputs), lambda p: self._lay_out(p, key.captured)) if key is not None else None
    self.from_plan = plan is not None
    if plan is not None: self._restore_kernels(plan)
    else:
      slot_of = self._schedule(inputs, bake_params(outputs))
      self.donation = self._plan_donation(set(donated))
      if key is not None and (stored := self._as_plan(slot_of, key.captured)) is not None:
        plan_caching.store(key, stored)
      self._plan_intermediates()
    self._prepare_launches()

  def _body_slot(self, node: UOp) -> SlotInfo:
    """A slot of a body compiled for `self.device`: its values live there; a captured buffer must too."""
    assert self.device is not None
    if node.op is Ops.BUFFER and Device.backend(node.device) != Device.backend(self.device):
      raise ValueError(f"a body compiled for {self.device} captures an array on {node.device}; "
                       f"move it with tgfn.device_put(x, {self.device!r})")
    return SlotInfo(node.device if node.op is Ops.BUFFER else self.device, math.prod(node.shape), node.dtype, node.shape)

  def _schedule(self, inputs: Sequence[UOp], outputs: Sequence[UOp]) -> dict[UOp, int]:
    """Schedule and compile: fill slots, captured constants, steps and output slots. Returns node -> slot."""
    slot_of: dict[UOp, int] = {p: i for i, p in enumerate(inputs)}
    home = self.device or home_device((*inputs, *outputs))
    place = (lambda node: SlotInfo.of(node, home)) if self.device is None else self._body_slot
    self.slots = [place(p) for p in inputs]
    self.fixed: dict[int, Buffer] = {}   # captured constants and planned intermediates

    def slot(node: UOp) -> int:
      if node not in slot_of:
        slot_of[node] = len(self.slots)
        self.slots.append(place(node))
        if node.op is Ops.BUFFER: self.fixed[slot_of[node]] = node.buffer
      return slot_of[node]

    computed = [o for o in outputs if o.op not in (Ops.BUFFER, Ops.PLACEHOLDER)]
    self.steps: list[Step] = []
    items = create_schedule(computed)
    if settings.DEBUG >= 3: debug.print_schedule(items, computed)
    groups = call_groups(items)
    for item in items:
      if item.kernel is None and item.output.op is Ops.CALL:  # (an inlined call is a kernel named as its CALL)
        group = groups.pop((item.output.arg[0], item.inputs), None)
        if group is None: continue  # written by the step of an earlier output of the same call
        spec = item.output.arg[0]
        # an output nobody reads still needs a buffer to be written to: a node that stands for it
        outs = [slot(group[i] if i in group else UOp(Ops.CALL, dt, item.inputs, (spec, i)))
                for i, (_, dt) in enumerate(spec.out_avals)]
        device = self.slots[outs[0]].device
        self.steps.append(Step(None, None, tuple(outs) + tuple(slot(x) for x in item.inputs), len(outs),
                               _call_runner(spec, device, len(outs))))
        continue
      out_slots = tuple(slot(o) for o in item.outputs)
      if item.host:
        self.steps.append(Step(None, None, (*out_slots, *(slot(x) for x in item.inputs)), 1, _host_runner(item.output)))
      elif item.kernel is None: self.steps.append(Step(None, None, (*out_slots, slot(item.inputs[0]))))
      else: self.steps.append(Step(None, item.kernel, (*out_slots, *(slot(b) for b in item.kernel.inputs)), len(out_slots)))
    # all kernels compile together: one batch per device (tgfn/engine/realize.py)
    kernel_steps = [s for s in self.steps if s.lowered is not None]
    before, start = (Counters.kernels_compiled, Counters.source_chars), time.perf_counter()
    kernels = compile_kernels([(s.lowered, self.slots[s.slots[0]].device) for s in kernel_steps])
    for step, kernel in zip(kernel_steps, kernels): step.kernel = kernel
    if settings.DEBUG >= 1 and kernels:
      debug.print_compiled(f"compiled {self.name}", kernels, Counters.kernels_compiled - before[0],
                           Counters.source_chars - before[1], time.perf_counter() - start)
    self.output_slots = [slot(o) for o in outputs]
    return slot_of

  def _as_plan(self, slot_of: dict[UOp, int], captured: list[UOp]) -> Optional[plan_caching.Plan]:
    """This graph as a plan for the disk (before intermediates are planned), or None if it cannot be one."""
    if any(step.call is not None for step in self.steps): return None
    captured_index = {u: i for i, u in enumerate(captured)}
    node_of = {s: u for u, s in slot_of.items()}
    if any(node_of[s] not in captured_index for s in self.fixed): return None  # a constant the key did not number
    kernel_index: dict[int, int] = {}
    kernels: list[plan_caching.StoredKernel] = []
    steps = []
    for step in self.steps:
      k = step.kernel
      if k is not None and id(k) not in kernel_index:
        kernel_index[id(k)] = len(kernels)
        kernels.append(plan_caching.StoredKernel(k.name, k.device, k.symbol or k.name, k.source, k.flops, k.opts,
                                                 debug.base_label(k.lowered), debug.kernel_bytes(k.lowered)))
      steps.append((-1 if k is None else kernel_index[id(k)], step.slots, step.n_outputs))
    devices = {info.device for info in self.slots} | {k.device for k in kernels}
    return plan_caching.Plan([(i.device, i.size, i.dtype, i.shape) for i in self.slots],
                             {s: captured_index[node_of[s]] for s in self.fixed}, kernels, steps, self.output_slots,
                             dict(self.donation), {d: plan_caching.compiler_key(d) for d in sorted(devices)})

  def _lay_out(self, plan: plan_caching.Plan, captured: list[UOp]) -> None:
    """Take slots and steps from a stored plan (kernels to come: `_restore_kernels`) and plan the
    intermediates; the captured constants are this trace's."""
    self.slots = [SlotInfo(device, size, dtype, shape) for device, size, dtype, shape in plan.slots]
    self.fixed = {s: captured[c].buffer for s, c in plan.captured.items()}
    self.steps = [Step(None, None, slots, n_out) for _, slots, n_out in plan.steps]
    self.output_slots = list(plan.outputs)
    self.donation = dict(plan.donation)
    self._plan_intermediates()

  def _restore_kernels(self, plan: plan_caching.Plan) -> None:
    """Give the laid-out steps the stored plan's kernels (their programs loaded)."""
    kernels = [CompiledKernel(k.name, k.device, program, k.source, k.flops, k.opts, symbol=k.symbol,
                              stored_label=k.label, stored_bytes=k.nbytes)
               for k, program in zip(plan.kernels, plan.programs)]
    for step, (k, _, _) in zip(self.steps, plan.steps):
      if k >= 0: step.kernel = kernels[k]

  def _prepare_launches(self) -> None:
    if self._prefaulting is not None: self._prefaulting.join()
    self.kernels = [s.kernel for s in self.steps if s.kernel is not None]
    # the launch list the replay loop walks: (program, slots, kind): a kernel takes raw arguments, a call
    # its slots' Buffers, a copy (program None) copies slot 1 into slot 0
    launched = [s for s in self.steps if s.kernel is None or self.slots[s.slots[0]].size]
    self._launches = [(s.kernel.program if s.kernel else s.call, s.slots, "call" if s.call else "kernel") for s in launched]
    self._launch_steps = [(s.kernel, self.slots[s.slots[0]].device, s.n_outputs) for s in launched]  # for DEBUG
    # per fresh output: what allocating it needs, looked up once here rather than on every call
    self._fresh_outputs = [(s, info.device, info.size, info.dtype, Device[info.device].allocator,
                            Device[info.device].kernel_arg)
                           for s in dict.fromkeys(self.output_slots)
                           if s >= self.n_inputs and s not in self.fixed and s not in self.donation
                           for info in (self.slots[s],)]
    self._n_launches = len(self._launches)
    # The straight-line replay costs about a millisecond of Python compile: the first call runs the generic
    # loop and generates it, so a first call (and a graph run once) does not wait for it
    self._replay: Callable[..., list[Buffer]] = self._first_replay

  def _plan_intermediates(self) -> None:
    """Give intermediates buffers, reusing one once its last reader has run (greedy). On a device whose
    handles are addresses an intermediate may take a free block of another size or dtype (the best fit:
    the same size first, else the smallest larger one), as a view: fewer blocks and fresh pages to fault
    in on the first call (the MLP step: 7.7 -> 5.9 MB). Elsewhere only a block of the same size and dtype.
    They belong to the graph, so two calls of it must not run at once (`has_scratch` says when)."""
    self.has_scratch = any(step.call is not None for step in self.steps)  # a call runs scratch buffers
    per_call = set(self.output_slots) | set(range(self.n_inputs)) | set(self.fixed)
    last_use: dict[int, int] = {}
    for i, step in enumerate(self.steps):
      for s in step.slots: last_use[s] = i
    free: dict[tuple, list[Buffer]] = {}  # by (device, dtype, size), or by (device,) where views are possible
    block_of: dict[int, Buffer] = {}      # slot -> the block it uses (itself, or the block it is a view of)
    self.intermediate_bytes = 0           # of the blocks made (tests count it)
    for i, step in enumerate(self.steps):
      for out in step.outputs:
        if out in per_call or out in self.fixed: continue
        self.has_scratch = True
        info = self.slots[out]
        self.fixed[out], block_of[out] = self._intermediate(info, free)
      for s in set(step.slots):
        if last_use[s] == i and s in block_of:
          block = block_of.pop(s)
          free.setdefault(self._free_key(block.device, block.dtype, block.size), []).append(block)
    # every block is free after the last step; the large ones have their pages mapped on another thread
    # (a system call: no lock held), joined before the first launch
    mapped = [(prefault, block.handle, block.nbytes) for block in (b for blocks in free.values() for b in blocks)
              if block.nbytes >= PREFAULT_BYTES and (prefault := getattr(Device[block.device].allocator, "prefault", None))]
    self._prefaulting = None
    if mapped:
      self._prefaulting = threading.Thread(target=_prefault, args=(mapped,), daemon=True, name="tgfn-prefault")
      self._prefaulting.start()

  @staticmethod
  def _free_key(device: str, dtype: Any, size: int) -> tuple:
    return (device,) if Device[device].address_handles else (device, dtype, size)

  def _intermediate(self, info: SlotInfo, free: dict[tuple, list[Buffer]]) -> tuple[Buffer, Buffer]:
    """(the buffer of an intermediate, the block it lives in): a free block, or a fresh one."""
    key, nbytes = self._free_key(info.device, info.dtype, info.size), info.size * info.dtype.itemsize
    fits = [b for b in free.get(key, ()) if b.nbytes >= nbytes]
    if not fits:
      block = Buffer(info.device, info.size, info.dtype)
      self.intermediate_bytes += block.nbytes
      return block, block
    block = min(fits, key=lambda b: (b.nbytes != nbytes, b.nbytes))
    free[key].remove(block)
    same = (block.size, block.dtype) == (info.size, info.dtype)
    return (block if same else BufferView(block, 0, info.size, info.dtype)), block

  def _plan_donation(self, donated: set[int]) -> dict[int, int]:
    """output slot -> donated input slot whose memory it may take. Safe when no later step reads the
    input, and the producing kernel reads it, if at all, only at the element it writes."""
    last_read: dict[int, int] = {}
    for k, step in enumerate(self.steps):
      for s in step.inputs: last_read[s] = k
    plan: dict[int, int] = {}
    for k, step in enumerate(self.steps):
      for out in step.outputs:
        if out not in self.output_slots or out in self.fixed or step.kernel is None: continue
        for i in sorted(donated - set(plan.values())):
          if self.slots[i].key() == self.slots[out].key() and last_read.get(i, -1) <= k and \
              self._reads_only_in_place(step, i):
            plan[out] = i
            break
    return plan

  @staticmethod
  def _reads_only_in_place(step: Step, input_slot: int) -> bool:
    if input_slot not in step.inputs: return True
    # C kernels declare their buffers `restrict`: the compiler may move a load of the input past the store
    # of another output, which, sharing the input's memory, has overwritten it (gcc -O1 does). Only a lone
    # store is safe: every load of the input feeds the value it stores.
    if len(step.lowered.ast.src) > 1: return False
    position = step.slots.index(input_slot)
    at = step.lowered.ast.src[0].src[1]  # every output of a kernel is stored at the same index
    loads = [u for u in step.lowered.ast.toposort() if u.op is Ops.LOAD and u.src[0].arg == position]
    return all(len(u.src) == 2 and u.src[1] is at for u in loads)

  def __call__(self, inputs: Sequence[Buffer], reuse: Optional[Sequence[Buffer]] = None) -> list[Buffer]:
    level, nans = settings.DEBUG, settings.DEBUG_NANS
    if not level and not nans:
      Counters.kernels_launched += self._n_launches
      return self._replay(inputs, reuse)
    return self._run(inputs, reuse, level, nans)

  def _first_replay(self, inputs: Sequence[Buffer], reuse: Optional[Sequence[Buffer]] = None) -> list[Buffer]:
    self._replay = self._second_replay
    return self._run(inputs, reuse, 0, False)

  def _second_replay(self, inputs: Sequence[Buffer], reuse: Optional[Sequence[Buffer]] = None) -> list[Buffer]:
    # a kernel still on its quick build (tiered compile, tgfn_drivers/_cpu_tiers.py) is to be swapped for
    # its optimized one: the straight-line replay would keep the quick function, so wait with it until then
    if any(getattr(program, "provisional", False) for program, _, _ in self._launches):
      return self._run(inputs, reuse, 0, False)
    self._replay = self._make_replay()
    return self._replay(inputs, reuse)

  def _run(self, inputs: Sequence[Buffer], reuse: Optional[Sequence[Buffer]], level: int, nans: bool) -> list[Buffer]:
    """One call, launch by launch: with DEBUG (timing each launch), DEBUG_NANS, or the first time."""
    start = time.perf_counter()
    buffers: list[Any] = list(inputs) + [None] * (len(self.slots) - self.n_inputs)
    for s, buf in self.fixed.items(): buffers[s] = buf
    for k, (s, device, size, dtype, allocator, kernel_arg) in enumerate(self._fresh_outputs):
      buffers[s] = reuse[k] if reuse is not None else Buffer.allocated(device, size, dtype, allocator, kernel_arg)
    for out, i in self.donation.items():
      donor = buffers[i]
      # a buffer passed in two argument positions cannot be given away: fall back to fresh memory
      if sum(b is donor for b in inputs) > 1: buffers[out] = Buffer(donor.device, donor.size, donor.dtype)
      else: buffers[out] = buffers[i] = donor.donate()
    args = [b.arg if b is not None else None for b in buffers]
    ran_before = debug.counts() if level else None
    for (program, slots, kind), (kernel, device, n_out) in zip(self._launches, self._launch_steps):
      t0 = time.perf_counter()
      if program is None: buffers[slots[0]].copyin(buffers[slots[1]].numpy())
      elif kind == "call": program([buffers[s] for s in slots])  # (a host or sub-graph call reports itself)
      else: program(*[args[s] for s in slots])
      if level and kernel is not None: debug.print_launch(kernel, device, time.perf_counter() - t0)
      if level and program is None:
        copy = buffers[slots[0]]
        debug.copied(buffers[slots[1]].device, copy.device, copy.size, copy.dtype, t0)
      if nans and kernel is not None: debug_nans.check(kernel, [buffers[s] for s in slots], n_out)
    if level or nans: Counters.kernels_launched += len(self._launches)  # (else counted by the caller)
    if level and self.device is None:  # (a body's runs are summarized by its call: tgfn/engine/call.py)
      debug.print_call(f"jit call of {self.name}", debug.counts() - ran_before, time.perf_counter() - start)
    return [buffers[s] for s in self.output_slots]

  def _make_replay(self) -> Callable[..., list[Buffer]]:
    """__call__ without DEBUG or DEBUG_NANS as one straight-line Python function, generated once: read
    the input pointers, allocate the outputs, hand donated memory over, run each launch, return the
    outputs. No loops, lists or lookups are left on the per-call path."""
    env: dict[str, Any] = {"allocated": Buffer.allocated, "Buffer": Buffer}
    lines = ["def replay(inputs, reuse=None):"]
    for i in range(self.n_inputs):  # (.arg, a property, only for a buffer not yet allocated -- or donated: it raises)
      lines += [f"  b{i} = inputs[{i}]; a{i} = b{i}._arg", f"  if a{i} is None: a{i} = b{i}.arg"]
    for s, buf in self.fixed.items(): env[f"b{s}"], env[f"a{s}"] = buf, buf.arg
    if self._fresh_outputs:  # fresh buffers, or (reuse) the recycled ones of an earlier call
      lines.append("  if reuse is None:")
      for s, device, size, dtype, allocator, kernel_arg in self._fresh_outputs:
        env[f"spec{s}"] = (device, size, dtype, allocator, kernel_arg)
        lines.append(f"    b{s} = allocated(*spec{s}); a{s} = b{s}._arg")
      lines.append("  else:")
      lines += [f"    b{s} = reuse[{k}]; a{s} = b{s}._arg" for k, (s, *_) in enumerate(self._fresh_outputs)]
    if self.donation:
      # a buffer passed in two argument positions cannot be given away: it keeps its memory and the
      # output gets fresh memory (one set of ids answers whether any input came twice)
      lines.append(f"  distinct = len({{id(b) for b in inputs}}) == {self.n_inputs}")
      for out, i in self.donation.items():
        lines.append(f"  if distinct or sum(b is b{i} for b in inputs) == 1: b{out} = b{i} = b{i}.donate()")
        lines.append(f"  else: b{out} = Buffer(b{i}.device, b{i}.size, b{i}.dtype)")
        lines.append(f"  a{out} = b{out}.arg")
    batches = self._launch_batches()
    in_batch = {j for k, batch in batches.items() for j in range(k + 1, k + batch.count)}
    for k, (program, slots, kind) in enumerate(self._launches):
      if k in in_batch: continue
      if (batch := batches.get(k)) is not None:  # launches k, k+1, ... by one call
        env[f"r{k}"], env[f"t{k}"], env[f"pack{k}"], env[f"i{k}"] = batch.run, batch.table, batch.pack, batch.index
        lines.append(f"  r{k}(t{k}, {batch.count}, pack{k}({', '.join(f'a{s}' for s in batch.slots)}), i{k})")
        continue
      env[f"p{k}"] = program
      if program is None: lines.append(f"  b{slots[0]}.copyin(b{slots[1]}.numpy())")  # a copy between devices
      elif kind == "call": lines.append(f"  p{k}([{', '.join(f'b{s}' for s in slots)}])")
      else:
        # a driver may hand out its raw launch function for pointer-only arguments (no Python wrapper)
        direct = getattr(program, "direct_launcher", None)
        if direct is not None: env[f"p{k}"] = direct(len(slots))
        lines.append(f"  p{k}({', '.join(f'a{s}' for s in slots)})")
    lines.append(f"  return [{', '.join(f'b{s}' for s in self.output_slots)}]")
    exec("\n".join(lines), env)  # our own generated code, built from slot numbers only
    return env["replay"]

  def _launch_batches(self) -> dict[int, Any]:
    """{first launch: batch} for each run of two or more kernel launches in a row that their device can
    make one call of (Compiled.batch_launcher); none while it cannot yet (the replay is then generated
    again once it can)."""
    runs: list[list[int]] = [[]]
    addresses: dict[int, int] = {}
    for k, ((program, slots, kind), (_, device, _)) in enumerate(zip(self._launches, self._launch_steps)):
      batchable = kind == "kernel" and Device[device].batch_launcher is not None
      address_of = getattr(program, "batch_address", None) if batchable else None
      if address_of is None or (address := address_of(len(slots))) is None:
        if runs[-1]: runs.append([])
        continue
      if runs[-1] and self._launch_steps[runs[-1][-1]][1] != device: runs.append([])
      runs[-1].append(k)
      addresses[k] = address
    batches = {}
    for run in runs:
      if len(run) < 2: continue
      device = self._launch_steps[run[0]][1]
      batch = Device[device].batch_launcher([addresses[k] for k in run],
                                            [self._launches[k][1] for k in run], self._batches_ready)
      if batch is None: return {}
      batches[run[0]] = batch
    return batches

  def _batches_ready(self) -> None:
    """Generate the replay again, now with launch batches (called by the device once it can make them)."""
    if self._replay != self._first_replay: self._replay = self._second_replay  # (a new bound method each access: ==)

  @property
  def can_reuse_outputs(self) -> bool:
    """One fresh output buffer and nothing else returned: the case where recycling it is simple."""
    return len(self._fresh_outputs) == 1 and len(self.output_slots) == 1

  def replay_into(self, inputs: Sequence[Buffer], output: Buffer) -> None:
    """Run again writing the result into `output`, a buffer from an earlier call nobody holds anymore."""
    if settings.DEBUG or settings.DEBUG_NANS:
      self(inputs, (output,))
    else:
      Counters.kernels_launched += self._n_launches
      self._replay(inputs, (output,))

  def source(self) -> str:
    return "\n".join(f"// kernel {k.name} on {k.device}\n{k.source}" for k in self.kernels)
