"""Kernel AST -> linear program: the codegen passes, in order."""
from __future__ import annotations

import functools
from typing import Optional

from tgfn.codegen.blocking import block_long_reductions
from tgfn.codegen.complex_lower import lower_complex
from tgfn.codegen.expand import expand
from tgfn.codegen.heuristic import hand_coded_opts, work_group_opts
from tgfn.codegen.opts import Opt, apply_opts
from tgfn.codegen.decompositions import decomposed_ops, decomposition_rules, integral_exp2
from tgfn.codegen.linearize import linearize
from tgfn.codegen.semantics import lower_semantics, promote_halves
from tgfn.codegen.transposed_loads import transposed_loads
from tgfn.helpers import settings, track
from tgfn.renderer import Renderer
from tgfn.uop.ops import AxisType, Ops, PatternMatcher, UOp, graph_rewrite
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
  if opts:
    applied = apply_opts(ast, opts)
    track(f"apply opts {opts}", ast, applied)
    ast = graph_rewrite(applied, symbolic, name="simplify after opts")
    expanded = expand(ast)
    track("expand vector and unrolled axes", ast, expanded)
    ast = graph_rewrite(expanded, symbolic, name="simplify after expand")
    rows = transposed_loads(ast)
    track("gathers over a block read as rows", ast, rows)
    ast = rows
  # semantics last, so the ops the optimizer made are covered too (tgfn/codegen/semantics.py)
  lowered = lower_semantics(ast)
  track("lower semantics", ast, lowered)
  linear = linearize(lowered)
  track("linearize", lowered, linear)
  return linear


def scalar_passes(ast: UOp, renderer: Renderer) -> UOp:
  ast = graph_rewrite(lower_complex(ast), symbolic, name="simplify")  # first: nothing after it sees a complex value
  ast = graph_rewrite(ast, promote_halves, name="float16/bfloat16 math in float32")
  if decompose := decomposed_ops(renderer, ast):
    ast = graph_rewrite(ast, _decompose_and_simplify(decompose), name="decompose transcendentals")
  if Ops.EXP2 in getattr(renderer, "function_ops", ()):
    ast = graph_rewrite(ast, _integral_exp2_and_simplify, name="exp2 of integers as bits")
  return graph_rewrite(block_long_reductions(ast), symbolic, name="block long reductions, simplify")


_integral_exp2_and_simplify = integral_exp2 + symbolic


@functools.cache
def _decompose_and_simplify(ops: frozenset[Ops]) -> PatternMatcher:
  """One matcher per set of decomposed ops: building one inspects every rule (~0.5 ms a kernel)."""
  return decomposition_rules(ops) + symbolic


def takes_opts(renderer: Renderer) -> bool:
  """Whether kernels for `renderer` are optimized: it supports opts and NOOPT=1 is not set."""
  return renderer.supports_opts and not settings.NOOPT


def default_opts(ast: UOp, renderer: Renderer) -> list[Opt]:
  if settings.NOOPT or any(u.op is Ops.RANGE and u.kind is AxisType.LOOP for u in ast.toposort()): return []
  if renderer.local_size: return work_group_opts(ast, renderer.local_size)  # GPU-style: ids in work groups
  if not takes_opts(renderer): return []
  return hand_coded_opts(ast, renderer.vector_bytes, renderer.registers)
