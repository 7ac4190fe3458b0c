"""bench/distributed_step.py runs (--quick, tgfn only, the MPI run included) and writes its three rows;
no timing is asserted, the figures are whatever this machine gives."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow
def test_distributed_step_quick_writes_its_rows(tmp_path, monkeypatch):
  monkeypatch.delenv("TGFN_CPU_DEVICES")  # the script sets its own
  out = tmp_path / "rows.json"
  proc = subprocess.run([sys.executable, str(ROOT / "bench" / "distributed_step.py"), "--quick", "--frameworks", "tgfn",
                         "--json", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  rows = {r["work"]: r for r in json.loads(out.read_text())["rows"]}
  assert len(rows) == 3
  labels = {work: [c["label"] for c in r["cells"].get("tgfn", [])] for work, r in rows.items()}
  one, two, mpi = labels.values()
  assert one == ["pmap", "jit, no pmap"] and two == ["pmap", "speed-up", "% in copies between devices"]
  assert mpi == ["pmap over 2 processes", "% in MPI"] or "mpirun" in str(rows[list(rows)[2]]["skips"])
