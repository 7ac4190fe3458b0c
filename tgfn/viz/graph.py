"""Draw a UOp graph as SVG, with no outside assets: a layered layout (each node one row below its
deepest operand, rows ordered by their operands' mean position) and one box per node naming its op,
dtype and shape. Nodes in `changed` are highlighted; each box's tooltip holds its arg and source line."""
from __future__ import annotations

import html
from enum import Enum
from typing import Any, Optional, Sequence, Union

from tgfn.uop.ops import Ops, UOp, toposort
from tgfn.viz.locations import location

MAX_NODES = 300      # a larger graph is drawn from its last MAX_NODES nodes (those nearest the outputs)
BOX_W, BOX_H, GAP_X, GAP_Y = 150, 38, 14, 30


def _shape(u: UOp) -> Optional[tuple]:
  if u.op in (Ops.SINK, Ops.STORE, Ops.RANGE, Ops.DEFINE_GLOBAL, Ops.LOAD, Ops.REDUCE, Ops.DEFINE_VAR): return None
  try:
    return tuple(u.shape)
  except Exception:  # kernel- and linear-level nodes have no shape
    return None


def _text(arg: Any) -> str:
  if isinstance(arg, Enum): return arg.name
  if isinstance(arg, tuple): return "(" + ", ".join(_text(a) for a in arg) + ("," if len(arg) == 1 else "") + ")"
  return repr(arg)


def _short(arg: Any, limit: int = 60) -> str:
  text = _text(arg)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def nodes_of(roots: Union[UOp, Sequence[UOp]]) -> list[UOp]:
  """The nodes to draw, operands first (a linear program keeps its order)."""
  roots = [roots] if isinstance(roots, UOp) else list(roots)
  order = toposort(roots)
  return order[-MAX_NODES:]


def layout(nodes: list[UOp]) -> dict[UOp, tuple[float, float]]:
  """Top-left corner of each node's box: row = 1 + the deepest operand's row."""
  row: dict[UOp, int] = {}
  for u in nodes: row[u] = 1 + max((row[s] for s in u.src if s in row), default=-1)
  # a leaf (a constant, a buffer) sits just above its first user, not in the top row
  users: dict[UOp, list[UOp]] = {}
  for u in nodes:
    for s in u.src: users.setdefault(s, []).append(u)
  for u in nodes:
    if not any(s in row for s in u.src) and u in users: row[u] = max(0, min(row[p] for p in users[u]) - 1)
  rows: dict[int, list[UOp]] = {}
  for u in nodes: rows.setdefault(row[u], []).append(u)
  x: dict[UOp, float] = {}
  for r in sorted(rows):
    members = rows[r]
    # order a row by the mean column of its operands, so edges cross less
    members.sort(key=lambda u: sum(x[s] for s in u.src if s in x) / max(1, sum(s in x for s in u.src)))
    for i, u in enumerate(members): x[u] = float(i)
  return {u: (GAP_X + x[u] * (BOX_W + GAP_X), GAP_Y + row[u] * (BOX_H + GAP_Y)) for u in nodes}


def to_svg(roots: Union[UOp, Sequence[UOp]], changed: frozenset = frozenset()) -> str:
  """The graph under `roots` (or the list of a linear program) as an <svg> element."""
  nodes = nodes_of(roots)
  pos = layout(nodes)
  width = max((p[0] for p in pos.values()), default=0) + BOX_W + GAP_X
  height = max((p[1] for p in pos.values()), default=0) + BOX_H + GAP_Y
  parts = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}">']
  for u in nodes:
    x1, y1 = pos[u]
    for s in u.src:
      if s in pos:
        x0, y0 = pos[s]
        parts.append(f'<line class="edge" x1="{x0 + BOX_W / 2:.0f}" y1="{y0 + BOX_H:.0f}" '
                     f'x2="{x1 + BOX_W / 2:.0f}" y2="{y1:.0f}"/>')
  for i, u in enumerate(nodes):
    x, y = pos[u]
    shape = _shape(u)
    dtype = getattr(u.dtype, "name", "") if u.dtype is not None else ""
    second = dtype + (f" {shape}" if shape is not None else "")
    tip = [f"{u.op.name} {dtype}", f"arg: {_short(u.arg, 200)}"]
    if shape is not None: tip.append(f"shape: {shape}")
    if (where := location(u)) is not None: tip.append(f"from {where[0]} ({where[1]})")
    label = u.op.name if u.arg is None or u.op not in (Ops.CONST, Ops.DEFINE_GLOBAL, Ops.REDUCE_AXIS, Ops.RANGE) \
      else f"{u.op.name} {_short(u.arg, 14)}"
    cls = "node changed" if u in changed else "node"
    parts.append(f'<g class="{cls}" data-op="{u.op.name}"><title>{html.escape(chr(10).join(tip))}</title>'
                 f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="5"/>'
                 f'<text x="{x + 6:.0f}" y="{y + 15:.0f}">{html.escape(label[:22])}</text>'
                 f'<text class="sub" x="{x + 6:.0f}" y="{y + 30:.0f}">{html.escape(second[:26])}</text></g>')
  parts.append("</svg>")
  if len(toposort([roots] if isinstance(roots, UOp) else list(roots))) > len(nodes):
    parts.insert(0, f'<p class="note">large graph: the last {MAX_NODES} nodes are drawn</p>')
  return "".join(parts)


STYLE = """
svg.graph { background: #fff; font: 11px monospace; }
svg.graph .edge { stroke: #999; stroke-width: 1; }
svg.graph .node rect { fill: #eef3fb; stroke: #4a6fa5; }
svg.graph .node.changed rect { fill: #ffd88a; stroke: #c07000; stroke-width: 2; }
svg.graph .node text { fill: #111; }
svg.graph .node text.sub { fill: #555; }
"""


def draw(x: Any, buffers: bool = True) -> Any:
  """An Array's (or a UOp's) lazy graph, drawn inline in a notebook (an object with `_repr_html_`). With
  `buffers`, the nodes that will get a buffer of their own are highlighted: everything else is fused
  into the kernel that reads it."""
  from tgfn.schedule.kernelize import find_realize_points
  u = getattr(x, "uop", x)
  marked = frozenset(find_realize_points([u])) if buffers else frozenset()

  class _Drawing:
    def __init__(self, svg: str): self.svg = svg
    def _repr_html_(self) -> str: return f"<style>{STYLE}</style>{self.svg}"
    def __str__(self) -> str: return self.svg
  return _Drawing(to_svg(u, marked))
