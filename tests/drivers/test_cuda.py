"""DEV=CUDA: every kernel of the op-suite sample (tests/drivers/backend_cases.py) is rendered as CUDA C and
compiled to PTX by NVRTC, so the renderer is checked on machines without a GPU (skipped where NVRTC is not
installed: `pip install nvidia-cuda-nvrtc-cu12`). Where a GPU is present the sample also runs on it and is
compared with the PYTHON reference; those tests skip cleanly otherwise."""
from __future__ import annotations

import re
from collections import OrderedDict

import pytest

import tgfn
from tgfn.engine import realize as realize_mod
from tests.drivers.backend_cases import APPROXIMATE, CASES, assert_agree, nvrtc_or_skip, reference, run_case


@pytest.mark.parametrize("name", list(CASES))
def test_every_kernel_compiles_to_ptx(name: str, monkeypatch) -> None:
  cuda = nvrtc_or_skip()
  assert b"--fmad=false" in cuda.DEVICE.compiler.options()
  # the kernels the case makes (on the reference interpreter, which every machine has), as one NVRTC program:
  # each renamed apart (names come from shapes), the guarded helpers shared
  sources = {}
  for kernel in reference(name, monkeypatch)[1]:
    source = realize_mod.prepare_kernel(kernel, "CUDA").source
    sources.setdefault(source, re.sub(rf"\b{kernel.name}\(", f"{kernel.name}_{len(sources)}(", source))
  ptx = cuda.DEVICE.compiler.compile("".join(sources.values()))
  entries = re.findall(r"\.visible \.entry (\w+)\(", ptx.decode())
  assert sorted(entries) == sorted(re.search(r"void (\w+)\(", s).group(1) for s in sources.values())


def test_no_gpu_gives_an_error_that_says_so(monkeypatch) -> None:
  cuda = nvrtc_or_skip()
  monkeypatch.setattr(cuda.ctypes.util, "find_library", lambda name: "/nonexistent/libcuda.so")
  with pytest.raises(cuda.CUDAUnavailable, match="NVIDIA GPU"):
    cuda._Driver()


def _gpu_or_skip():
  cuda = nvrtc_or_skip()
  try:
    cuda.driver()
  except cuda.CUDAUnavailable as e:
    pytest.skip(str(e))
  return cuda


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_matches_the_reference(name: str, monkeypatch) -> None:
  _gpu_or_skip()
  want, _ = reference(name, monkeypatch)
  got = run_case(name, "CUDA", monkeypatch)
  for i, (g, w) in enumerate(zip(got, want)): assert_agree(g, w, name in APPROXIMATE, f"{name} output {i}")


def test_device_is_listed() -> None:
  assert tgfn.Device.canonicalize("cuda") == "CUDA"


def test_kernels_state_their_block_size(monkeypatch) -> None:
  """The innermost output axis runs in blocks of 128 threads (a LOCAL opt): the kernel computes its index
  from blockIdx.x and threadIdx.x, returns past the end of an axis of 300, and the compiled header carries
  the block the driver launches with (grid = global / block)."""
  cuda = nvrtc_or_skip()
  import json
  import numpy as np
  import tgfn.numpy as tnp
  monkeypatch.setenv("DEV", "PYTHON")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  np.asarray(tnp.asarray(np.ones((2, 300), np.float32)) * 2)
  (kernel,) = realize_mod._compiled.values()
  prepared = realize_mod.prepare_kernel(kernel.lowered, "CUDA")
  assert [str(o) for o in prepared.opts] == ["Opt(LOCAL, 1, 128)"]
  assert "blockIdx.x * 128 + threadIdx.x" in prepared.source and ">= 300) return;" in prepared.source
  header = json.loads(cuda.DEVICE.compiler.compile(prepared.source).split(b"\n", 1)[0])
  name = re.search(r"void (\w+)\(", prepared.source).group(1)
  assert header["launch"][name] == [384, 2, 1] and header["local"][name] == [128, 1, 1]
