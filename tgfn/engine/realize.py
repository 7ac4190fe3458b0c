"""Run a schedule: compile each kernel once per device (cached in memory and on disk), allocate
output buffers, launch. Realized results are remembered so later graphs load instead of recompute."""
from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional

from tgfn.codegen.decompositions import force_decomposition
from tgfn.codegen.opts import Opt
from tgfn.codegen.pipeline import default_opts, optimize, scalar_passes
from tgfn.codegen.policy import strict_float
from tgfn.device import Buffer, Device
from tgfn.helpers import DEBUG
from tgfn.ops.host import run_host
from tgfn.schedule.kernelize import LoweredKernel
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops, UOp, substitute, toposort, unique_id
from tgfn.uop.spec import spec_enabled, verify_kernel, verify_linear, verify_tensor_graph


@dataclass
class CompiledKernel:
  name: str
  device: str
  program: Callable[..., None]
  source: str
  linear: list[UOp]
  flops: int
  opts: list[Opt]          # the optimizations applied (tgfn/codegen/opts.py)


def buffer_uop(buffer: Buffer, shape: tuple[int, ...]) -> UOp:
  """A tensor-level BUFFER node holding `buffer` (kept as an attribute, off the hash key)."""
  u = UOp.unique(Ops.BUFFER, buffer.dtype, (unique_id(), buffer.device, tuple(shape)))
  object.__setattr__(u, "buffer", buffer)
  return u


class Counters:
  """Running totals, for tests and benchmarks: kernels launched and kernels compiled."""
  kernels_launched = 0
  kernels_compiled = 0


# (device, kernel AST, codegen switches, opts) -> compiled kernel, least recently used first. Bounded: an
# evicted kernel's program (and on the CPU its shared object) is freed once no jitted function holds it.
_compiled: OrderedDict[tuple, CompiledKernel] = OrderedDict()
_compiled_lock = threading.Lock()


def kernel_cache_size() -> int:
  """How many compiled kernels stay in memory: TGFN_KERNEL_CACHE_SIZE, default 4096."""
  return max(1, int(os.environ.get("TGFN_KERNEL_CACHE_SIZE", "4096") or 4096))
# lazy node -> BUFFER node holding its value, once realized
_realized: "weakref.WeakKeyDictionary[UOp, UOp]" = weakref.WeakKeyDictionary()


_NOT_FLOPS = (Ops.CONST, Ops.LOAD, Ops.STORE, Ops.DEFINE_GLOBAL, Ops.DEFINE_ACC, Ops.VECTORIZE, Ops.GEP)


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


def compile_kernel(kernel: LoweredKernel, device: str, opts: Optional[list[Opt]] = None) -> CompiledKernel:
  """Compile `kernel` for `device` with `opts` (default: the device's heuristic), once per process."""
  # TRANSCENDENTAL=2 and STRICT_FLOAT=1 change what codegen emits for the same AST: part of the key
  key = (device, kernel.ast, force_decomposition(), strict_float(), None if opts is None else tuple(opts))
  with _compiled_lock:
    if (hit := _compiled.get(key)) is not None:
      _compiled.move_to_end(key)
      return hit
  dev = Device[device]
  if spec_enabled(): verify_kernel(kernel.ast)
  ast = scalar_passes(kernel.ast, dev.renderer)
  if opts is None: opts = default_opts(ast, dev.renderer)
  linear = optimize(ast, opts)
  if spec_enabled(): verify_linear(linear)
  src = dev.renderer.render(kernel.name, linear, [b.dtype for b in kernel.buffers])
  if os.environ.get("TGFN_CAPTURE"):  # process replay (docs/process-replay.md)
    from tgfn.tools.process_replay import record; record(device, kernel, src)  # noqa: E702
  if DEBUG() >= 3: print(f"kernel {kernel.name}: buffers {[(b.shape, b.dtype.name) for b in kernel.buffers]} opts {opts}")
  if DEBUG() >= 4: print(src)
  if DEBUG() >= 5:
    for i, u in enumerate(linear): print(f"{i:4d} {u.op.name:12s} {u.dtype} {u.arg!r}")
  program = dev.runtime(kernel.name, dev.compiler.compile_cached(src))
  Counters.kernels_compiled += 1
  compiled = CompiledKernel(kernel.name, device, program, src, linear, count_flops(linear), list(opts))
  with _compiled_lock:
    compiled = _compiled.setdefault(key, compiled)  # another thread may have compiled it meanwhile
    _compiled.move_to_end(key)
    while len(_compiled) > kernel_cache_size(): _compiled.popitem(last=False)
  return compiled


def with_realized(node: UOp) -> UOp:
  """`node` with every already-computed subgraph replaced by the buffer that holds it."""
  mapping = {n: _realized[n] for n in toposort([node]) if n in _realized}
  return substitute(node, mapping) if mapping else node


def realize(outs: list[UOp]) -> list[UOp]:
  """Compute `outs` (tensor-level nodes); return BUFFER nodes with their values, in the same order."""
  outs = [with_realized(o) for o in outs]
  if spec_enabled():
    for o in outs: verify_tensor_graph(o)
  start = time.perf_counter()
  items = create_schedule([o for o in outs if o.op is not Ops.BUFFER])
  buffers: dict[UOp, Buffer] = {n: n.buffer for n in toposort(outs) if n.op is Ops.BUFFER}
  n_kernels = 0
  for item in items:
    node = item.output
    device = node.device or Device.DEFAULT
    out = buffers[node] = Buffer(device, math.prod(node.shape), node.dtype)
    if item.host:
      run_host(node, out, [buffers[i] for i in item.inputs])
      continue
    if item.kernel is None:
      out.copyin(buffers[item.inputs[0]].numpy())
      continue
    kernel = compile_kernel(item.kernel, device)
    if out.size == 0: continue
    t0 = time.perf_counter()
    kernel.program(*[buffers[b].arg for b in item.kernel.buffers])
    n_kernels += 1
    Counters.kernels_launched += 1
    if DEBUG() >= 2:
      dt = time.perf_counter() - t0
      print(f"  {kernel.name:30s} {device:7s} {dt * 1e6:10.1f} us  {kernel.flops / max(dt, 1e-9) / 1e9:8.2f} GFLOP/s")
  if DEBUG() >= 1 and items:
    print(f"realized {len(outs)} output(s) with {n_kernels} kernel(s) in {(time.perf_counter() - start) * 1e3:.2f} ms")
  results = []
  for o in outs:
    if o.op is Ops.BUFFER: results.append(o)
    elif o.device is None:  # a constant-only graph: its device is the default of the moment, so not cached
      results.append(buffer_uop(buffers[o], o.shape))
    else:
      results.append(_realized.setdefault(o, buffer_uop(buffers[o], o.shape)))
  return results
