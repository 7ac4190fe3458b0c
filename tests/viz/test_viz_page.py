"""VIZ: named passes are recorded per realize and jit compile, and the page shows them (tgfn/viz/)."""
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
import tgfn.viz
from tgfn.viz.locations import location
from tgfn import helpers
from tgfn.uop.ops import UOp, graph_rewrite
from tgfn.uop.symbolic import symbolic
from tgfn.dtype import dtypes

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _program(n: int):
  """A jitted function, an eager realize and a grad, on shapes no other test compiles for."""
  x = tnp.array(np.arange(3 * n, dtype=np.float32).reshape(3, n))
  f = tgfn.jit(lambda x: tnp.exp(x - x.max(1, keepdims=True)).sum(1))
  f(x).numpy()
  (x * 3 + 1).numpy()  # an eager realize
  tgfn.grad(lambda x: (x * x).sum())(x).numpy()


def test_every_stage_is_a_named_recorded_pass():
  with tgfn.viz.record() as rec:
    _program(41)
  captures = rec.recorder.captures
  jit = next(c for c in captures if c.title == "jit <lambda>")
  names = [p.name for p in jit.passes]
  for stage in ("trace", "schedule: ", "lower to loops: reduce 3x1 over 41 float32", ": simplify", ": linearize"):
    assert any(stage in n for n in names), (stage, names)
  assert jit.kernels and jit.settings["DEBUG"] == 0
  assert any(c.title.startswith("realize") and c.kernels for c in captures)
  assert any(p.name == "grad: backward walk" for c in captures for p in c.passes)
  # the user's line of each node built here
  jit_graph = jit.passes[0].after  # the trace's outputs
  assert location(jit_graph[0]) is not None and location(jit_graph[0])[0].startswith(__file__)


def test_only_named_rewrites_are_recorded():
  x = UOp.const(dtypes.index, 3) + UOp.const(dtypes.index, 4)
  with tgfn.viz.record() as rec:
    graph_rewrite(x, symbolic)
    graph_rewrite(x, symbolic, name="fold constants")
  assert [p.name for c in rec.recorder.captures for p in c.passes] == ["fold constants"]


def test_recording_is_off_without_viz():
  assert helpers.tracker is None and not any(t.name == "tgfn-viz" for t in threading.enumerate())


def test_page_lists_passes_draws_graphs_and_shows_source():
  with tgfn.viz.record() as rec:
    _program(42)
  page = rec.html()
  assert '<ol class="passes">' in page and "linearize" in page
  assert '<svg class="graph"' in page and 'class="node changed"' in page
  assert "void " in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # offline


def test_viz_env_serves_the_page_and_writes_it(tmp_path):
  out = tmp_path / "viz.html"
  env = {**os.environ, "VIZ": "1", "VIZ_FILE": str(out), "PYTHONPATH": str(ROOT)}
  code = ("import urllib.request, numpy as np, tgfn, tgfn.numpy as tnp, tgfn.viz\n"
          "(tnp.array(np.ones(4, np.float32)) * 2).numpy()\n"
          "url = 'http://127.0.0.1:%d/' % tgfn.viz._server.server_address[1]\n"
          "print('PAGE', 'linearize' in urllib.request.urlopen(url).read().decode())\n")
  run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert run.returncode == 0, run.stderr
  assert "PAGE True" in run.stdout and "http://127.0.0.1:" in run.stderr
  assert "linearize" in out.read_text()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium is not installed (CI installs it)")
def test_page_in_headless_chromium(tmp_path):
  from tgfn.viz.server import serve
  with tgfn.viz.record() as rec:
    _program(43)
  server = serve(rec.recorder)
  try:
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,900"]
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    shot = tmp_path / "viz.png"
    subprocess.run(flags + [f"--screenshot={shot}", url], capture_output=True, timeout=120)
  finally:
    server.shutdown()
  assert 'data-ready="1"' in dom                                   # the page's script ran
  assert '<ol class="passes">' in dom and "lower to loops" in dom   # the pass list
  assert '<svg class="graph"' in dom                                # a graph
  assert 'class="source"' in dom and "void " in dom                 # a kernel's source
  assert shot.stat().st_size > 10_000
