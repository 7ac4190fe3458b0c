"""The main job (README's first command) trains to the promised accuracy, and runs on PYTHON too."""
import os
import subprocess
import sys

import pytest

from tgfn.train_digits import StepTimer


def run_main_job(*args: str, dev: str) -> str:
  env = {**os.environ, "DEV": dev}
  proc = subprocess.run([sys.executable, "-m", "tgfn.train_digits", *args], env=env, capture_output=True,
                        text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr
  return proc.stdout


def test_steps_per_second_leave_the_compiling_first_step_out():
  timer = StepTimer()
  for seconds in (5.0, 0.5, 0.5):   # a slow first call (trace and compile), then two steps
    timer.add(seconds)
  assert timer.first == 5.0 and timer.end_epoch().strip() == "2.0" and timer.overall() == "2.0"
  timer.add(0.25)
  assert timer.end_epoch().strip() == "4.0"   # per epoch, not a running average


def test_trains_digits_to_97_percent_on_the_cpu():
  pytest.importorskip("sklearn")
  out = run_main_job(dev="CPU")
  final = [line for line in out.splitlines() if line.startswith("test accuracy")][-1]
  assert float(final.split()[2]) >= 0.97, out
  assert "steps/s" in final and "total" in final


def test_runs_a_few_steps_on_the_reference_interpreter():
  pytest.importorskip("sklearn")
  out = run_main_job("--steps", "2", "--hidden", "8", "--batch", "4", dev="PYTHON")
  assert "device PYTHON" in out and "after 2 steps" in out


def test_runs_a_few_steps_on_webgpu():
  """No 64-bit numbers on WEBGPU: the model's random init and the gradient of the label gather stay in 32 bits."""
  pytest.importorskip("sklearn")
  from tgfn_drivers import BackendUnavailable, require_backend
  try:
    require_backend("WEBGPU")
  except BackendUnavailable as e:
    pytest.skip(str(e))
  out = run_main_job("--steps", "2", "--hidden", "8", "--batch", "4", dev="WEBGPU")
  assert "device WEBGPU" in out and "after 2 steps" in out
