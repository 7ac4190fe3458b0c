"""What DEBUG=n prints, for eager realizes and jitted calls alike (docs/observability.md):

  1  a line per realize or jit call: kernel count (loop bodies' launches included), host calls, copies, time
  2  a line per kernel launch, host call and copy: a name that says what it is, time, GFLOP/s, GB/s, and
     the compile time on a kernel's first launch; a loop's bodies as one line per kernel with its run count
  3  per kernel: the tensor-level operations fused into it, and why each buffer it writes exists
  4  the generated source (helpers shared by every kernel, such as the bfloat16 block, once)
  5  the linear program, each op with the positions of its operands
"""
from __future__ import annotations

import math
import re
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Optional, Sequence

from tgfn.helpers import settings
from tgfn.uop.ops import GroupOp, Ops, UOp, toposort

_INPUTS = (Ops.BUFFER, Ops.PLACEHOLDER)

# ---- kernel names: what the kernel is, and unique per process (two different kernels never share one)

_labels: dict[Any, str] = {}          # kernel AST (a stored kernel's: its device and source) -> its label
_label_uses: Counter = Counter()      # base label -> how many different ASTs have it


def _dims(shape: Sequence[int]) -> str: return "x".join(str(n) for n in shape) or "scalar"


def _is_contraction(red: UOp) -> bool:
  """A sum of products of values read from different buffers (a matmul, a dot, a convolution)."""
  if red.arg is not Ops.ADD: return False
  def buffers(u: UOp) -> set: return {x.src[0] for x in toposort([u]) if x.op is Ops.LOAD}
  for u in toposort(list(red.reduce_values)):
    if u.op is Ops.MUL and (a := buffers(u.src[0])) and (b := buffers(u.src[1])) and not a & b: return True
  return False


def kernel_label(kernel: Any) -> str:
  """'elementwise 4x4 float32', 'reduce 4x1 over 8 float32', 'contraction 64x10 over 64 float32' (+ '#2'
  when another kernel of this process already has that name). `kernel` is a LoweredKernel."""
  if (hit := _labels.get(kernel.ast)) is not None: return hit
  reduces = [u for u in toposort([kernel.ast]) if u.op is Ops.REDUCE]
  out = kernel.outputs[0]
  kind = "elementwise" if not reduces else "contraction" if any(_is_contraction(r) for r in reduces) else "reduce"
  base = f"{kind} {_dims(out.shape)}"
  if reduces: base += " over " + _dims(tuple(r.size for r in reduces[-1].reduce_ranges))
  base += f" {out.dtype.name}"
  if kernel.n_outputs > 1: base += f" ({kernel.n_outputs} outputs)"
  _label_uses[base] += 1
  label = _labels[kernel.ast] = base if _label_uses[base] == 1 else f"{base} #{_label_uses[base]}"
  return label


def kernel_bytes(kernel: Any) -> int:
  """Bytes of the buffers `kernel` (a LoweredKernel) reads and writes."""
  return sum(math.prod(b.shape) * b.dtype.itemsize for b in kernel.buffers)


def base_label(kernel: Any) -> str:
  """The label of `kernel` (a LoweredKernel) without its '#n': what a jit plan stores on disk."""
  return kernel_label(kernel).split(" #")[0]


def _stored_label(kernel: Any) -> str:
  """The label of a kernel loaded from the jit plan cache, made unique as kernel_label makes them."""
  key = ("stored", kernel.device, kernel.source)
  if (hit := _labels.get(key)) is not None: return hit
  _label_uses[kernel.stored_label] += 1
  uses = _label_uses[kernel.stored_label]
  label = _labels[key] = kernel.stored_label if uses == 1 else f"{kernel.stored_label} #{uses}"
  return label


def launch_label(kernel: Any) -> str:
  """The DEBUG name of a CompiledKernel, compiled in this process or loaded from the jit plan cache."""
  if kernel.lowered is not None: return kernel_label(kernel.lowered)
  return _stored_label(kernel) if kernel.stored_label else kernel.name


# ---- level 1 and 2
#
# Every kernel launch, host call and copy between buffers reports itself here while DEBUG is on. At level 2
# each prints a line, except inside a sub-graph call (scan, while_loop, cond, ...): there the body's launches
# are tallied, per kernel, and printed when the call ends, one line per kernel with how many times it ran.

_first_launch_done: set[int] = set()  # ids of compiled kernels whose first launch was printed


class _Tally:
  """One kernel (or host call, or copy) inside a sub-graph call: how often it ran and for how long."""
  __slots__ = ("count", "seconds", "flops", "nbytes", "note")

  def __init__(self) -> None: self.count, self.seconds, self.flops, self.nbytes, self.note = 0, 0.0, 0, 0, ""


class _PerThread(threading.local):
  def __init__(self) -> None:
    self.tally: Optional[dict[tuple[str, str], _Tally]] = None  # the open call's, on this thread
    self.counts: Counter = Counter()  # "kernel", "host call", "copy": what ran on this thread


_here = _PerThread()


def clock() -> float:
  """The time now while DEBUG is on, else 0.0: a copy or host call times itself only then."""
  return time.perf_counter() if settings.DEBUG else 0.0


def _line(name: str, device: str, seconds: float, flops: int, nbytes: int) -> str:
  seconds = max(seconds, 1e-9)
  return (f"{name:42s} {device:7s} {seconds * 1e6:10.1f} us {flops / seconds / 1e9:8.2f} GFLOP/s "
          f"{nbytes / seconds / 1e9:8.2f} GB/s")


def _report(kind: str, name: str, device: str, seconds: float, flops: int, nbytes: int, note: str = "") -> None:
  _here.counts[kind] += 1
  if (tally := _here.tally) is not None:
    t = tally.setdefault((name, device), _Tally())
    t.count += 1
    t.seconds += seconds
    t.flops += flops
    t.nbytes += nbytes
    t.note = t.note or note
  elif settings.DEBUG >= 2: print(f"  {_line(name, device, seconds, flops, nbytes)}{note}")


def print_launch(kernel: Any, device: str, seconds: float) -> None:
  """One kernel launch (`kernel` a CompiledKernel)."""
  nbytes = kernel_bytes(kernel.lowered) if kernel.lowered is not None else kernel.stored_bytes
  note = ""
  if settings.DEBUG >= 2 and id(kernel) not in _first_launch_done:
    _first_launch_done.add(id(kernel))
    note = f"  (compiled in {kernel.compile_s * 1e3:.1f} ms)" if kernel.compile_s else \
      "  (loaded with a jit plan from the disk cache)" if kernel.stored_label else "  (first launch)"
  _report("kernel", launch_label(kernel), device, seconds, kernel.flops, nbytes, note)


def copied(source: str, target: str, size: int, dtype: Any, started: float) -> None:
  """A copy of `size` elements of `dtype` from device `source` to device `target` ('host': NumPy memory),
  begun at `started` (from clock())."""
  _report("copy", f"copy {size} {dtype.name} {source} -> {target}", source, time.perf_counter() - started, 0,
          size * dtype.itemsize)


def host_called(node: UOp, out: Any, inputs: Sequence[Any], started: float) -> None:
  """A host call (NumPy, LAPACK, FFT, MPI) computing `node` into `out` from `inputs` (Buffers), begun at
  `started`."""
  read = sum(b.nbytes for b in inputs)
  note = f"  (run on the host: {read} B copied out of {out.device}, {out.nbytes} B back in)"
  _report("host call", f"host {node.arg[0]} of {_dims(node.src[0].shape)} {node.src[0].dtype.name}", out.device,
          time.perf_counter() - started, 0, read + out.nbytes, note)


def counts() -> Counter:
  """What has run on this thread so far (the difference of two of these is what ran in between)."""
  return _here.counts.copy()


class CallSummary:
  """What `summarized` prints for a call: its trip count, set by the call's runner once it is known."""
  trips: Optional[int] = None


@contextmanager
def summarized(what: str, device: str) -> Iterator[CallSummary]:
  """Tally the launches of a sub-graph call's bodies; at its end print the call and, per kernel, host
  call or copy, one line with how many times it ran and its total time. A call nested in another adds to
  the outer call's tally."""
  summary = CallSummary()
  if _here.tally is not None:
    yield summary
    return
  _here.tally, start = {}, time.perf_counter()
  try:
    yield summary
  finally:
    tally, _here.tally = _here.tally, None
  if settings.DEBUG < 2: return
  runs = f" x{summary.trips}" if summary.trips is not None else ""
  launches = sum(t.count for t in tally.values())
  print(f"  {what}{runs} on {device}: {launches} launch(es) in {(time.perf_counter() - start) * 1e6:.1f} us; "
        f"per kernel, all of its runs:")
  for (name, dev), t in tally.items():
    print(f"    {_line(f'{name} x{t.count}', dev, t.seconds, t.flops, t.nbytes)}{t.note}")


def print_call(what: str, ran: Counter, seconds: float) -> None:
  """Level 1: a realize or jit call, with the kernels (and host calls and copies) it ran."""
  plurals = (("host call", "host call(s)"), ("copy", "copies"))
  others = "".join(f", {ran[kind]} {plural}" for kind, plural in plurals if ran[kind])
  print(f"{what} with {ran['kernel']} kernel(s){others} in {seconds * 1e3:.3f} ms")


def print_compiled(what: str, kernels: Sequence[Any], compiled: int, chars: int, seconds: float) -> None:
  """Level 1: what compiling a jitted function produced: its kernels, how many are distinct (a second layer's
  kernels are the first's), their source, and how much of it this process had to generate and compile."""
  sources = {k.source for k in kernels}
  print(f"{what}: {len(kernels)} kernel(s), {len(sources)} distinct, {sum(map(len, sources)) / 1e3:.0f} K characters "
        f"of source; {compiled} compiled here ({chars / 1e3:.0f} K characters) in {seconds:.2f} s")


# ---- level 3: what each kernel fuses, why each buffer exists

def fused_ops(kernel: Any) -> Counter:
  """The tensor-level ops computed inside `kernel` (a LoweredKernel), by name: everything between its
  outputs and the buffers it reads."""
  inputs = set(kernel.inputs)
  seen: set[UOp] = set()
  stack = list(kernel.outputs)
  ops: Counter = Counter()
  while stack:
    x = stack.pop()
    if x in seen or x in inputs or x.op in _INPUTS: continue
    seen.add(x)
    stack.extend(x.src)
    if x.op is Ops.CONST: continue
    ops["views" if x.op in GroupOp.Movement else f"REDUCE_AXIS({x.arg[0].name})" if x.op is Ops.REDUCE_AXIS
        else x.op.name] += 1
  return ops


def materialize_reason(node: UOp, outs: set[UOp], parents: dict[UOp, list[UOp]]) -> str:
  """Why `node` has a buffer of its own (the rules of tgfn/schedule/kernelize.py, read back)."""
  if node in outs: return "an output being realized"
  if node.op is Ops.CONTIGUOUS: return "CONTIGUOUS asks for a buffer"
  users = parents.get(node, [])
  for op, why in ((Ops.COPY, "a copy to another device reads it"), (Ops.HOST, "a host (NumPy) call reads it"),
                  (Ops.CALL, "a sub-graph call (scan/while/cond) reads it")):
    if any(p.op is op for p in users): return why
  if node.op is Ops.REDUCE_AXIS:
    stack, seen = list(users), set()
    while stack:
      p = stack.pop()
      if p in seen: continue
      seen.add(p)
      if p.op is Ops.EXPAND: return "a reduction whose result is broadcast (inlined, it would be redone per element)"
      if p.op in GroupOp.Movement or p.op in GroupOp.ALU: stack.extend(parents.get(p, []))
    return "a reduction read by more than one kernel (each would redo it)"
  if not users: return "packed into panels for a contraction"
  return "broadcast inside a reduction's loop (a contraction operand: inlined, it would be recomputed per multiply-add)"


def print_schedule(items: Iterable[Any], outs: Sequence[UOp]) -> None:
  """DEBUG=3: per kernel of a schedule, what it fuses and why each buffer it writes exists."""
  parents: dict[UOp, list[UOp]] = {}
  for n in toposort(list(outs)):
    for s in n.src: parents.setdefault(s, []).append(n)
  roots = set(outs)
  for item in items:
    kernel = item.kernel
    if kernel is None:
      print(f"schedule: {item.output.op.name} of {_dims(item.output.shape)} {item.output.dtype.name}")
      continue
    ops = ", ".join(f"{n} {op}" if n > 1 else op for op, n in sorted(fused_ops(kernel).items()))
    print(f"kernel {kernel_label(kernel)} [{kernel.name}] fuses: {ops or 'a copy'}")
    for b in kernel.outputs:
      print(f"  writes {_dims(b.shape)} {b.dtype.name} ({b.op.name}): {materialize_reason(b, roots, parents)}")
    for b in kernel.inputs: print(f"  reads  {_dims(b.shape)} {b.dtype.name} ({b.op.name})")


# ---- level 3 to 5, as each kernel is generated

_GUARDED = re.compile(r"^#ifndef (\w+)\n.*?^#endif\n", re.S | re.M)
_printed_blocks: set[str] = set()


def without_shared_helpers(source: str) -> str:
  """`source` with the include-guarded helper blocks (and extern lines) already printed once removed."""
  def once(block: str, key: str) -> str:
    if key in _printed_blocks: return ""
    _printed_blocks.add(key)
    return block
  source = _GUARDED.sub(lambda m: once(m.group(0), m.group(1)), source)
  return re.sub(r"^extern [^\n]*\n", lambda m: once(m.group(0), m.group(0)), source, flags=re.M)


def print_kernel(kernel: Any, opts: Sequence[Any], source: str, linear: Sequence[UOp], level: int,
                 out: Optional[Any] = None) -> None:
  """What DEBUG=3..5 print for one kernel as it is generated."""
  out = out or sys.stdout
  print(f"code for kernel {kernel_label(kernel)} [{kernel.name}]: opts {list(opts)}", file=out)
  if level >= 4: print(without_shared_helpers(source), file=out)
  if level >= 5:
    index = {u: i for i, u in enumerate(linear)}
    for i, u in enumerate(linear):
      operands = ", ".join(str(index[s]) if s in index else f"{s.op.name}({s.arg!r})" for s in u.src)
      print(f"{i:4d} {u.op.name:13s} {getattr(u.dtype, 'name', '-'):8s} [{operands}] {'' if u.arg is None else repr(u.arg)}", file=out)
