"""See the whole machine (docs/observability.md): DEBUG output (debug.py), and with VIZ=1 a local page of
every realize and jit compile, its passes and its kernels (recorder.py, page.py, server.py).

  VIZ=1 python my_program.py           # prints the page's URL, serves it while the program runs
  with tgfn.viz.record() as rec: ...   # record a block; rec.html() is the page, rec.write(path) saves it
  tgfn.viz.draw(x)                     # an Array's graph, drawn inline in a notebook
"""
from __future__ import annotations

import atexit
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from tgfn import helpers
from tgfn.viz.graph import draw  # noqa: F401
from tgfn.viz.locations import locate
from tgfn.viz.recorder import Recorder


class Recording:
  """What `record()` yields: the recorder, and the page made from it."""
  def __init__(self, recorder: Recorder): self.recorder = recorder
  def html(self) -> str:
    from tgfn.viz.page import render
    return render(self.recorder)
  def write(self, path: str) -> Path:
    out = Path(path)
    out.write_text(self.html(), encoding="utf-8")
    return out


@contextmanager
def record() -> Iterator[Recording]:
  """Record every realize, jit compile and pass of the block (on top of VIZ=1's recorder, if any)."""
  previous, recorder, locator = helpers.tracker, Recorder(), helpers.locator
  helpers.tracker, helpers.locator = recorder, locate
  try:
    yield Recording(recorder)
  finally:
    helpers.tracker, helpers.locator = previous, locator


_server: Optional[Any] = None


def enable(port: Optional[int] = None) -> str:
  """Turn on recording for the whole process and serve the page; returns (and prints) its URL. VIZ=1
  does this at `import tgfn`. At exit, VIZ_FILE= saves the page; in a terminal the server keeps serving
  until Ctrl-C."""
  global _server
  from tgfn.viz.server import serve
  if _server is None:
    if not isinstance(helpers.tracker, Recorder): helpers.tracker = Recorder()
    helpers.locator = locate
    _server = serve(helpers.tracker, helpers.settings.VIZ_PORT if port is None else port)
    atexit.register(_at_exit)
  url = f"http://127.0.0.1:{_server.server_address[1]}/"
  print(f"VIZ: recording realizes, jit compiles and passes; the page is at {url}", file=sys.stderr)
  return url


def _at_exit() -> None:
  if (path := helpers.settings.VIZ_FILE):
    Recording(helpers.tracker).write(path)
    print(f"VIZ: page written to {path}", file=sys.stderr)
  if sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty():
    print(f"VIZ: still serving at http://127.0.0.1:{_server.server_address[1]}/ -- Ctrl-C to stop", file=sys.stderr)
    try:
      while True: time.sleep(3600)
    except KeyboardInterrupt:
      pass
