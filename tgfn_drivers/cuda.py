"""CUDA: kernels rendered as CUDA C, compiled to PTX by NVRTC and run through the CUDA driver API, both over
ctypes. NVRTC comes from its PyPI wheel (`pip install nvidia-cuda-nvrtc-cu12`, the `cuda` extra) or the CUDA
toolkit; the driver (libcuda.so.1) comes with the NVIDIA GPU driver. Without a GPU the renderer and NVRTC
still work, so kernels can be compiled to PTX anywhere (tests/drivers/test_cuda.py does).

Exactness: `--fmad=false` (no contraction of a*b+c; the float policy's reduction FMA is written as fmaf() by
the renderer), IEEE division and square root (NVRTC's default without --use_fast_math)."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from tgfn.device import Allocator, Compiled, Compiler
from tgfn.renderer.cstyle import CUDARenderer, launch_sizes, local_sizes
from tgfn_drivers._scalars import scalar_arg_converter

NVRTC_HINT = "install NVRTC: `pip install nvidia-cuda-nvrtc-cu12` (or `pip install 'tgfn[cuda]'`), or the CUDA toolkit"
DRIVER_HINT = "the CUDA device needs an NVIDIA GPU and its driver (libcuda.so.1); DEV=CPU or DEV=OPENCL run without one"
DEFAULT_ARCH = "compute_75"  # for PTX made without a GPU to ask: Turing, what NVRTC 12 and 13 both accept
BLOCK = 128  # threads per block along the innermost axis
_p, _size_t, _void_p = ctypes.POINTER, ctypes.c_size_t, ctypes.c_void_p


class CUDAUnavailable(RuntimeError):
  """No NVRTC library, or no CUDA driver or GPU, on this machine."""


def _nvrtc_candidates() -> list[str]:
  found = []
  try:
    import nvidia.cuda_nvrtc as wheel  # the PyPI wheel: a namespace package holding lib/libnvrtc.so.*
    for root in wheel.__path__: found += sorted(str(p) for p in Path(root, "lib").glob("libnvrtc.so*"))
  except ImportError:
    pass
  return found + [name for name in (ctypes.util.find_library("nvrtc"), "libnvrtc.so") if name]


@functools.cache
def nvrtc() -> ctypes.CDLL:
  """The NVRTC library (the wheel's first, else the system's); CUDAUnavailable says what to install."""
  errors = []
  for candidate in _nvrtc_candidates():
    try:
      lib = ctypes.CDLL(candidate)
      break
    except OSError as e:
      errors.append(str(e))
  else:
    raise CUDAUnavailable(f"NVRTC was not found ({'; '.join(errors) or 'no libnvrtc'}); {NVRTC_HINT}")
  for name, argtypes in [("nvrtcCreateProgram", [_p(_void_p), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, _void_p, _void_p]),
                         ("nvrtcCompileProgram", [_void_p, ctypes.c_int, _p(ctypes.c_char_p)]),
                         ("nvrtcGetProgramLogSize", [_void_p, _p(_size_t)]), ("nvrtcGetProgramLog", [_void_p, ctypes.c_char_p]),
                         ("nvrtcGetPTXSize", [_void_p, _p(_size_t)]), ("nvrtcGetPTX", [_void_p, ctypes.c_char_p]),
                         ("nvrtcDestroyProgram", [_p(_void_p)]), ("nvrtcVersion", [_p(ctypes.c_int), _p(ctypes.c_int)])]:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = ctypes.c_int, argtypes
  return lib


def nvrtc_version() -> str:
  major, minor = ctypes.c_int(), ctypes.c_int()
  nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
  return f"{major.value}.{minor.value}"


class _Driver:
  """libcuda, the first GPU and its primary context."""
  def __init__(self) -> None:
    try:
      self.cu = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
    except OSError as e:
      raise CUDAUnavailable(f"{DRIVER_HINT} ({e})") from e
    count = ctypes.c_int()
    if self.cu.cuInit(0) != 0 or self.cu.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
      raise CUDAUnavailable(f"{DRIVER_HINT}: the driver found no GPU")
    self.device, self.context = ctypes.c_int(), _void_p()
    self.check(self.cu.cuDeviceGet(ctypes.byref(self.device), 0), "cuDeviceGet")
    self.check(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), self.device), "cuDevicePrimaryCtxRetain")
    self.current()
    major, minor = ctypes.c_int(), ctypes.c_int()
    self.check(self.cu.cuDeviceGetAttribute(ctypes.byref(major), 75, self.device), "compute capability")  # ..._MAJOR
    self.check(self.cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, self.device), "compute capability")  # ..._MINOR
    self.arch = f"compute_{major.value}{minor.value}"
    for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuModuleLoadData",
                 "cuModuleGetFunction", "cuModuleUnload", "cuLaunchKernel", "cuCtxSynchronize", "cuCtxSetCurrent"):
      getattr(self.cu, name).restype = ctypes.c_int
    self.cu.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, _void_p, _size_t]
    self.cu.cuMemcpyDtoH_v2.argtypes = [_void_p, ctypes.c_uint64, _size_t]
    self.cu.cuMemcpyDtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, _size_t]
    self.cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]

  def current(self) -> None:
    """Make the context current in this thread (a CUDA context is bound per thread)."""
    self.check(self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

  @staticmethod
  def check(err: int, what: str) -> None:
    if err != 0: raise RuntimeError(f"CUDA {what} failed with error {err} (see cuda.h, CUresult)")


@functools.cache
def driver() -> _Driver:
  return _Driver()


@functools.cache
def target_arch() -> str:
  """The GPU's compute capability where there is one, else DEFAULT_ARCH."""
  try:
    return driver().arch
  except CUDAUnavailable:
    return DEFAULT_ARCH


class NVRTCCompiler(Compiler):
  """CUDA C -> PTX for the GPU's architecture (DEFAULT_ARCH without a GPU), behind a header line with the
  kernel's launch grid."""
  def options(self) -> list[bytes]: return [f"--gpu-architecture={target_arch()}".encode(), b"--fmad=false"]

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    return f"nvrtc {nvrtc_version()} {b' '.join(self.options()).decode()}"

  def compile(self, src: str) -> bytes:
    lib, program = nvrtc(), _void_p()
    _check_nvrtc(lib.nvrtcCreateProgram(ctypes.byref(program), src.encode(), b"kernel.cu", 0, None, None), "create")
    try:
      options = self.options()
      err = lib.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
      if err != 0:
        size = _size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(program, log)
        raise RuntimeError(f"NVRTC compilation failed (error {err}):\n{log.value.decode(errors='replace')}\n--- source ---\n{src}")
      size = _size_t()
      _check_nvrtc(lib.nvrtcGetPTXSize(program, ctypes.byref(size)), "PTX size")
      ptx = ctypes.create_string_buffer(size.value)
      _check_nvrtc(lib.nvrtcGetPTX(program, ptx), "PTX")
    finally:
      lib.nvrtcDestroyProgram(ctypes.byref(program))
    header = {"launch": launch_sizes(src), "local": local_sizes(src)}
    return json.dumps(header).encode() + b"\n" + ptx.raw.rstrip(b"\0") + b"\0"


def _check_nvrtc(err: int, what: str) -> None:
  if err != 0: raise RuntimeError(f"NVRTC {what} failed with error {err}")


class CUDAAllocator(Allocator):
  """Device memory (CUdeviceptr ints). The copies are synchronous: a copy out waits for the kernels before it."""
  def alloc(self, nbytes: int) -> int:
    drv, ptr = driver(), ctypes.c_uint64()
    drv.current()
    if drv.cu.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)) != 0: raise MemoryError(f"could not allocate {nbytes} bytes on the GPU")
    self._free = drv.cu.cuMemFree_v2  # held here: module globals are None at interpreter exit
    return ptr.value

  def free(self, handle: int) -> None: self._free(handle)

  def copyin(self, handle: int, data: memoryview) -> None:
    if not data.nbytes: return
    drv = driver()
    drv.current()
    drv.check(drv.cu.cuMemcpyHtoD_v2(handle, np.frombuffer(data, np.uint8).ctypes.data, data.nbytes), "copy in")

  def copyout(self, handle: int, nbytes: int) -> bytes:
    out = ctypes.create_string_buffer(max(nbytes, 1))
    if nbytes:
      drv = driver()
      drv.current()
      drv.check(drv.cu.cuMemcpyDtoH_v2(out, handle, nbytes), "copy out")
    return out.raw[:nbytes]

  def copy(self, dst: int, src: int, nbytes: int) -> None:
    """A whole buffer, device to device (Buffer.copy_from), in order with the kernels on the default stream."""
    if not nbytes: return
    drv = driver()
    drv.current()
    drv.check(drv.cu.cuMemcpyDtoD_v2(dst, src, nbytes), "device copy")


class CUDAProgram:
  """One kernel of a loaded PTX module, launched over its grid in the blocks its source states (a LOCAL
  axis: the grid's sizes are whole blocks), else in blocks of BLOCK threads along x."""
  def __init__(self, name: str, lib: bytes):
    header, ptx = lib.split(b"\n", 1)
    meta = json.loads(header)
    n0, n1, n2 = meta["launch"][name]
    self.empty = 0 in (n0, n1, n2)
    if name in meta.get("local", {}):
      self.block = tuple(meta["local"][name])
      self.grid = tuple(n // b for n, b in zip((n0, n1, n2), self.block))
    else:
      block = max(1, min(n0, BLOCK))
      self.grid, self.block = ((n0 + block - 1) // block, n1, n2), (block, 1, 1)
    self.drv = drv = driver()
    drv.current()
    self.module, self.function = _void_p(), _void_p()
    drv.check(drv.cu.cuModuleLoadData(ctypes.byref(self.module), ptx), "cuModuleLoadData")
    drv.check(drv.cu.cuModuleGetFunction(ctypes.byref(self.function), self.module, name.encode()), f"cuModuleGetFunction({name})")

  def __call__(self, *args: Any) -> None:
    """Buffers (device pointers as c_uint64), then scalar parameters (ctypes values, from scalar_arg)."""
    if self.empty: return
    self.drv.current()
    params = (_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), _void_p) for a in args])
    self.drv.check(self.drv.cu.cuLaunchKernel(self.function, *self.grid, *self.block, 0, None, params, None), "launch")

  def __del__(self) -> None:
    if getattr(self, "module", None) and self.module.value: self.drv.cu.cuModuleUnload(self.module)


# scalar parameters as the kernel declares them (tgfn/renderer/dialects.py: halves as their bits)
scalar_arg = scalar_arg_converter(ctypes.c_bool, half_as_bits=True)


def synchronize() -> None:
  """Wait for every launched kernel (a copy out already does)."""
  drv = driver()
  drv.current()
  drv.check(drv.cu.cuCtxSynchronize(), "cuCtxSynchronize")


DEVICE = Compiled("CUDA", CUDAAllocator(), CUDARenderer(), NVRTCCompiler(), CUDAProgram, scalar_arg=scalar_arg,
                  kernel_arg=ctypes.c_uint64, synchronize=synchronize, address_handles=True)
