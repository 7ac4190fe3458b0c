"""CPU: kernels rendered as C, compiled by the system C compiler into a shared object, called via ctypes."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from typing import Optional

import numpy as np

from tgfn.device import Allocator, Compiled, Compiler
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
    self._target: Optional[str] = None

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    # -march=native means a different instruction set on another CPU: key on what it expands to
    return f"{self._cc()} {' '.join(CFLAGS)} target:{hashlib.sha256(self.target_macros().encode()).hexdigest()}"

  def target_macros(self) -> str:
    """The compiler's predefined macros for -march=native: which instruction set kernels are built for."""
    if self._target is None:
      proc = subprocess.run([self._cc(), "-march=native", "-dM", "-E", "-x", "c", "-"], input=b"", capture_output=True)
      self._target = proc.stdout.decode()
    return self._target

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


_libc = ctypes.CDLL(None)
_libc.aligned_alloc.restype, _libc.aligned_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.restype, _libc.free.argtypes = None, [ctypes.c_void_p]


class MallocAllocator(Allocator):
  """Host memory from the C allocator, 64-byte aligned; the handle is the raw address kernels take.
  Freed blocks up to 1 MiB are kept in per-size free lists (64 MiB at most), because a jitted call
  allocates its outputs every time and reusing a block is much cheaper than asking C for one."""
  POOL_LIMIT, POOLED_BLOCK = 64 << 20, 1 << 20

  def __init__(self) -> None:
    self._free: dict[int, list[int]] = {}
    self._size: dict[int, int] = {}
    self._pooled_bytes = 0

  def alloc(self, nbytes: int) -> int:
    size = max(64, (nbytes + 63) // 64 * 64)
    blocks = self._free.get(size)
    if blocks:
      self._pooled_bytes -= size
      return blocks.pop()
    ptr = _libc.aligned_alloc(64, size)
    if not ptr: raise MemoryError(f"could not allocate {nbytes} bytes on the CPU")
    self._size[ptr] = size
    return ptr

  def free(self, handle: int) -> None:
    size = self._size[handle]
    if size <= self.POOLED_BLOCK and self._pooled_bytes + size <= self.POOL_LIMIT:
      self._free.setdefault(size, []).append(handle)
      self._pooled_bytes += size
    else:
      del self._size[handle]
      _libc.free(handle)
  def copyin(self, handle: int, data: memoryview) -> None:
    if data.nbytes: ctypes.memmove(handle, np.frombuffer(data, np.uint8).ctypes.data, data.nbytes)
  def copyout(self, handle: int, nbytes: int) -> bytes: return ctypes.string_at(handle, nbytes)


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


class NativeCRenderer(CStyleRenderer):
  """C for this machine: vector width and register count read from what -march=native enables."""
  def __init__(self, compiler: CCompiler):
    self.compiler = compiler

  @functools.cached_property
  def vector_bytes(self) -> int:  # type: ignore[override]
    macros = self.compiler.target_macros()
    return 64 if "__AVX512F__" in macros else 32 if "__AVX__" in macros else 16

  @functools.cached_property
  def registers(self) -> int:  # type: ignore[override]
    macros = self.compiler.target_macros()
    return 32 if "__AVX512F__" in macros or "__aarch64__" in macros else 16


_compiler = CCompiler()
DEVICE = Compiled("CPU", MallocAllocator(), NativeCRenderer(_compiler), _compiler, CPUProgram)
