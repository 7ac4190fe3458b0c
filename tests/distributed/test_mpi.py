"""Two processes under mpirun (skipped where mpirun or mpi4py is missing; .ci/run installs them): the
data-parallel example equals one-process training, collectives span the processes, and bad runs end
with a clear error instead of hanging."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun (apt-get install openmpi-bin)")


def _mpirun(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
  pytest.importorskip("mpi4py")
  environment = {**os.environ, "PYTHONPATH": str(ROOT), "TGFN_CPU_DEVICES": "2", **env}
  return subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, *args],
                        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout)


def test_data_parallel_example_on_two_processes_equals_one_process_training():
  run = _mpirun("-m", "tgfn.examples.data_parallel", "--steps", "3", "--batch", "64")
  assert run.returncode == 0, run.stdout + run.stderr
  for rank in (0, 1): assert f"process {rank}/2 with 2 device(s)" in run.stdout, run.stdout + run.stderr


def test_collectives_span_the_devices_of_both_processes():
  run = _mpirun(str(ROOT / "tests/distributed/mpi_program.py"), "collectives")
  assert run.returncode == 0, run.stdout + run.stderr
  # device rows [0, 1, 2] and [3, 4, 5], plus 100 on process 1: column sums over the 4 members
  for rank in (0, 1):
    want = f"process {rank}: psum [206.0, 210.0, 214.0] index {[2.0 * rank, 2.0 * rank + 1]} gathered (2, 4, 3) vmap True"
    assert want in run.stdout, run.stdout


def test_derivatives_pass_through_collectives_that_span_the_processes():
  run = _mpirun(str(ROOT / "tests/distributed/mpi_program.py"), "grads")
  assert run.returncode == 0, run.stdout + run.stderr
  for rank in (0, 1):
    want = f"process {rank}: errors {{'psum': 0.0, 'all_gather': 0.0, 'all_gather inside': 0.0, 'psum jvp': 0.0}} pmax True"
    assert want in run.stdout, run.stdout + run.stderr


def test_shapes_that_differ_between_processes_are_a_clear_error():
  run = _mpirun(str(ROOT / "tests/distributed/mpi_program.py"), "mismatch")
  assert run.returncode != 0
  # each device's member is a row: (2,) on process 0, (3,) on process 1
  assert "the processes disagree on a cross-process collective (process 0: sum of float32 (2,); process 1: sum " \
         "of float32 (3,))" in run.stdout, run.stdout + run.stderr


def test_a_process_that_leaves_ends_the_job_without_a_hang():
  run = _mpirun(str(ROOT / "tests/distributed/mpi_program.py"), "dies", TGFN_MPI_TIMEOUT="10", timeout=120)
  assert run.returncode != 0
  said = run.stdout + run.stderr
  assert "waited 10 s for the other processes" in said or "exited" in said, said


def test_collectives_across_processes_are_exact_in_every_dtype():
  run = _mpirun(str(ROOT / "tests/distributed/mpi_program.py"), "exact")
  assert run.returncode == 0, run.stdout + run.stderr
  for rank in (0, 1): assert f"process {rank}: inexact []" in run.stdout, run.stdout + run.stderr
