"""What DEBUG=n prints, for eager realizes and jitted calls alike (docs/observability.md):

  1  a line per realize or jit call: kernel count and time
  2  a line per kernel launch: a name that says what the kernel is, time, GFLOP/s, GB/s, and the
     compile time on its first launch
  3  per kernel: the tensor-level operations fused into it, and why each buffer it writes exists
  4  the generated source (helpers shared by every kernel, such as the bfloat16 block, once)
  5  the linear program, each op with the positions of its operands
"""
from __future__ import annotations

import math
import re
import sys
from collections import Counter
from typing import Any, Iterable, Optional, Sequence

from tgfn.uop.ops import GroupOp, Ops, UOp, toposort

_INPUTS = (Ops.BUFFER, Ops.PLACEHOLDER)

# ---- kernel names: what the kernel is, and unique per process (two different kernels never share one)

_labels: dict[UOp, str] = {}          # kernel AST -> its label
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


def _bytes(kernel: Any) -> int:
  return sum(math.prod(b.shape) * b.dtype.itemsize for b in kernel.buffers)


# ---- level 1 and 2

_first_launch_done: set[int] = set()  # ids of compiled kernels whose first launch was printed


def print_call(what: str, n_kernels: int, seconds: float) -> None:
  print(f"{what} with {n_kernels} kernel(s) in {seconds * 1e3:.3f} ms")


def print_launch(kernel: Any, device: str, seconds: float) -> None:
  """One kernel launch (`kernel` a CompiledKernel)."""
  name = kernel_label(kernel.lowered) if kernel.lowered is not None else kernel.name
  seconds = max(seconds, 1e-9)
  moved = _bytes(kernel.lowered) if kernel.lowered is not None else 0
  line = (f"  {name:42s} {device:7s} {seconds * 1e6:10.1f} us {kernel.flops / seconds / 1e9:8.2f} GFLOP/s "
          f"{moved / seconds / 1e9:8.2f} GB/s")
  if id(kernel) not in _first_launch_done:
    _first_launch_done.add(id(kernel))
    compile_s = getattr(kernel, "compile_s", 0.0)
    line += f"  (compiled in {compile_s * 1e3:.1f} ms)" if compile_s else "  (first launch)"
  print(line)


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
