"""DEBUG=1..5 print the same things for eager realizes and jitted calls (tgfn/viz/debug.py)."""
import numpy as np

import tgfn
import tgfn.numpy as tnp
from tgfn.helpers import Context, settings


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
