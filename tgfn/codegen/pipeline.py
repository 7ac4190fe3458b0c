"""Kernel AST -> linear program: the codegen passes, in order."""
from __future__ import annotations

import os
from typing import Optional

from tgfn.codegen.blocking import block_long_reductions
from tgfn.codegen.expand import expand
from tgfn.codegen.heuristic import hand_coded_opts
from tgfn.codegen.opts import Opt, apply_opts
from tgfn.codegen.decompositions import decompose_transcendentals, force_decomposition
from tgfn.codegen.linearize import linearize
from tgfn.codegen.semantics import lower_semantics, promote_halves
from tgfn.renderer import Renderer
from tgfn.uop.ops import UOp, graph_rewrite
from tgfn.uop.symbolic import symbolic


def codegen(ast: UOp, renderer: Renderer, opts: Optional[list[Opt]] = None) -> list[UOp]:
  """Simplify, widen halves, decompose transcendentals, block long reductions, then apply `opts` (by
  default the hand-coded heuristic's, on renderers that take opts), expand them, and linearize."""
  ast = scalar_passes(ast, renderer)
  return optimize(ast, default_opts(ast, renderer) if opts is None else opts)


def optimize(ast: UOp, opts: list[Opt]) -> list[UOp]:
  """Apply `opts` to a kernel that went through `scalar_passes`, expand them, give every op its exact
  meaning in plain operators (`lower_semantics`), and linearize."""
  # simplified before expanding, so a split index is recognized as contiguous in its lanes
  if opts: ast = graph_rewrite(expand(graph_rewrite(apply_opts(ast, opts), symbolic)), symbolic)
  # last, so the ops the optimizer made are covered too (tgfn/codegen/semantics.py)
  return linearize(lower_semantics(ast))


def scalar_passes(ast: UOp, renderer: Renderer) -> UOp:
  ast = graph_rewrite(ast, symbolic)
  ast = graph_rewrite(ast, promote_halves)
  if not renderer.has_transcendentals or force_decomposition():
    ast = graph_rewrite(ast, decompose_transcendentals + symbolic)
  return graph_rewrite(block_long_reductions(ast), symbolic)


def takes_opts(renderer: Renderer) -> bool:
  """Whether kernels for `renderer` are optimized: it supports opts and NOOPT=1 is not set."""
  return renderer.supports_opts and os.environ.get("NOOPT", "0") in ("", "0")


def default_opts(ast: UOp, renderer: Renderer) -> list[Opt]:
  if not takes_opts(renderer): return []
  return hand_coded_opts(ast, renderer.vector_bytes, renderer.registers)
