"""CPU: kernels rendered as C, compiled by the system C compiler into a shared object, called via ctypes."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

from tgfn.device import Compiled, Compiler, HostAllocator
from tgfn.renderer.cstyle import CStyleRenderer

# -fwrapv: signed overflow wraps (tgfn's integer semantics); no -ffast-math: NaN and inf must behave.
# -ffp-contract=off: GCC's default fuses a*b+c into one FMA (one rounding instead of two), which breaks
# agreement with the op-by-op rounding of tgfn/uop/alu.py and the PYTHON reference.
CFLAGS = ["-O2", "-march=native", "-fwrapv", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC"]


def find_c_compiler() -> str:
  for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
    if candidate and shutil.which(candidate): return candidate
  raise RuntimeError("the CPU device needs a C compiler, and none was found (tried $CC, cc, gcc, clang). "
                     "Install one (e.g. `apt-get install gcc`), point CC= at it, or run on the "
                     "reference interpreter with DEV=PYTHON.")


class CCompiler(Compiler):
  def __init__(self) -> None:
    self.cc = None

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    return f"{self._cc()} {' '.join(CFLAGS)}"

  def _cc(self) -> str:
    if self.cc is None: self.cc = find_c_compiler()
    return self.cc

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tgfn-cc-") as tmp:
      out = os.path.join(tmp, "kernel.so")
      proc = subprocess.run([self._cc(), *CFLAGS, "-x", "c", "-", "-o", out], input=src.encode(),
                            capture_output=True)
      if proc.returncode != 0:
        raise RuntimeError(f"C compilation failed:\n{proc.stderr.decode()}\n--- source ---\n{src}")
      with open(out, "rb") as f: return f.read()


class CPUProgram:
  def __init__(self, name: str, lib: bytes):
    with tempfile.NamedTemporaryFile(prefix="tgfn-", suffix=".so") as f:
      f.write(lib)
      f.flush()
      self._lib = ctypes.CDLL(f.name)  # the mapping outlives the unlinked file
    self.fxn = getattr(self._lib, name)
    self.fxn.restype = None

  def __call__(self, *pointers: int) -> None:
    if self.fxn.argtypes is None: self.fxn.argtypes = [ctypes.c_void_p] * len(pointers)
    self.fxn(*pointers)


DEVICE = Compiled("CPU", HostAllocator(), CStyleRenderer(), CCompiler(), CPUProgram,
                  kernel_arg=lambda handle: handle.ctypes.data)
