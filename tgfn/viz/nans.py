"""DEBUG_NANS=1 (or `tgfn.config.update("debug_nans", True)`): every kernel's float outputs are checked
as it runs, and the first NaN or Inf raises FloatingPointError naming the operation, the kernel, the
user's line that built it and whether it was the forward or the backward pass."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tgfn.dtype import dtypes
from tgfn.viz.locations import nearest_location


def _values(buffer: Any) -> np.ndarray:
  host = buffer.numpy()
  if buffer.dtype is dtypes.bfloat16: host = (host.astype(np.uint32) << 16).view(np.float32)
  return host


def check(kernel: Any, outputs: Sequence[Any]) -> None:
  """Raise if any float output buffer of `kernel` (a CompiledKernel) holds a NaN or an Inf."""
  lowered = kernel.lowered
  nodes = lowered.outputs if lowered is not None else [None] * len(outputs)
  for node, buffer in zip(nodes, outputs):
    if not buffer.dtype.is_float: continue
    values = _values(buffer)
    if np.isfinite(values).all(): continue
    kind = "NaN" if np.isnan(values).any() else "Inf"
    from tgfn.viz.debug import kernel_label
    what = f"{node.op.name} of shape {node.shape} {node.dtype.name}" if node is not None else "a kernel output"
    msg = f"DEBUG_NANS: {kind} in the output of {what}, kernel '{kernel_label(lowered) if lowered else kernel.name}'"
    where = nearest_location(node, set(lowered.inputs)) if node is not None else None
    if where is not None: msg += f", in the {where[1]} pass of the operation at {where[0]}"
    else: msg += " (no line of user code built it)"
    raise FloatingPointError(msg)
