"""DEBUG=1..5 print the same things for eager realizes and jitted calls (tgfn/viz/debug.py)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import tgfn
import tgfn.numpy as tnp
from tgfn.helpers import Context, settings

ROOT = Path(__file__).resolve().parents[2]


def _ones(*shape):
  return tnp.array(np.ones(shape, np.float32))


def test_jitted_calls_print_a_line_per_call_and_per_kernel(monkeypatch, capsys):
  f = tgfn.jit(lambda x, w: tnp.tanh(x @ w).sum(1) + x.max(1))
  x, w = _ones(3, 7), _ones(7, 4)
  f(x, w)
  capsys.readouterr()
  monkeypatch.setenv("DEBUG", "1")
  f(x, w)   # a replay: nothing is compiled
  out = capsys.readouterr().out
  assert "jit call of <lambda> with 1 kernel(s)" in out and "GFLOP/s" not in out
  monkeypatch.setenv("DEBUG", "2")
  f(x, w)
  out = capsys.readouterr().out
  assert "contraction 3 over" in out and "GFLOP/s" in out and "GB/s" in out


def test_a_compile_says_how_many_kernels_are_distinct_and_their_source_size(capsys):
  """DEBUG=1: compiling a jitted function says how many kernels it became, how many of them differ (two
  layers of the same shape are one kernel compiled once) and the characters of their source."""
  import re
  layer = lambda x, w: tnp.tanh(x @ w) * 2 + 1  # noqa: E731
  f = tgfn.jit(lambda x, w1, w2: layer(layer(layer(x, w1), w2), w1).sum())
  x, w1, w2 = _ones(16, 16), _ones(16, 16) * 0.5, _ones(16, 16) * 0.25
  with Context(DEBUG=1): f(x, w1, w2)
  line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("compiled <lambda>"))
  total, distinct, chars = map(int, re.match(r"compiled <lambda>: (\d+) kernel\(s\), (\d+) distinct, (\d+) K", line).groups())
  kernels = f.lower(x, w1, w2).kernels
  assert (total, distinct) == (len(kernels), len({k.source for k in kernels})) and distinct < total, line
  assert chars == round(sum(len(s) for s in {k.source for k in kernels}) / 1e3)


def test_first_launch_says_the_compile_time(monkeypatch, capsys):
  monkeypatch.setenv("DEBUG", "2")
  x = _ones(11, 13)
  (x * 3 + 1).numpy()
  line = next(ln for ln in capsys.readouterr().out.splitlines() if "elementwise 11x13 float32" in ln)
  assert "compiled in" in line
  (x * 4 + 2).numpy()  # the same kernel, new scalars
  line = next(ln for ln in capsys.readouterr().out.splitlines() if "elementwise 11x13 float32" in ln)
  assert "compiled in" not in line


def test_two_different_kernels_never_share_a_name(monkeypatch, capsys):
  monkeypatch.setenv("DEBUG", "2")
  x = _ones(4, 9)
  x.sum(1).numpy()
  x.max(1).numpy()
  names = [ln.split("CPU")[0].strip() for ln in capsys.readouterr().out.splitlines() if "GFLOP/s" in ln]
  assert len(names) == 2 and names[0] != names[1] and all(n.startswith("reduce 4") for n in names)


def test_level_3_says_what_is_fused_and_why_each_buffer_exists(monkeypatch, capsys):
  monkeypatch.setenv("DEBUG", "3")
  x = _ones(6, 10)
  e = tnp.exp(x - x.max(1, keepdims=True))
  (e / e.sum(1, keepdims=True)).numpy()
  out = capsys.readouterr().out
  assert "fuses:" in out and "EXP2" in out and "REDUCE_AXIS(MAX)" in out
  assert "a reduction whose result is broadcast" in out and "an output being realized" in out


def test_level_4_prints_shared_helpers_once(monkeypatch, capsys):
  monkeypatch.setenv("DEBUG", "4")
  x = _ones(5, 17)
  (x + 2).numpy()
  (x * x).sum(0).numpy()
  out = capsys.readouterr().out
  assert out.count("void ") >= 2 and out.count("#define TG_PRELUDE") <= 1


def test_level_5_lists_each_op_with_its_operands(monkeypatch, capsys):
  monkeypatch.setenv("DEBUG", "5")
  (_ones(3, 19) * 4).numpy()
  lines = [ln for ln in capsys.readouterr().out.splitlines() if " MUL " in ln and "[" in ln]
  assert lines and any(ch.isdigit() for ch in lines[0].split("[")[1])


def test_context_overrides_switches_for_a_block(capsys):
  with Context(DEBUG=1, NOOPT=True):
    assert settings()["DEBUG"] == 1 and settings()["NOOPT"] is True
    (_ones(2, 23) + 1).numpy()
  assert "kernel(s) in" in capsys.readouterr().out
  assert settings()["DEBUG"] == 0
  assert tgfn.Context is Context


# ---- every launch, host call and copy shows (issue 28, item 7)

def _kernel_lines(out: str) -> list[str]:
  return [ln for ln in out.splitlines() if "GB/s" in ln]


def test_a_jitted_scan_shows_each_body_kernel_with_its_trip_count(capsys):
  def f(x):
    return tgfn.lax.scan(lambda c, _: (tnp.tanh(c) * 1.01 + 0.5, c.sum()), x, None, length=100)
  g = tgfn.jit(f)
  x = _ones(8)
  g(x)
  capsys.readouterr()
  with Context(DEBUG=2): g(x)
  out = capsys.readouterr().out
  body = [ln for ln in _kernel_lines(out) if " x100 " in ln]
  assert len(body) == 2, out   # the body's two kernels, each once with its count
  assert any(ln.lstrip().startswith("elementwise 8 float32") for ln in body)
  assert any(ln.lstrip().startswith("reduce scalar over 8 float32") for ln in body)
  assert "Scan x100 on CPU: 200 launch(es)" in out and "jit call of f with 200 kernel(s)" in out


def test_a_while_loop_shows_its_trips_and_the_predicate_read_back(capsys):
  f = tgfn.jit(lambda x: tgfn.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2.), (0, x)))
  f(_ones(3))
  capsys.readouterr()
  with Context(DEBUG=2): f(_ones(3))
  out = capsys.readouterr().out
  assert "While x5 on CPU" in out, out
  assert any(" x6 " in ln and "bool CPU -> host" in ln for ln in _kernel_lines(out)), out  # one per test


def test_host_calls_and_copies_show(capsys):
  a = tnp.array(np.eye(3, dtype=np.float32) * 2)
  inverse = tgfn.jit(lambda a: tnp.linalg.inv(a) * 2)
  moved = tgfn.jit(lambda a: tgfn.device_put(a[0] * 3, "PYTHON") + 1)
  inverse(a), moved(a)
  capsys.readouterr()
  with Context(DEBUG=2):
    tnp.linalg.inv(a + 1).numpy()
    inverse(a)
    tnp.fft.fft(a[0] + 1).numpy()
    tgfn.device_put(a * 3, "PYTHON").numpy()
    moved(a)
  out = capsys.readouterr().out
  lines = _kernel_lines(out)
  assert len([ln for ln in lines if ln.lstrip().startswith("host inv of 3x3 float32")]) == 2, lines
  assert any(ln.lstrip().startswith("host fft_c2c of 3 complex64") for ln in lines), lines
  assert any(ln.lstrip().startswith("copy 9 float32 CPU -> PYTHON") for ln in lines), lines
  assert any(ln.lstrip().startswith("copy 3 float32 CPU -> PYTHON") for ln in lines), lines  # the jitted one
  assert "jit call of <lambda> with 1 kernel(s), 1 host call(s)" in out and "with 2 kernel(s), 1 copies" in out


_WARM_WORKER = """
import numpy as np, tgfn, tgfn.numpy as tnp
from tgfn.engine.plan_cache import Counters
f = tgfn.jit(lambda x, w: (tnp.tanh(x @ w) + x.max(1, keepdims=True), (x * 2).sum(0)))
x = tnp.array(np.ones((256, 256), np.float32))
f(x, x)
print("plan cache hits", Counters.hits)
"""


def test_a_plan_from_the_disk_cache_prints_the_same_names_and_figures(tmp_path):
  env = {k: v for k, v in os.environ.items() if k not in ("SPEC", "DEBUG_NANS", "TGFN_DISABLE_PLAN_CACHE")}
  env.update(TGFN_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT), DEBUG="2")

  def run() -> tuple[list[str], str]:
    out = subprocess.run([sys.executable, "-c", _WARM_WORKER], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return _kernel_lines(out.stdout), out.stdout

  (cold, cold_out), (warm, warm_out) = run(), run()
  assert "plan cache hits 0" in cold_out and "plan cache hits 1" in warm_out
  def names(lines): return [ln.split(" CPU ")[0].strip() for ln in lines]
  assert len(cold) >= 3 and names(warm) == names(cold), (cold, warm)
  assert all(float(ln.split("GB/s")[0].split()[-1]) > 0 for ln in warm), warm
