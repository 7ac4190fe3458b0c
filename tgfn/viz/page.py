"""The VIZ page: one self-contained HTML document (inline CSS, SVG and a little vanilla JS, nothing
fetched from the network) listing every capture; for each, its settings, traced graph, passes with
the graph before and after (changed nodes highlighted), kernels with opts and source, and the user's
source line of each node of the traced graph."""
from __future__ import annotations

import html
from typing import Any

from tgfn.helpers import SWITCHES
from tgfn.uop.ops import toposort
from tgfn.viz.graph import STYLE, to_svg
from tgfn.viz.locations import location
from tgfn.viz.recorder import Capture, Pass, Recorder

_PAGE_STYLE = STYLE + """
body { margin: 0; font: 14px sans-serif; display: flex; height: 100vh; }
#sidebar { width: 260px; overflow: auto; background: #23272e; color: #ddd; padding: 8px; flex: none; }
#sidebar li { cursor: pointer; padding: 3px; list-style: none; border-radius: 3px; }
#sidebar li.active { background: #4a6fa5; color: #fff; }
#sidebar ul { padding: 0; }
#main { flex: 1; overflow: auto; padding: 8px 16px; }
ol.passes li { cursor: pointer; }
ol.passes li.unchanged { color: #999; }
ol.passes li.active { font-weight: bold; }
.pair { display: flex; gap: 12px; align-items: flex-start; }
.top { display: flex; gap: 16px; align-items: flex-start; }
.top > ol { flex: none; width: 300px; margin: 0; max-height: 80vh; overflow: auto; }
.pair > div { overflow: auto; max-height: 70vh; border: 1px solid #ccc; }
pre.source { background: #f6f8fa; padding: 8px; overflow: auto; max-height: 60vh; }
table.locations td { padding: 1px 8px; font-family: monospace; }
.note { color: #a33; }
"""

_SCRIPT = """
function show(kind, id) {
  document.querySelectorAll('.' + kind).forEach(e => { e.hidden = e.id !== id; });
  document.querySelectorAll('[data-' + kind + ']').forEach(e => {
    e.classList.toggle('active', kind + '-' + e.dataset[kind] === id); });
}
document.querySelectorAll('[data-capture]').forEach(e =>
  e.addEventListener('click', () => show('capture', 'capture-' + e.dataset.capture)));
document.querySelectorAll('[data-pass]').forEach(e =>
  e.addEventListener('click', () => show('pass', 'pass-' + e.dataset.pass)));
const first = document.querySelector('[data-capture]');
if (first) show('capture', 'capture-' + first.dataset.capture);
document.querySelectorAll('section.capture').forEach(s => {
  const p = s.querySelector('ol.passes li:not(.unchanged)') || s.querySelector('ol.passes li');
  if (p) document.getElementById('pass-' + p.dataset.pass).hidden = false, p.classList.add('active');
});
document.body.dataset.ready = '1';
"""


def _pass_html(key: str, p: Pass) -> str:
  if p.before == p.after: return ""
  before = set(toposort(list(p.before)))
  changed = frozenset(u for u in toposort(list(p.after)) if u not in before)
  return (f'<div class="pass" id="pass-{key}" hidden><h4>{html.escape(p.name)}</h4>'
          f'<p>{len(changed)} node(s) new or changed (highlighted)</p><div class="pair">'
          f'<div><b>before</b><br>{to_svg(p.before)}</div>'
          f'<div><b>after</b><br>{to_svg(p.after, changed)}</div></div></div>')


def _kernel_html(kernel: Any, passes: list[Pass]) -> str:
  from tgfn.viz.debug import kernel_label
  label = kernel_label(kernel.lowered) if getattr(kernel, "lowered", None) is not None else kernel.name
  # a kernel compiled earlier in the process comes from the cache: its codegen passes are where it was made
  reused = "" if any(p.name.startswith(f"{label}: ") for p in passes) else \
    " (compiled earlier: its codegen passes are in the capture that first made it)"
  return (f'<div class="kernel"><h4>{html.escape(label)} <code>[{html.escape(kernel.name)}]</code> on '
          f'{html.escape(kernel.device)}{reused}</h4><p>opts: <code>{html.escape(str(list(kernel.opts)))}</code>, '
          f'{kernel.flops} flops</p><pre class="source">{html.escape(kernel.source)}</pre></div>')


def _capture_html(i: int, c: Capture) -> str:
  graph = c.graph or (c.passes[0].after if c.passes and c.passes[0].name == "trace" else ())
  settings = ", ".join(f"{k}={v}" for k, v in c.settings.items() if v != SWITCHES[k].default or k == "DEBUG")
  passes = "".join(f'<li data-pass="{i}-{j}" class="{"unchanged" if p.before == p.after else ""}">'
                   f'{html.escape(p.name)}{" (unchanged)" if p.before == p.after else ""}</li>'
                   for j, p in enumerate(c.passes))
  views = "".join(_pass_html(f"{i}-{j}", p) for j, p in enumerate(c.passes))
  located = [(u, where) for u in toposort(list(graph)) if (where := location(u)) is not None]
  rows = "".join(f"<tr><td>{u.op.name}</td><td>{html.escape(str(getattr(u.dtype, 'name', '')))}</td>"
                 f"<td>{html.escape(where[0])}</td><td>{where[1]}</td></tr>" for u, where in located)
  dropped = f'<p class="note">{c.dropped_passes} later passes not recorded</p>' if c.dropped_passes else ""
  return (f'<section class="capture" id="capture-{i}" hidden><h2>{html.escape(c.title)}</h2>'
          f'<p>settings: <code>{html.escape(settings)}</code></p>'
          f'<h3>passes</h3><div class="top"><ol class="passes">{passes}</ol><div>{dropped}{views}</div></div>'
          f'<h3>kernels</h3>{"".join(_kernel_html(k, c.passes) for k in c.kernels) or "<p>(none)</p>"}'
          f'<h3>traced graph</h3>{to_svg(graph) if graph else "<p>(none)</p>"}'
          f'<h3>source lines</h3><table class="locations">{rows}</table></section>')


def _cached_capture_html(i: int, c: Capture) -> str:
  """A finished capture's section is drawn once (a live page is asked for again and again)."""
  if not c.done: return _capture_html(i, c)
  if c.html is None or not c.html.startswith(f'<section class="capture" id="capture-{i}"'): c.html = _capture_html(i, c)
  return c.html


def render(recorder: Recorder) -> str:
  """The whole page for what `recorder` holds now."""
  with recorder.lock: captures = list(recorder.captures)
  items = "".join(f'<li data-capture="{i}">{i}: {html.escape(c.title)} '
                  f'({len(c.passes)} passes, {len(c.kernels)} kernels)</li>' for i, c in enumerate(captures))
  body = "".join(_cached_capture_html(i, c) for i, c in enumerate(captures))
  return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>tgfn VIZ</title><style>{_PAGE_STYLE}</style>'
          f'</head><body><div id="sidebar"><h2>tgfn VIZ</h2><ul id="captures">{items}</ul></div>'
          f'<div id="main">{body or "<p>nothing recorded yet</p>"}</div><script>{_SCRIPT}</script></body></html>')
