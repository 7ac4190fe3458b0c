"""DEBUG_NANS=1 (or `tgfn.config.update("debug_nans", True)`): every kernel's float outputs are checked
as it runs, and the first NaN or Inf raises FloatingPointError naming the operation that made it, the
kernel, the user's line that built that operation and whether it was the forward or the backward pass.

A kernel fuses many operations, and the one at its output is seldom the one that made the NaN (`tanh` of
a `sqrt` of a negative number). So when an output is bad, the kernel's operations are run again one by
one on the same input buffers, and the first whose value is bad while its operands' are not is named."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from tgfn.dtype import dtypes
from tgfn.engine import realize as engine
from tgfn.helpers import Context
from tgfn.uop.ops import GroupOp, Ops, UOp, toposort
from tgfn.viz.debug import launch_label
from tgfn.viz.locations import location, nearest_location


def _values(buffer: Any) -> np.ndarray:
  host = buffer.numpy()
  if buffer.dtype is dtypes.bfloat16: host = (host.astype(np.uint32) << 16).view(np.float32)
  return host


def _bad(buffer: Any) -> Optional[str]:
  """'NaN' or 'Inf' if the float `buffer` holds one, else None."""
  if not buffer.dtype.is_float: return None
  values = _values(buffer)
  if np.isfinite(values).all(): return None
  return "NaN" if np.isnan(values).any() else "Inf"


def _unfused(outputs: Sequence[UOp], inputs: dict[UOp, UOp]) -> dict[UOp, UOp]:
  """Each node between a kernel's `outputs` and its inputs, rebuilt over `inputs` (input node -> the BUFFER
  node holding its values): original node -> rebuilt node, in dataflow order."""
  def sources(u: UOp) -> tuple[UOp, ...]: return () if u in inputs else u.src
  rebuilt: dict[UOp, UOp] = {}
  for u in toposort(list(outputs), sources):
    rebuilt[u] = inputs[u] if u in inputs else UOp(u.op, u.dtype, tuple(rebuilt[s] for s in u.src), u.arg)
  return rebuilt


def first_bad_operation(kernel: Any, buffers: Sequence[Any]) -> Optional[UOp]:
  """The first operation fused into `kernel` (a LoweredKernel; `buffers` its arguments, outputs first)
  whose value holds a NaN or Inf while its operands' do not, found by computing each one on its own from
  the kernel's input buffers; None if none does (an input already held one)."""
  input_buffers = dict(zip(kernel.inputs, buffers[kernel.n_outputs:]))
  held = {node: engine.buffer_uop(buf, node.shape) for node, buf in input_buffers.items()}
  rebuilt = _unfused(kernel.outputs, held)
  # a view or constant makes no NaN: only computing nodes of a float dtype are candidates
  candidates = [u for u in rebuilt if u not in input_buffers and u.dtype is not None and u.dtype.is_float
                and u.op not in GroupOp.Movement and u.op not in (Ops.CONST, Ops.PARAM)]
  with Context(DEBUG=0, DEBUG_NANS=False):  # (the re-run is not itself checked or printed)
    values = dict(zip(candidates, engine.realize([rebuilt[u] for u in candidates])))
  bad = {node for node, buf in input_buffers.items() if _bad(buf) is not None}
  for u in rebuilt:  # in dataflow order: operands first
    if u in input_buffers: continue
    from_operands = any(s in bad for s in u.src)
    if u in values and _bad(values[u].buffer) is not None:
      if not from_operands: return u
      bad.add(u)
    elif u not in values and from_operands: bad.add(u)
  return None


def check(kernel: Any, buffers: Sequence[Any], n_outputs: int) -> None:
  """Raise if any float output buffer of `kernel` (a CompiledKernel) holds a NaN or an Inf. `buffers` are
  its arguments, the outputs first."""
  for i, buffer in enumerate(buffers[:n_outputs]):
    if (kind := _bad(buffer)) is not None: raise FloatingPointError(_message(kernel, buffers, i, kind))


def _describe(node: UOp) -> str: return f"{node.op.name} of shape {node.shape} {node.dtype.name}"


def _message(kernel: Any, buffers: Sequence[Any], output: int, kind: str) -> str:
  lowered = kernel.lowered
  if lowered is None:  # loaded from the jit plan cache (which DEBUG_NANS bypasses): no graph to name
    return f"DEBUG_NANS: {kind} in an output of kernel '{launch_label(kernel)}' (no line of user code known)"
  msg = f"DEBUG_NANS: {kind} in the output of {_describe(lowered.outputs[output])}, kernel '{launch_label(kernel)}'"
  try:
    culprit = first_bad_operation(lowered, buffers)
  except Exception as e:  # the search is a debugging aid: its failure must not hide the NaN
    culprit, msg = lowered.outputs[output], msg + f" (its operations could not be re-run one by one: {e!r})"
  if culprit is None: return msg + ", read from an input that already held one"
  if culprit is not lowered.outputs[output]: msg += f", first made by {_describe(culprit)}"
  where = nearest_location(culprit, set(lowered.inputs))
  return msg + (f", in the {where[1]} pass of the operation at {where[0]}" if where is not None
                else " (no line of user code built it)")
