"""Run a schedule: compile each kernel once per device (cached in memory and on disk), allocate
output buffers, launch. Realized results are remembered so later graphs load instead of recompute."""
from __future__ import annotations

import math
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Optional, Sequence

from tgfn.codegen.decompositions import transcendental_switch
from tgfn.codegen.opts import Opt
from tgfn.codegen.pipeline import default_opts, optimize, scalar_passes
from tgfn.codegen.policy import strict_float
from tgfn.codegen.search import beam_width, searched_opts
from tgfn.device import Buffer, Device
from tgfn.dtype import DType, real_dtype
from tgfn.engine import batch_cache, queues
from tgfn.engine.call import call_groups, run_call
from tgfn.engine.structure import REALIZED, Structure, realized_buffer, structure
from tgfn import helpers
from tgfn.helpers import settings, track_begin, track_end, track_kernel
from tgfn.viz import debug
from tgfn.viz import nans as debug_nans
from tgfn.viz.locations import kernel_origin
from tgfn.ops.host import run_host
from tgfn.schedule.kernelize import LoweredKernel
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops, UOp, substitute, toposort, unique_ids
from tgfn.uop.spec import spec_enabled, verify_kernel, verify_linear, verify_tensor_graph


@dataclass
class PreparedKernel:
  """A kernel through codegen, not yet compiled: its linear program, source and opts."""
  name: str
  source: str
  linear: list[UOp]
  flops: int
  opts: list[Opt]          # the optimizations applied (tgfn/codegen/opts.py)


@dataclass
class CompiledKernel:
  name: str
  device: str
  program: Callable[..., None]
  source: str
  flops: int
  opts: list[Opt]          # the optimizations applied (tgfn/codegen/opts.py)
  lowered: Optional[LoweredKernel] = field(default=None, repr=False)
  _linear: Optional[list[UOp]] = field(default=None, repr=False)
  compile_s: float = field(default=0.0, repr=False)  # seconds codegen and compiling took (DEBUG=2 prints it)
  symbol: Optional[str] = field(default=None, repr=False)  # its function's name in the binary, if not `name`
  # a kernel loaded from the jit plan cache has no `lowered`: its DEBUG=2 name (without '#n') and bytes moved
  stored_label: str = field(default="", repr=False)
  stored_bytes: int = field(default=0, repr=False)

  @property
  def linear(self) -> list[UOp]:
    """The linear program (a kernel whose source came from the disk cache makes it again on demand)."""
    if self._linear is None:
      if self.lowered is None:  # loaded by a jitted function from the plan cache (tgfn/engine/plan_cache.py)
        raise ValueError(f"kernel {self.name} was loaded from the jit plan cache and has no linear program; "
                         f"jit(f).lower(...) compiles afresh and keeps it")
      self._linear = prepare_kernel(self.lowered, self.device, self.opts).linear
    return self._linear


class Counters:
  """Running totals, for tests and benchmarks: kernels launched, kernels compiled (and the characters of
  their generated source), and schedules made (realizations whose graph structure had no plan yet)."""
  kernels_launched = 0
  kernels_compiled = 0
  source_chars = 0
  schedules = 0


# a node's slots, set directly (UOp.__setattr__ refuses them): buffer_uop runs once per result of every jit call
_new_node, _set_op, _set_dtype, _set_src, _set_arg = object.__new__, UOp.op.__set__, UOp.dtype.__set__, UOp.src.__set__, \
    UOp.arg.__set__


_next_unique_id = unique_ids.__next__  # what unique_id() returns, one Python call less


def buffer_uop(buffer: Buffer, shape: tuple[int, ...], committed: bool = False) -> UOp:
  """A tensor-level BUFFER node holding `buffer` (kept as an attribute, off the hash key), pinned to its
  device if `committed` (UOp.committed); built as UOp.unique builds one, without its calls."""
  u = _new_node(UOp)
  _set_op(u, Ops.BUFFER)
  _set_dtype(u, buffer.dtype)
  _set_src(u, ())
  _set_arg(u, (_next_unique_id(), buffer.device, tuple(shape)))
  u.__dict__["buffer"] = buffer
  if committed: u.__dict__["committed"] = True
  return u


# (device, kernel AST, codegen switches, BEAM width, opts) -> compiled kernel, least recently used first.
# Bounded: an evicted kernel's program (and on the CPU its shared object) is freed once no jitted function
# or eager plan holds it.
_compiled: OrderedDict[tuple, CompiledKernel] = OrderedDict()
_compiled_lock = threading.Lock()


def kernel_cache_size() -> int:
  """How many compiled kernels stay in memory: TGFN_KERNEL_CACHE_SIZE, default 4096."""
  return max(1, settings.TGFN_KERNEL_CACHE_SIZE)


_NOT_FLOPS = (Ops.CONST, Ops.LOAD, Ops.STORE, Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_ACC, Ops.VECTORIZE, Ops.GEP)


def count_flops(linear: list[UOp]) -> int:
  """Float ALU ops executed (per vector lane), counting each op once per iteration of the loops around it.
  A multiply-accumulate is two: its MUL and its ASSIGN, fused into one FMA or not."""
  flops, trips = 0, [1]
  for u in linear:
    if u.op is Ops.RANGE: trips.append(trips[-1] * u.src[0].arg)
    elif u.op is Ops.ENDRANGE: trips.pop()
    elif u.op is Ops.ASSIGN: flops += trips[-1] * u.src[0].dtype.count
    elif u.op not in _NOT_FLOPS and u.dtype is not None and not u.dtype.is_int:
      flops += trips[-1] * u.dtype.count
  return flops


def _cache_key(kernel: LoweredKernel, device: str, opts: Optional[list[Opt]]) -> tuple:
  # TRANSCENDENTAL, STRICT_FLOAT=1 and BEAM=n change what codegen emits for the same AST: part of the key
  # instances of one backend ("CPU", "CPU:1") share compiled kernels: the key holds the backend
  return (Device.backend(device), kernel.ast, transcendental_switch(), strict_float(), beam_width(), None if opts is None else tuple(opts))


def _remember(key: tuple, compiled: CompiledKernel) -> CompiledKernel:
  """Keep `compiled` in the bounded in-memory cache; if another thread got there first, use theirs."""
  with _compiled_lock:
    compiled = _compiled.setdefault(key, compiled)
    _compiled.move_to_end(key)
    while len(_compiled) > kernel_cache_size():
      _, evicted = _compiled.popitem(last=False)
      # plans hold their kernels: drop those that hold this one, or it would stay loaded
      for plan_key in [k for k, plan in _plans.items() if any(s.kernel is evicted for s in plan.steps)]: del _plans[plan_key]
  return compiled


def _cached(key: tuple) -> Optional[CompiledKernel]:
  with _compiled_lock:
    if (hit := _compiled.get(key)) is not None: _compiled.move_to_end(key)
    return hit


def _buffer_dtypes(kernel: LoweredKernel) -> list[DType]:
  """The element dtypes a kernel's code sees: a complex buffer is its real dtype, twice as long
  (tgfn/codegen/complex_lower.py)."""
  return [real_dtype(b.dtype) for b in kernel.buffers]


def prepare_kernel(kernel: LoweredKernel, device: str, opts: Optional[list[Opt]] = None,
                   symbol: Optional[str] = None) -> PreparedKernel:
  """Codegen for `kernel` on `device`: passes, `opts` (default: the device's heuristic or the BEAM
  search's list), linear, source (its function named `symbol`, by default the kernel's name)."""
  dev = Device[device]
  if spec_enabled(): verify_kernel(kernel.ast)
  track_kernel(kernel)
  ast = scalar_passes(kernel.ast, dev.renderer)
  if opts is None: opts = searched_opts(kernel, ast, device) if beam_width() else default_opts(ast, dev.renderer)
  linear = optimize(ast, opts)
  if spec_enabled(): verify_linear(linear)
  try:
    src = dev.renderer.render(symbol or kernel.name, linear, _buffer_dtypes(kernel), [p.dtype for p in kernel.params])
  except NotImplementedError as error:  # what the device cannot do (WGSL's 64-bit numbers): name the user's line
    raise NotImplementedError(f"{error}{kernel_origin(kernel)}") from None
  if settings.TGFN_CAPTURE:  # process replay (docs/process-replay.md)
    from tgfn.tools.process_replay import record; record(device, kernel, src)  # noqa: E702
  if (level := settings.DEBUG) >= 3: debug.print_kernel(kernel, opts, src, linear, level)
  return PreparedKernel(kernel.name, src, linear, count_flops(linear), list(opts))


def compile_kernel(kernel: LoweredKernel, device: str, opts: Optional[list[Opt]] = None) -> CompiledKernel:
  """Compile `kernel` for `device` with `opts` (default: the device's heuristic, or with BEAM=n the
  searched list, tgfn/codegen/search.py), once per process."""
  key = _cache_key(kernel, device, opts)
  if (hit := _cached(key)) is not None: return hit
  start = time.perf_counter()
  prepared = prepare_kernel(kernel, device, opts)
  dev = Device[device]
  program = dev.runtime(kernel.name, dev.compiler.compile_cached(prepared.source))
  Counters.kernels_compiled += 1
  Counters.source_chars += len(prepared.source)
  return _remember(key, CompiledKernel(kernel.name, device, program, prepared.source, prepared.flops, prepared.opts,
                                       kernel, prepared.linear, time.perf_counter() - start))


def compile_kernels(kernels: list[tuple[LoweredKernel, str]]) -> list[CompiledKernel]:
  """Compile (kernel, device) pairs with default opts, as one batch per device where the driver builds
  several kernels at once (one compiler run, one library); kernels already in memory are reused."""
  keys = [_cache_key(kernel, device, None) for kernel, device in kernels]
  missing: dict[tuple, tuple[LoweredKernel, str]] = {}
  for key, item in zip(keys, kernels):
    if key not in missing and _cached(key) is None: missing[key] = item
  by_device: dict[str, list[tuple]] = {}
  for key, (_, device) in missing.items(): by_device.setdefault(device, []).append(key)
  done: dict[tuple, CompiledKernel] = {}
  for device, group in by_device.items():
    # a BEAM search compiles and times candidates of its own, kernel by kernel
    if Device[device].build_many is None or len(group) == 1 or beam_width():
      for key in group: done[key] = compile_kernel(*missing[key])
    else:
      done.update(zip(group, _build_batch([missing[key][0] for key in group], device, group)))
  return [done.get(key) or compile_kernel(*item) for key, item in zip(keys, kernels)]


def _build_batch(kernels: list[LoweredKernel], device: str, keys: list[tuple]) -> list[CompiledKernel]:
  """Codegen each kernel (or take its source from the disk cache) and compile them together."""
  dev, start = Device[device], time.perf_counter()
  # DEBUG=3 and up print, and VIZ records, each kernel as codegen makes it: not from the disk cache then
  disk_key = None if settings.TGFN_CAPTURE or settings.DEBUG >= 3 or helpers.tracker is not None else \
    batch_cache.batch_key(device, dev.renderer, dev.compiler.cachekey, kernels, [None] * len(kernels))
  stored = batch_cache.load(disk_key, len(kernels)) if disk_key is not None else None
  records = stored if stored is not None else []
  linears: list[Optional[list[UOp]]] = [None] * len(kernels)

  def prepared_sources() -> Iterator[tuple[str, str]]:
    """Each kernel's (symbol, source), generated as the driver asks: it compiles the first ones meanwhile."""
    if stored is not None:
      yield from ((r.symbol, r.source) for r in stored)
      return
    used: set[str] = set()
    for i, kernel in enumerate(kernels):
      symbol = kernel.name
      if symbol in used:  # two kernels of one name: one library needs distinct function names
        symbol = next(f"{kernel.name}_{n}" for n in range(1, len(kernels) + 1) if f"{kernel.name}_{n}" not in used)
      prepared = prepare_kernel(kernel, device, symbol=symbol)
      linears[i], source = prepared.linear, prepared.source
      used.add(symbol)
      records.append(batch_cache.PreparedRecord(symbol, source, prepared.flops, prepared.opts))
      yield symbol, source

  programs = dev.build_many(prepared_sources())
  if stored is None and disk_key is not None: batch_cache.store(disk_key, records)
  Counters.kernels_compiled += len(kernels)
  Counters.source_chars += sum(len(r.source) for r in records)
  each = (time.perf_counter() - start) / len(kernels)  # one batch: its time shared out
  return [_remember(key, CompiledKernel(k.name, device, program, r.source, r.flops, r.opts, k, linear, each, r.symbol))
          for key, k, program, r, linear in zip(keys, kernels, programs, records, linears)]


def with_realized(node: UOp) -> UOp:
  """`node` with every already-computed subgraph replaced by the buffer that holds it."""
  mapping = {n: b for n in toposort([node]) if (b := realized_buffer(n)) is not None}
  return substitute(node, mapping) if mapping else node


# A kernel takes at most this many scalar parameters; past it, all of its PARAMs are baked in as constants
# (ctypes passes at most 1024 arguments, and a graph with that many Python scalars is a long unrolled
# chain built once, not a loop over values). Such a plan is not kept: its kernels hold values.
MAX_KERNEL_PARAMS = 64


def _bake_params(kernel: LoweredKernel) -> LoweredKernel:
  consts = {UOp(Ops.DEFINE_VAR, p.dtype, (), i): UOp.const(p.dtype, p.arg) for i, p in enumerate(kernel.params)}
  return LoweredKernel(kernel.name, substitute(kernel.ast, consts), kernel.buffers, [], kernel.n_outputs)


@dataclass(frozen=True)
class _Step:
  kernel: Optional[CompiledKernel]  # None: a copy between devices
  device: str
  driver: Any                       # Device[device], looked up once
  outputs: tuple[tuple[int, Any], ...]  # (size, dtype) of each output
  slots: tuple[int, ...]            # buffer slots: outputs first, then what it reads
  params: tuple[int, ...]           # the kernel's scalar parameters, as positions in the graph's PARAMs
  call: Optional[Callable[[list[Buffer], list[Buffer]], None]] = None  # (inputs, outputs): a CALL or HOST


@dataclass(frozen=True)
class _Plan:
  """How to realize every graph of one structure: slots 0..n_leaves-1 are the graph's leaf buffers, the
  steps fill the rest, and `outputs` names the slot of each output."""
  n_slots: int
  steps: tuple[_Step, ...]
  outputs: tuple[int, ...]
  cacheable: bool
  compiled_in: OrderedDict            # the kernel cache its kernels came from (see _plan_for)
  remember: tuple[tuple[int, UOp], ...] = ()  # (slot, node): values to remember on the graph's nodes
  devices: frozenset = frozenset()    # the devices its steps run on; several: each on its own queue


# graph structure (tgfn/engine/structure.py) -> plan, least recently used first
_plans: OrderedDict[tuple, _Plan] = OrderedDict()


def home_device(nodes: Sequence[UOp]) -> str:
  """Where a value computed from constants alone runs: where the graph's inputs live (the first node with a
  device), else on the default device. A kernel on the default device would hand its buffer to kernels of
  another one: an OpenCL cl_mem read as a CPU address."""
  return next((d for n in nodes if (d := n.device) is not None), None) or Device.DEFAULT


def _make_plan(outs: list[UOp], shape: Structure) -> _Plan:
  """Schedule, lower and compile `outs` once, recording the work in terms of slots and PARAM positions."""
  Counters.schedules += 1
  graphs = [with_realized(o) for o in outs]
  track_begin(f"realize {len(graphs)} output(s)", graphs)
  if spec_enabled():
    for g in graphs: verify_tensor_graph(g)
  slot_of: dict[UOp, int] = {leaf: i for i, leaf in enumerate(shape.leaves)}
  param_of = {p: i for i, p in enumerate(shape.params)}
  steps, cacheable, remember = [], True, []
  to_compile: list[tuple[int, LoweredKernel, str]] = []  # (step index, kernel, device)
  items = create_schedule([g for g in graphs if g.op is not Ops.BUFFER])
  if settings.DEBUG >= 3: debug.print_schedule(items, graphs)
  groups = call_groups(items)
  home = home_device(graphs)
  for item in items:
    device = item.output.device or home
    if item.kernel is None and item.output.op is Ops.CALL:  # a sub-graph call computes all of its outputs at its first one
      spec = item.output.arg[0]
      if (group := groups.pop((spec, item.inputs), None)) is None: continue
      # every output gets a slot; those of a graph with a device are remembered on their nodes after the
      # run, so `carry, ys = scan(...)` runs the loop once. Such a plan names its graph's nodes: not kept
      nodes = [group.get(i) or UOp(Ops.CALL, dt, item.inputs, (spec, i)) for i, (_, dt) in enumerate(spec.out_avals)]
      slots = tuple(slot_of.setdefault(o, len(slot_of)) for o in nodes) + tuple(slot_of[x] for x in item.inputs)
      outputs = tuple((math.prod(shape), dt) for shape, dt in spec.out_avals)
      steps.append(_Step(None, device, Device[device], outputs, slots, (),
                         lambda ins, outs, spec=spec, device=device: run_call(spec, device, ins, outs)))
      if item.output.device is not None: remember += [(slot_of[o], o) for o in nodes]
      cacheable = False
      continue
    if item.host:  # a NumPy function on the host; its node is kept for its arg and shapes: not kept
      node = item.output
      slots = (slot_of.setdefault(node, len(slot_of)),) + tuple(slot_of[x] for x in item.inputs)
      steps.append(_Step(None, device, Device[device], ((math.prod(node.shape), node.dtype),), slots, (),
                         lambda ins, outs, node=node: run_host(node, outs[0], ins)))
      cacheable = False
      continue
    reads = item.kernel.inputs if item.kernel is not None else item.inputs
    slots = tuple(slot_of.setdefault(o, len(slot_of)) for o in item.outputs) + tuple(slot_of[b] for b in reads)
    outputs = tuple((math.prod(o.shape), o.dtype) for o in item.outputs)
    if item.kernel is None:
      steps.append(_Step(None, device, Device[device], outputs, slots, ()))
      continue
    lowered = item.kernel
    if len(lowered.params) > MAX_KERNEL_PARAMS: lowered, cacheable = _bake_params(lowered), False
    to_compile.append((len(steps), lowered, device))
    steps.append(_Step(None, device, Device[device], outputs, slots, tuple(param_of[p] for p in lowered.params)))
  # the kernels compile as one batch (one compiler process per unit, in parallel: realizing a model's lazy
  # parameters is many small kernels), then take their places
  for (i, _, _), kernel in zip(to_compile, compile_kernels([(lowered, device) for _, lowered, device in to_compile])):
    steps[i] = replace(steps[i], kernel=kernel)
  track_end([s.kernel for s in steps])
  return _Plan(len(slot_of), tuple(steps), tuple(slot_of[g] for g in graphs), cacheable, _compiled, tuple(remember),
               frozenset(s.device for s in steps))


def _plan_for(outs: list[UOp], shape: Structure) -> _Plan:
  key = (shape.key, settings.code_key)
  if (plan := _plans.get(key)) is not None:
    if plan.compiled_in is _compiled:
      try:
        _plans.move_to_end(key)
      except KeyError:  # evicted by another thread meanwhile: still valid for this call
        pass
      return plan
    # the kernel cache was replaced (tests do, to compile again under other settings): so are the plans
    _plans.clear()
  plan = _make_plan(outs, shape)
  if plan.cacheable:
    with _compiled_lock:
      _plans[key] = plan
      while len(_plans) > kernel_cache_size(): _plans.popitem(last=False)
  return plan


def _run(plan: _Plan, leaves: list[UOp], params: list[UOp]) -> list[Any]:
  """Run `plan` on the graph's leaf buffers and PARAM values; return every slot's buffer."""
  buffers: list[Any] = [leaf.buffer for leaf in leaves] + [None] * (plan.n_slots - len(leaves))
  if len(plan.devices) > 1: return _run_on_queues(plan, buffers, params)
  start, level = time.perf_counter(), settings.DEBUG
  nans = settings.DEBUG_NANS
  ran_before = debug.counts() if level else None
  for step in plan.steps:
    if step.kernel is None or step.outputs[0][0] == 0:
      for slot, (size, dtype) in zip(step.slots, step.outputs): buffers[slot] = Buffer(step.device, size, dtype)
      _run_other(step, buffers)
      continue
    driver = step.driver
    for slot, (size, dtype) in zip(step.slots, step.outputs):
      buffers[slot] = Buffer.allocated(step.device, size, dtype, driver.allocator, driver.kernel_arg)
    t0 = time.perf_counter() if level else 0.0
    step.kernel.program(*[buffers[s].arg for s in step.slots],
                        *[driver.scalar_arg(params[i].arg, params[i].dtype) for i in step.params])
    Counters.kernels_launched += 1
    if level: debug.print_launch(step.kernel, step.device, time.perf_counter() - t0)
    if nans: debug_nans.check(step.kernel, [buffers[s] for s in step.slots], len(step.outputs))
  if level >= 1 and plan.steps:
    ran = debug.counts() - ran_before
    debug.print_call(f"realized {len(plan.outputs)} output(s)", ran, time.perf_counter() - start)
  return buffers


def _run_other(step: _Step, buffers: list[Any]) -> None:
  """Run a step that is not a kernel launch: a call (sub-graph or host; each reports itself to DEBUG),
  a copy between devices, or nothing (a kernel with an empty output)."""
  n = len(step.outputs)
  if step.call is not None: step.call([buffers[s] for s in step.slots[n:]], [buffers[s] for s in step.slots[:n]])
  elif step.kernel is None:
    started = debug.clock()
    buffers[step.slots[0]].copy_from(buffers[step.slots[1]])
    if started: debug.copied(buffers[step.slots[1]].device, step.device, *step.outputs[0], started)


def _run_on_queues(plan: _Plan, buffers: list[Any], params: list[UOp]) -> list[Any]:
  """`_run` for a plan spanning several devices: each step on its device's queue (tgfn/engine/queues.py)."""
  def work(step: _Step) -> Callable[[], None]:
    def run() -> None:
      for slot, (size, dtype) in zip(step.slots, step.outputs): buffers[slot] = Buffer(step.device, size, dtype)
      if step.kernel is None or not step.outputs[0][0]: return _run_other(step, buffers)
      started = debug.clock()
      step.kernel.program(*[buffers[s].arg for s in step.slots],
                          *[step.driver.scalar_arg(params[i].arg, params[i].dtype) for i in step.params])
      if started: debug.print_launch(step.kernel, step.device, time.perf_counter() - started)
    return run
  start = time.perf_counter()
  queues.run_on_queues([(s.device, work(s), s.slots[len(s.outputs):], s.slots[:len(s.outputs)]) for s in plan.steps])
  launched = sum(1 for s in plan.steps if s.kernel is not None and s.outputs[0][0])
  Counters.kernels_launched += launched
  if settings.DEBUG:  # (the steps ran, and reported, on the devices' queue threads)
    copies = sum(1 for s in plan.steps if s.kernel is None and s.call is None)
    debug.print_call(f"realized {len(plan.outputs)} output(s) on {len(plan.devices)} devices",
                     Counter(kernel=launched, copy=copies), time.perf_counter() - start)
  return buffers


def try_realize(outs: list[UOp]) -> Optional[list[UOp]]:
  """`realize(outs)`, or None when they depend on a transform's placeholder (see tgfn/transforms/trace.py)."""
  shape = structure(outs)
  if shape is None: return None
  plan = _plan_for(outs, shape)
  buffers = _run(plan, shape.leaves, shape.params)
  for slot, node in plan.remember:
    node.__dict__.setdefault(REALIZED, buffer_uop(buffers[slot], node.shape, node.committed))
  results = []
  for o, done, slot in zip(outs, shape.out_leaves, plan.outputs):
    buf = buffers[slot]
    if done is not None: results.append(done)
    elif o.device is None:  # a constant-only graph: its device is the default of the moment, so not cached
      results.append(buffer_uop(buf, o.shape))
    else:
      results.append(o.__dict__.setdefault(REALIZED, buffer_uop(buf, o.shape, o.committed)))
  return results


def realize(outs: list[UOp]) -> list[UOp]:
  """Compute `outs` (tensor-level nodes); return BUFFER nodes with their values, in the same order.
  A graph whose structure was realized before reuses that plan: no scheduling, lowering or compiling."""
  results = try_realize(outs)
  if results is None:  # what the spec check says about a graph that cannot be computed
    for o in outs: verify_tensor_graph(with_realized(o))
    raise ValueError("cannot realize a graph that depends on an unbound PLACEHOLDER")
  return results
