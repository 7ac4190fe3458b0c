"""CPU: kernels rendered as C, compiled by the system C compiler into a shared object, called via ctypes."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading

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
    # Threads share the pool. The locked sections create no Python container, so no garbage collection
    # (and no Buffer.__del__ calling free) can start inside one; the lock need not be reentrant.
    self._lock = threading.Lock()

  def alloc(self, nbytes: int) -> int:
    size = max(64, (nbytes + 63) // 64 * 64)
    if self._free.get(size):
      self._lock.acquire()
      if blocks := self._free[size]:  # still there: another thread may have taken the last one
        self._pooled_bytes -= size
        ptr = blocks.pop()
        self._lock.release()
        return ptr
      self._lock.release()
    ptr = _libc.aligned_alloc(64, size)
    if not ptr: raise MemoryError(f"could not allocate {nbytes} bytes on the CPU")
    self._size[ptr] = size  # (one dict store: atomic)
    return ptr

  def free(self, handle: int) -> None:
    size = self._size[handle]
    if size <= self.POOLED_BLOCK:
      blocks = self._free.get(size) or self._free.setdefault(size, [])
      self._lock.acquire()
      if self._pooled_bytes + size <= self.POOL_LIMIT:
        blocks.append(handle)
        self._pooled_bytes += size
        self._lock.release()
        return
      self._lock.release()
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


DEVICE = Compiled("CPU", MallocAllocator(), CStyleRenderer(), CCompiler(), CPUProgram)
