"""Rich output in Jupyter: an Array as a small table of facts and values, a lowered jit function as its
kernels with highlighted C source. Plain HTML strings with inline styles (no scripts, no assets)."""
from __future__ import annotations

import html
import re
from typing import Any

import numpy as np

_C_TOKENS = re.compile(r"(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<pre>^#[^\n]*)|(?P<kw>\b(?:for|if|else|return|const|void|"
                       r"static|inline|struct|typedef|unsigned|long|int|float|double|char|short|_Bool|__attribute__)\b)"
                       r"|(?P<num>\b0x[0-9a-fA-Fp.+-]+f?\b|\b\d+(?:\.\d+)?(?:LL|f|u)?\b)", re.S | re.M)
_COLORS = {"comment": "#6a737d", "pre": "#b31d28", "kw": "#d73a49", "num": "#005cc5"}


def highlight_c(source: str) -> str:
  """`source` as HTML with keywords, numbers, comments and preprocessor lines coloured."""
  out, last = [], 0
  for m in _C_TOKENS.finditer(source):
    out.append(html.escape(source[last:m.start()]))
    out.append(f'<span style="color:{_COLORS[m.lastgroup]}">{html.escape(m.group(0))}</span>')
    last = m.end()
  out.append(html.escape(source[last:]))
  return "".join(out)


def array_html(a: Any) -> str:
  """An Array: shape, dtype, device, and its values (computing them, as repr does)."""
  values = np.asarray(a)
  text = np.array2string(values, threshold=200, edgeitems=3, precision=5)
  return (f'<div><code>tgfn.Array</code> shape <code>{tuple(a.shape)}</code> dtype <code>{a.dtype.name}</code> '
          f'device <code>{html.escape(str(a.device))}</code><pre style="margin:4px 0">{html.escape(text)}</pre></div>')


def lowered_html(lowered: Any) -> str:
  """A `jit(f).lower(...)`: each kernel's name, opts and highlighted source."""
  from tgfn.viz.debug import kernel_label
  parts = []
  for k in lowered.kernels:
    label = kernel_label(k.lowered) if getattr(k, "lowered", None) is not None else k.name
    body = k.source[k.source.find("#endif\n") + 7:] if "#endif\n" in k.source else k.source  # helpers left out
    parts.append(f'<details open><summary><b>{html.escape(label)}</b> <code>{html.escape(k.name)}</code> opts '
                 f'<code>{html.escape(str(list(k.opts)))}</code></summary><pre style="background:#f6f8fa;'
                 f'padding:6px">{highlight_c(body)}</pre></details>')
  return f"<div>{len(lowered.kernels)} kernel(s){''.join(parts)}</div>"
