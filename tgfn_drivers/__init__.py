"""Device drivers: one module per device, each defining `DEVICE`, a `tgfn.device.Compiled`.

This module is the list of the backends tgfn knows, what each needs, and how to tell whether this
machine has it, without loading any driver: `backends()` (also `tgfn.backends()`) reports each one,
and a driver module calls `require_backend` first, so selecting one that cannot run (`DEV=LLVM`
without llvmlite) is an error that says what to install.
"""
from __future__ import annotations

import ctypes.util
import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from typing import Callable, Optional


class BackendUnavailable(RuntimeError):
  """A backend was selected that this machine cannot run; the message says what to install."""


@dataclass(frozen=True)
class Backend:
  name: str           # what DEV= takes
  description: str
  available: bool
  reason: str         # why it is unavailable ('' when available)
  install: str        # what makes it available


def _module_missing(module: str) -> Optional[str]:
  if importlib.util.find_spec(f"tgfn_drivers.{module}") is None:
    return f"this tgfn has no driver module tgfn_drivers/{module}.py"
  return None


def _cpu() -> Optional[str]:
  from tgfn_drivers.cpu import find_c_compiler
  try:
    find_c_compiler()
  except RuntimeError as e:
    return str(e)
  return None


LLVMLITE_SUPPORTED = ((0, 45), (0, 51))  # [lowest, first unsupported): opaque pointers and the new pass manager (0.45+); tested 0.45 and 0.50


def _llvm() -> Optional[str]:
  if importlib.util.find_spec("llvmlite") is None: return "llvmlite is not installed"
  version = importlib.metadata.version("llvmlite")
  numbers = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
  low, high = LLVMLITE_SUPPORTED
  if not low <= numbers < high:
    return f"llvmlite {version} is installed; the LLVM driver supports {'.'.join(map(str, low))} up to, not including, " \
           f"{'.'.join(map(str, high))}"
  return None


def _opencl() -> Optional[str]:
  if (missing := _module_missing("opencl")) is not None: return missing
  if ctypes.util.find_library("OpenCL") is None: return "no OpenCL ICD loader (libOpenCL.so) was found"
  return None


def _cuda() -> Optional[str]:
  if (missing := _module_missing("cuda")) is not None: return missing
  if ctypes.util.find_library("cuda") is None: return "no NVIDIA driver (libcuda.so) was found: no NVIDIA GPU here"
  return None


def _webgpu() -> Optional[str]:
  # whether Chromium offers a WebGPU adapter is known only once it runs: the driver says so at first use
  if (missing := _module_missing("webgpu")) is not None: return missing
  if not (os.environ.get("TGFN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")):
    return "no Chromium was found (headless Chromium runs the WebGPU kernels)"
  return None


# name -> (description, probe returning why it is unavailable or None, what to install)
_KNOWN: dict[str, tuple[str, Callable[[], Optional[str]], str]] = {
  "CPU": ("C source compiled by the system C compiler, run through ctypes (the default)", _cpu,
          "a C compiler: apt-get install gcc (or set CC=)"),
  "PYTHON": ("the reference interpreter: exact, slow", lambda: None, "nothing"),
  "LLVM": ("LLVM IR compiled in-process by llvmlite, run on the CPU", _llvm,
           "pip install 'tgfn[llvm]' (or: pip install 'llvmlite>=0.45,<0.51')"),
  "OPENCL": ("OpenCL C, e.g. on PoCL for CPUs", _opencl,
             "apt-get install ocl-icd-libopencl1 pocl-opencl-icd"),
  "CUDA": ("CUDA C compiled by NVRTC, run on an NVIDIA GPU", _cuda,
           "an NVIDIA GPU with its driver, and pip install nvidia-cuda-nvrtc-cu12"),
  "WEBGPU": ("WGSL run by headless Chromium's WebGPU (a software adapter without a GPU)", _webgpu,
             "Chromium: apt-get install chromium (or set TGFN_CHROMIUM to its path)"),
}


def backends() -> list[Backend]:
  """Every backend tgfn knows, with whether it can run here, and if not why and what to install."""
  out = []
  for name, (description, probe, install) in _KNOWN.items():
    reason = probe()
    out.append(Backend(name, description, reason is None, reason or "", "" if reason is None else install))
  return out


def require_backend(name: str) -> None:
  """Raise BackendUnavailable, naming what to install, when backend `name` cannot run here."""
  description, probe, install = _KNOWN[name]
  if (reason := probe()) is not None:
    raise BackendUnavailable(f"DEV={name} ({description}) is not available: {reason}. Install: {install}; "
                             f"tgfn.backends() lists the backends this machine can run.")
