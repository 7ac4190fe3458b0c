"""Running CALL nodes: each body is compiled once per device into a `CompiledGraph`, and a call runs it
once (Call), once for the branch taken (Cond), length times (Scan) or until its predicate is false
(While), writing straight into the call's output buffers.

A scan's step i reads its x slices and writes its y slices *in place* in the stacked buffers, through
views at an offset (no copies) where buffer handles are addresses (`address_handles`: CPU, LLVM, CUDA).
Elsewhere (OpenCL's cl_mem, WebGPU's buffers) each slice is staged through a scratch buffer by the
device's `copy_region`: x slices are copied in before the step, y slices copied back after it. Its carry
ping-pongs between the output buffers and one scratch set, arranged so the last step writes the output
buffers. The body is the same for every trip count,
so a 1000-step scan compiles exactly the kernels of a 10-step one.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence

import numpy as np

from tgfn.device import Allocator, Buffer, Device, HostAllocator
from tgfn.dtype import DType
from tgfn.helpers import settings
from tgfn.uop.body import Body, Call, CallSpec, Cond, CustomJVP, CustomVJP, Scan, While
from tgfn.uop.ops import UOp
from tgfn.viz import debug


class _NoFree(Allocator):
  def free(self, handle: Any) -> None: pass  # a view's memory belongs to its base buffer


_NO_FREE = _NoFree()


class BufferView(Buffer):
  """`size` elements of `base` starting at element `offset`: kernels read and write the base's memory. With
  `dtype` (a device whose handles are addresses), the view's elements are of that type instead."""
  __slots__ = ("base",)

  def __init__(self, base: Buffer, offset: int, size: int, dtype: Optional[DType] = None):
    super().__init__(base.device, size, dtype or base.dtype)
    self.base = base
    handle, start = base.handle, offset * base.dtype.itemsize
    if isinstance(handle, np.ndarray): self._handle = handle[start:start + self.nbytes]  # host memory (PYTHON)
    elif Device[base.device].address_handles: self._handle = int(handle) + start        # an address (CPU, CUDA)
    else: raise NotImplementedError(f"no buffer views on device {base.device}: its buffer handles "
                                    f"({type(handle).__name__}) are not addresses (stage slices through copies: StagedSlices)")
    self._allocator = _NO_FREE
    self._arg = Device[base.device].kernel_arg(self._handle)


def has_views(device: str) -> bool:
  """Whether buffers on `device` have zero-copy views (host arrays, or handles that are addresses)."""
  compiled = Device[device]
  return compiled.address_handles or isinstance(compiled.allocator, HostAllocator)


class StagedSlices:
  """Slice i (`size` elements at element i * size) of each of `bases`, on a device without views: one scratch
  buffer per base stands for its slice, filled from it by `load(i)` and written back into it by `store(i)`,
  both device-side region copies queued in order with the kernels."""
  def __init__(self, bases: Sequence[Buffer], sizes: Sequence[int]):
    self.bases, self.sizes = list(bases), list(sizes)
    self.scratch = [Buffer(b.device, s, b.dtype) for b, s in zip(bases, sizes)]

  def load(self, i: int) -> list[Buffer]:
    for base, size, tmp in zip(self.bases, self.sizes, self.scratch):
      _copy_region(tmp, 0, base, i * size, size)
    return self.scratch

  def store(self, i: int) -> None:
    for base, size, tmp in zip(self.bases, self.sizes, self.scratch):
      _copy_region(base, i * size, tmp, 0, size)


def _copy_region(dst: Buffer, dst_start: int, src: Buffer, src_start: int, size: int) -> None:
  """Elements [src_start, src_start + size) of `src` into `dst` at `dst_start`, on their (shared) device."""
  if size == 0: return
  item, started = src.dtype.itemsize, debug.clock()
  Device[src.device].allocator.copy_region(dst.handle, dst_start * item, src.handle, src_start * item, size * item)
  if started: debug.copied(src.device, dst.device, size, src.dtype, started)


class CompiledBody:
  """A body compiled for one device. Its graph owns intermediates, so runs are serialized by a lock."""
  def __init__(self, body: Body, device: str):
    from tgfn.engine.jit import CompiledGraph
    from tgfn.engine.realize import Counters
    self.counters = Counters
    self.graph = CompiledGraph(body.inputs, body.outputs, device=device)  # the body's values live on `device`
    self.out_info = [(device, math.prod(s), dt) for s, dt in body.out_avals]
    fresh = [s for s, *_ in self.graph._fresh_outputs]
    # every output a fresh buffer of its own (close() arranges that): runs write the caller's buffers directly
    self.direct = fresh == self.graph.output_slots
    self.lock = threading.RLock()

  def run_into(self, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> None:
    with self.lock:
      if self.direct:
        for b in outputs: b.arg  # noqa: B018 -- allocate: the replay takes the raw argument
        if settings.DEBUG or settings.DEBUG_NANS: self.graph(inputs, outputs)  # launch by launch: printed, checked
        else:
          self.counters.kernels_launched += self.graph._n_launches
          self.graph._replay(inputs, outputs)
        return
      for src, dst in zip(self.graph(inputs), outputs): copy_buffer(src, dst)


_bodies: OrderedDict[tuple[Body, str], CompiledBody] = OrderedDict()
_bodies_lock = threading.Lock()
BODY_CACHE_SIZE = 512


def compiled_body(body: Body, device: str) -> CompiledBody:
  """`body` compiled for `device`, once per process (an LRU of BODY_CACHE_SIZE bodies)."""
  key = (body, device)
  with _bodies_lock:
    if (hit := _bodies.get(key)) is not None:
      _bodies.move_to_end(key)
      return hit
  compiled = CompiledBody(body, device)
  with _bodies_lock:
    compiled = _bodies.setdefault(key, compiled)
    while len(_bodies) > BODY_CACHE_SIZE: _bodies.popitem(last=False)
  return compiled


def copy_buffer(src: Buffer, dst: Buffer) -> None:
  """On the device where its allocator copies buffers (`copy`), else through the host."""
  if src is dst: return
  started = debug.clock()
  dst.copy_from(src)
  if started: debug.copied(src.device, dst.device, src.size, src.dtype, started)


def _scalar(buf: Buffer) -> Any:
  started = debug.clock()
  value = buf.numpy()[0].item()
  if started: debug.copied(buf.device, "host", 1, buf.dtype, started)
  return value


def run_call(spec: CallSpec, device: str, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> None:
  """Compute every output of one call of `spec` into `outputs` (buffers of the call's out_avals). Under
  DEBUG its launches are summarized: one line per kernel with its number of runs (tgfn/viz/debug.py)."""
  backend = Device.backend(device)
  if strays := sorted({b.device for b in (*inputs, *outputs) if Device.backend(b.device) != backend}):
    # the body's kernels would take another backend's handles (an OpenCL cl_mem read as a CPU address)
    raise ValueError(f"a {type(spec).__name__} call runs on {device} but got buffers on {', '.join(strays)}; "
                     f"move them with tgfn.device_put(x, {device!r})")
  if not settings.DEBUG:
    _run_spec(spec, device, inputs, outputs)
    return
  with debug.summarized(type(spec).__name__, device) as summary:
    summary.trips = _run_spec(spec, device, inputs, outputs)


def _run_spec(spec: CallSpec, device: str, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> Optional[int]:
  """Run one call; return its trip count if it is a loop."""
  if isinstance(spec, Call): compiled_body(spec.body, device).run_into(inputs, outputs)
  elif isinstance(spec, (CustomVJP, CustomJVP)): compiled_body(spec.fun, device).run_into(inputs, outputs)
  elif isinstance(spec, Cond):
    index = min(max(int(_scalar(inputs[0])), 0), len(spec.branches) - 1)
    compiled_body(spec.branches[index], device).run_into(inputs[1:], outputs)
  elif isinstance(spec, Scan):
    _run_scan(spec, device, inputs, outputs)
    return spec.length
  elif isinstance(spec, While): return _run_while(spec, device, inputs, outputs)
  else: raise NotImplementedError(f"no runner for {type(spec).__name__}")
  return None


def _scratch_like(buffers: Sequence[Buffer]) -> list[Buffer]:
  return [Buffer(b.device, b.size, b.dtype) for b in buffers]


def _run_scan(spec: Scan, device: str, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> None:
  k, c, n = spec.n_consts, spec.n_carry, spec.length
  consts, carry, xs = list(inputs[:k]), list(inputs[k:k + c]), inputs[k + c:]
  final, ys = list(outputs[:c]), outputs[c:]
  if n == 0:
    for src, dst in zip(carry, final): copy_buffer(src, dst)
    return
  body = compiled_body(spec.body, device)
  x_sizes = [b.size // n for b in xs]
  y_sizes = [b.size // n for b in ys]
  scratch = _scratch_like(final) if n > 1 else final
  staged = not has_views(device)
  if staged: x_slices, y_slices = StagedSlices(xs, x_sizes), StagedSlices(ys, y_sizes)
  for step in range(n):
    i = n - 1 - step if spec.reverse else step
    target = final if (n - 1 - step) % 2 == 0 else scratch  # the last step writes the outputs
    if staged: x_views, y_views = x_slices.load(i), y_slices.scratch
    else:
      x_views = [BufferView(b, i * s, s) for b, s in zip(xs, x_sizes)]
      y_views = [BufferView(b, i * s, s) for b, s in zip(ys, y_sizes)]
    body.run_into(consts + carry + x_views, target + y_views)
    if staged: y_slices.store(i)
    carry = target


def _run_while(spec: While, device: str, inputs: Sequence[Buffer], outputs: Sequence[Buffer]) -> int:
  """Run the loop; return how many times its body ran."""
  kc, kb = spec.n_cond_consts, spec.n_body_consts
  cond_consts, body_consts, carry = list(inputs[:kc]), list(inputs[kc:kc + kb]), list(inputs[kc + kb:])
  cond, body = compiled_body(spec.cond, device), compiled_body(spec.body, device)
  final = list(outputs)
  scratch = None
  pred = Buffer(device, 1, spec.cond.outputs[0].dtype)
  trips = 0
  while True:
    cond.run_into(cond_consts + carry, [pred])
    if not _scalar(pred): break
    if scratch is None: scratch = _scratch_like(final)
    target = scratch if carry is final else final
    body.run_into(body_consts + carry, target)
    carry, trips = target, trips + 1
  for src, dst in zip(carry, final): copy_buffer(src, dst)
  return trips


def call_groups(items: Sequence[Any]) -> dict[tuple, dict[int, UOp]]:
  """For the CALL items of a schedule: (spec, inputs) -> {output index: node}, the outputs computed together."""
  groups: dict[tuple, dict[int, UOp]] = {}
  for item in items:
    node = item.output
    if item.kernel is None and node.op.name == "CALL":
      groups.setdefault((node.arg[0], item.inputs), {})[node.arg[1]] = node
  return groups
