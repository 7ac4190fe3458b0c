"""DEV=OPENCL against the PYTHON reference interpreter: a broad sample of the op suite
(tests/drivers/backend_cases.py) runs on both and must agree -- bit for bit, but for libm-level functions
and the float policy's fused reductions. Skipped where no OpenCL runtime is installed (CI installs PoCL,
.ci/run)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
from tgfn.engine import realize as realize_mod
from tests.drivers.backend_cases import APPROXIMATE, CASES, assert_agree, reference, run_case


def _opencl_or_skip() -> None:
  from tgfn_drivers import opencl
  try:
    opencl.runtime()
  except opencl.OpenCLUnavailable as e:
    pytest.skip(str(e))


@pytest.mark.parametrize("name", list(CASES))
def test_opencl_matches_the_reference(name: str, monkeypatch) -> None:
  _opencl_or_skip()
  want, _ = reference(name, monkeypatch)
  got = run_case(name, "OPENCL", monkeypatch)
  assert len(got) == len(want)
  for i, (g, w) in enumerate(zip(got, want)): assert_agree(g, w, name in APPROXIMATE, f"{name} output {i}")


def test_kernels_use_global_ids(monkeypatch) -> None:
  """The output axes of an elementwise kernel are the launch grid, innermost first; a reduction loops."""
  _opencl_or_skip()
  monkeypatch.setenv("DEV", "OPENCL")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  import tgfn.numpy as tnp
  (tnp.ones((3, 5, 7)) * 2 + tnp.ones((3, 5, 7))).sum(2).numpy()
  sources = [c.source for c in realize_mod._compiled.values()]
  assert any(s.startswith("// tgfn launch: global=5,3,1") and "get_global_id(1)" in s and "for (" in s for s in sources), sources
  assert all("#pragma OPENCL FP_CONTRACT OFF" in s for s in sources)


def test_unavailable_runtime_says_what_to_install(monkeypatch) -> None:
  from tgfn_drivers import opencl
  monkeypatch.setattr(opencl.ctypes.util, "find_library", lambda name: "/nonexistent/libOpenCL.so")
  with pytest.raises(opencl.OpenCLUnavailable, match="apt-get install pocl-opencl-icd"):
    opencl._Runtime()  # what runtime() starts once per process


def test_device_is_listed() -> None:
  assert tgfn.Device.canonicalize("opencl") == "OPENCL"


def test_values_move_between_devices() -> None:
  _opencl_or_skip()
  import tgfn.numpy as tnp
  on_device = tgfn.device_put(tnp.arange(6.0) * 2, "OPENCL")
  back = tgfn.device_put(on_device + 1, "CPU")
  assert (on_device + 1).device == "OPENCL" and back.device == "CPU"
  assert np.asarray(back * 3).tolist() == [3.0, 9.0, 15.0, 21.0, 27.0, 33.0]


def test_block_until_ready_waits_for_the_queue(monkeypatch) -> None:
  """OpenCL launches return before the kernel ends: block_until_ready must finish the queue, or a timing
  taken after it measures only the launch."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  device, finished = tgfn.Device["OPENCL"], []
  monkeypatch.setattr(device, "synchronize", lambda real=device.synchronize: (real(), finished.append(True)))
  x = tgfn.device_put(tnp.arange(6.0), "OPENCL")
  (x * 2).block_until_ready()
  tgfn.block_until_ready({"y": x + 1})
  assert finished == [True, True]


def test_values_from_constants_run_where_the_inputs_live(monkeypatch) -> None:
  """Arrays on the CPU, OPENCL the default device: a gradient's constant-only pieces (the seed 1.0, a
  broadcast zero) ran on OPENCL and their cl_mem handles went to CPU kernels as pointers (garbage, -1.6e13)."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  x = tnp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
  t, w, b = tnp.array([True, True, False, True]), tnp.array([0.3, -0.2, 0.5]), tnp.array(0.1)
  def loss(w, b):  # the JAX quickstart's logistic regression
    p = 0.5 * (tnp.tanh((tnp.dot(x, w) + b) / 2) + 1)
    return -tnp.sum(tnp.log(p * t + (1 - p) * (1 - t)))
  monkeypatch.setenv("DEV", "OPENCL")
  got = tgfn.grad(loss, (0, 1))(w, b)[1]
  assert got.device == "CPU" and float(np.asarray(got)) == pytest.approx(-0.519425873515188, rel=1e-5)


def test_threads_starting_opencl_at_once_share_one_runtime(monkeypatch) -> None:
  """Two runtimes would be two contexts, with one thread's buffers passed to the other's kernels (the
  threaded jit test got wrong values on OPENCL). A slow start makes the race certain without the lock."""
  import threading
  import time
  from tgfn_drivers import opencl
  made = []
  def slow_start() -> object:
    time.sleep(0.05)
    made.append(object())
    return made[-1]
  monkeypatch.setattr(opencl, "_Runtime", slow_start)
  monkeypatch.setattr(opencl, "_runtime", [])
  got, start = [], threading.Barrier(4)
  def ask() -> None:
    start.wait()
    got.append(opencl.runtime())
  threads = [threading.Thread(target=ask) for _ in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert len(made) == 1 and all(r is made[0] for r in got)


def test_a_jitted_function_builds_as_one_program(monkeypatch) -> None:
  _opencl_or_skip()
  from tgfn_drivers import opencl
  import tgfn.numpy as tnp
  monkeypatch.setenv("DEV", "OPENCL")
  monkeypatch.setenv("TGFN_DISABLE_COMPILER_CACHE", "1")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  builds = []
  monkeypatch.setattr(opencl.CLCompiler, "compile", lambda self, src, real=opencl.CLCompiler.compile: (builds.append(src), real(self, src))[1])
  step = tgfn.jit(lambda x: ((x * 2).sum(0), tnp.exp(x).max(1), x.T @ x))
  outs = step(tnp.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4) / 10))
  assert len(builds) == 1 and builds[0].count("__kernel void") == 3, f"{len(builds)} builds"
  np.testing.assert_allclose(np.asarray(outs[2]), (np.arange(12.0).reshape(3, 4) / 10).T @ (np.arange(12.0).reshape(3, 4) / 10), rtol=1e-6)
