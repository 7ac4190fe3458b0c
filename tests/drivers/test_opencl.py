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
from tests.drivers.backend_cases import APPROXIMATE, CASES


def _opencl_or_skip() -> None:
  from tgfn_drivers import opencl
  try:
    opencl.runtime()
  except opencl.OpenCLUnavailable as e:
    pytest.skip(str(e))


def run_case(name: str, device: str, monkeypatch) -> list[np.ndarray]:
  monkeypatch.setenv("DEV", device)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  outs = CASES[name]()
  arrays = [np.asarray(o) for o in outs]
  for o in outs: assert o.device == device, f"{name} ran on {o.device}, expected {device}"
  return arrays


def assert_agree(got: np.ndarray, want: np.ndarray, approximate: bool, what: str) -> None:
  assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
  if got.dtype.kind not in "biuf": got, want = got.astype(np.float32), want.astype(np.float32)  # bfloat16 (exact)
  if got.dtype.kind in "biu" or not approximate:
    # floats bit for bit, NaN as NaN (whatever its payload)
    same = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    signs = np.signbit(got) == np.signbit(want) if got.dtype.kind == "f" else True
    bad = ~(same & (signs | np.isnan(got)))
    assert not bad.any(), f"{what}: OPENCL {got[bad][:8]} vs PYTHON {want[bad][:8]}"
  else:
    tol = 1e-2 if got.dtype in (np.float16,) or got.dtype.itemsize == 2 else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("name", list(CASES))
def test_opencl_matches_the_reference(name: str, monkeypatch) -> None:
  _opencl_or_skip()
  want = run_case(name, "PYTHON", monkeypatch)
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
