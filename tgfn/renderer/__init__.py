"""Renderers turn a linearized kernel (a list of UOps) into source text for one kind of device."""
from __future__ import annotations

from tgfn.dtype import DType
from tgfn.uop.ops import UOp


class Renderer:
  # a renderer without native exp2/log2/sin asks codegen to build them from basic arithmetic
  has_transcendentals: bool = True

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType]) -> str:
    raise NotImplementedError
