"""The benchmark driver keeps working: bench/run_all.py --quick on one tiny workload with tgfn and NumPy
only writes the tables (no timing is asserted; the figures are whatever this machine gives)."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_run_all_quick_writes_tables(tmp_path):
  out = tmp_path / "performance.md"
  # an earlier report: its tables are replaced, its hand-written notes below the mark kept
  out.write_text("# Performance\n\n| stale | table |\n\n<!-- hand-written notes: bench/run_all.py keeps everything "
                 "below this line -->\n\n## Notes\n\nWritten by hand.\n")
  proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run_all.py"), "--quick", "--only", "tiny_call",
                         "--frameworks", "tgfn,numpy", "--out", str(out)], capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  text = out.read_text()
  number = r"[0-9][0-9,.]*"
  # summary: tgfn and numpy measured, jax not selected, numpy has no jitted figure
  assert re.search(rf"^\| eager `x\*2\+1` on 16 floats, µs \| {number} \| skipped \| {number} \| skipped \| skipped \|$",
                   text, re.M), text
  assert re.search(rf"^\| jitted `x\*2\+1`, result ready, µs \| {number} \(jit, result kept {number}\) \| skipped \| — \|",
                   text, re.M), text
  # ratio table: tgfn / numpy for the eager row; the method and the per-workload details are there
  assert re.search(rf"^\| eager `x\*2\+1` on 16 floats, µs \| lower \| — \| {number} \|", text, re.M), text
  assert "## Method" in text and "### `bench/tiny_call.py` — ok" in text
  assert "jax: skipped: not selected (--frameworks)" in text
  assert "| stale | table |" not in text and text.rstrip().endswith("## Notes\n\nWritten by hand.")


def test_a_target_can_name_a_variant_of_tgfns_figure():
  """The BEAM targets read tgfn's "BEAM=2" variant, not its primary (heuristic) figure."""
  sys.path.insert(0, str(ROOT / "bench"))
  try:
    from common import Row
    from run_all import target_lines
  finally:
    sys.path.remove(str(ROOT / "bench"))
  row = Row("matmul 1024², GFLOP/s", "GFLOP/s", higher_is_better=True)
  row.add("tgfn", "jit", 150.0)
  row.add("tgfn", "BEAM=2", 210.0)
  row.add("numpy", "eager", 200.0)
  lines = "\n".join(target_lines([row]))
  assert "| heuristic >= 0.8 x the best peer | 150 | 200 (numpy) | 0.75 | **no** |" in lines
  assert "| with BEAM >= 1.0 x the best peer | 210 | 200 (numpy) | 1.05 | yes |" in lines


def test_interleave_lets_each_framework_start_after_the_others_threads_went_idle(monkeypatch):
  """Each framework's turn in a round starts after PAUSE_BETWEEN_FRAMEWORKS idle seconds (a BLAS's threads
  spin on after its call and slow whoever runs next); none with one framework, none in --quick rounds."""
  sys.path.insert(0, str(ROOT / "bench"))
  try:
    import common
  finally:
    sys.path.remove(str(ROOT / "bench"))
  events = []
  monkeypatch.setattr(common.time, "sleep", lambda s: events.append(("idle", s)))
  calls = {"a": lambda: events.append("a"), "b": lambda: events.append("b")}
  common.interleave(calls, rounds=2, reps=1, round_seconds=1.0, warmup=0)
  pause = ("idle", common.PAUSE_BETWEEN_FRAMEWORKS)
  assert common.PAUSE_BETWEEN_FRAMEWORKS >= 0.2 and events == [pause, "a", pause, "b"] * 2
  events.clear()
  common.interleave({"a": calls["a"]}, rounds=2, reps=1, round_seconds=1.0, warmup=0)
  common.interleave(calls, rounds=1, reps=1, round_seconds=0.1, warmup=0)
  assert events == ["a", "a", "a", "b"]
