"""Renderers turn a linearized kernel (a list of UOps) into source text for one kind of device."""
from __future__ import annotations

from typing import Sequence

from tgfn.dtype import DType
from tgfn.uop.ops import UOp


class Renderer:
  # a renderer without native exp2/log2/sin asks codegen to build them from basic arithmetic
  has_transcendentals: bool = True
  # whether kernels hold 64-bit numbers (float64, int64, uint64); ops that need them have 32-bit forms else
  has_64bit: bool = True
  # whether kernels are optimized (tgfn/codegen/opts.py) for this renderer, and what the target offers
  supports_opts: bool = False
  vector_bytes: int = 16
  registers: int = 16
  # GPU-style devices (kernel ids in work groups): the work-group size the heuristic gives the first kernel
  # id axis (an OptOps.LOCAL); 0 where kernels have no work groups
  local_size: int = 0

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = ()) -> str:
    """Source for a kernel taking one pointer per buffer, then one value per scalar parameter (DEFINE_VAR)."""
    raise NotImplementedError
