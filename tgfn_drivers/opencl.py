"""OPENCL: kernels rendered as OpenCL C, built by the platform's compiler, run on its first device (PoCL on a
CPU: `apt-get install pocl-opencl-icd ocl-icd-libopencl1`). The binding is ctypes on libOpenCL: no Python
dependency. One context and one in-order queue: launches are queued and a copy out waits for them.

Exactness: `#pragma OPENCL FP_CONTRACT OFF` in every kernel and `-cl-fp32-correctly-rounded-divide-sqrt`,
so each op rounds as tgfn/uop/alu.py says (the float policy's reduction FMA is written as fma() by the
renderer). The transcendentals are the platform's (a few ulp), as on the CPU they are the C library's."""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import threading
from typing import Any, Iterable

import numpy as np

from tgfn.device import Allocator, Compiled, Compiler
from tgfn.renderer.cstyle import OpenCLRenderer, launch_sizes, local_sizes
from tgfn_drivers._scalars import scalar_arg_converter

BUILD_OPTIONS = b"-cl-fp32-correctly-rounded-divide-sqrt"
INSTALL_HINT = ("install an OpenCL runtime, e.g. PoCL for the CPU: `apt-get install pocl-opencl-icd "
                "ocl-icd-libopencl1` (then `clinfo` lists a device)")
_CL_DEVICE_TYPE_ALL, _CL_MEM_READ_WRITE = 0xFFFFFFFF, 1
_CL_PROGRAM_BINARY_SIZES, _CL_PROGRAM_BINARIES, _CL_PROGRAM_BUILD_LOG = 0x1165, 0x1166, 0x1183
_CL_DEVICE_NAME, _CL_DEVICE_VERSION, _CL_DRIVER_VERSION = 0x102B, 0x102F, 0x102D
_void_p, _size_t, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32


class OpenCLUnavailable(RuntimeError):
  """No OpenCL library, platform or device on this machine."""


class _Runtime:
  """The library, the first platform's first device, a context and an in-order queue."""
  def __init__(self) -> None:
    path = ctypes.util.find_library("OpenCL") or "libOpenCL.so.1"
    try:
      self.cl = cl = ctypes.CDLL(path)
    except OSError as e:
      raise OpenCLUnavailable(f"the OPENCL device needs libOpenCL ({e}); {INSTALL_HINT}") from e
    self._declare()
    count = ctypes.c_uint32()
    if cl.clGetPlatformIDs(0, None, ctypes.byref(count)) != 0 or count.value == 0:
      raise OpenCLUnavailable(f"the OPENCL device found no OpenCL platform; {INSTALL_HINT}")
    platforms = (_void_p * count.value)()
    self.check(cl.clGetPlatformIDs(count.value, platforms, None), "clGetPlatformIDs")
    for platform in platforms:
      device = _void_p()
      if cl.clGetDeviceIDs(platform, _CL_DEVICE_TYPE_ALL, 1, ctypes.byref(device), None) == 0: break
    else:
      raise OpenCLUnavailable(f"the OPENCL device found no device on {count.value} OpenCL platform(s); {INSTALL_HINT}")
    self.device = device.value
    err = _int()
    self.context = cl.clCreateContext(None, 1, ctypes.byref(_void_p(self.device)), None, None, ctypes.byref(err))
    self.check(err.value, "clCreateContext")
    self.queue = cl.clCreateCommandQueue(self.context, device, 0, ctypes.byref(err))
    self.check(err.value, "clCreateCommandQueue")
    self.identity = " | ".join(self.device_info(k) for k in (_CL_DEVICE_NAME, _CL_DEVICE_VERSION, _CL_DRIVER_VERSION))

  def _declare(self) -> None:
    cl, p = self.cl, ctypes.POINTER
    for name, restype, argtypes in [
        ("clGetPlatformIDs", _int, [ctypes.c_uint32, _void_p, p(ctypes.c_uint32)]),
        ("clGetDeviceIDs", _int, [_void_p, ctypes.c_uint64, ctypes.c_uint32, _void_p, p(ctypes.c_uint32)]),
        ("clGetDeviceInfo", _int, [_void_p, ctypes.c_uint32, _size_t, _void_p, p(_size_t)]),
        ("clCreateContext", _void_p, [_void_p, ctypes.c_uint32, _void_p, _void_p, _void_p, p(_int)]),
        ("clCreateCommandQueue", _void_p, [_void_p, _void_p, ctypes.c_uint64, p(_int)]),
        ("clCreateBuffer", _void_p, [_void_p, ctypes.c_uint64, _size_t, _void_p, p(_int)]),
        ("clReleaseMemObject", _int, [_void_p]),
        ("clEnqueueWriteBuffer", _int, [_void_p, _void_p, ctypes.c_uint32, _size_t, _size_t, _void_p, ctypes.c_uint32, _void_p, _void_p]),
        ("clEnqueueReadBuffer", _int, [_void_p, _void_p, ctypes.c_uint32, _size_t, _size_t, _void_p, ctypes.c_uint32, _void_p, _void_p]),
        ("clEnqueueCopyBuffer", _int, [_void_p, _void_p, _void_p, _size_t, _size_t, _size_t, ctypes.c_uint32, _void_p, _void_p]),
        ("clCreateProgramWithSource", _void_p, [_void_p, ctypes.c_uint32, p(ctypes.c_char_p), p(_size_t), p(_int)]),
        ("clCreateProgramWithBinary", _void_p, [_void_p, ctypes.c_uint32, _void_p, p(_size_t), p(ctypes.c_char_p), p(_int), p(_int)]),
        ("clBuildProgram", _int, [_void_p, ctypes.c_uint32, _void_p, ctypes.c_char_p, _void_p, _void_p]),
        ("clGetProgramBuildInfo", _int, [_void_p, _void_p, ctypes.c_uint32, _size_t, _void_p, p(_size_t)]),
        ("clGetProgramInfo", _int, [_void_p, ctypes.c_uint32, _size_t, _void_p, p(_size_t)]),
        ("clReleaseProgram", _int, [_void_p]),
        ("clCreateKernel", _void_p, [_void_p, ctypes.c_char_p, p(_int)]),
        ("clReleaseKernel", _int, [_void_p]),
        ("clSetKernelArg", _int, [_void_p, ctypes.c_uint32, _size_t, _void_p]),
        ("clEnqueueNDRangeKernel", _int, [_void_p, _void_p, ctypes.c_uint32, _void_p, p(_size_t), p(_size_t),
                                          ctypes.c_uint32, _void_p, _void_p]),
        ("clFinish", _int, [_void_p])]:
      fn = getattr(cl, name)
      fn.restype, fn.argtypes = restype, argtypes

  @staticmethod
  def check(err: int, what: str) -> None:
    if err != 0: raise RuntimeError(f"OpenCL {what} failed with error {err} (see CL/cl.h for the code)")

  def device_info(self, key: int) -> str:
    size = _size_t()
    self.check(self.cl.clGetDeviceInfo(self.device, key, 0, None, ctypes.byref(size)), "clGetDeviceInfo")
    out = ctypes.create_string_buffer(size.value)
    self.check(self.cl.clGetDeviceInfo(self.device, key, size.value, out, None), "clGetDeviceInfo")
    return out.value.decode(errors="replace")

  def build(self, program: int, what: str, source: str = "") -> None:
    err = self.cl.clBuildProgram(program, 1, ctypes.byref(_void_p(self.device)), BUILD_OPTIONS, None, None)
    if err == 0: return
    size = _size_t()
    self.cl.clGetProgramBuildInfo(program, self.device, _CL_PROGRAM_BUILD_LOG, 0, None, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    self.cl.clGetProgramBuildInfo(program, self.device, _CL_PROGRAM_BUILD_LOG, size.value, log, None)
    self.cl.clReleaseProgram(program)
    raise RuntimeError(f"OpenCL build of {what} failed (error {err}):\n{log.value.decode(errors='replace')}"
                       + (f"\n--- source ---\n{source}" if source else ""))


_runtime: list[_Runtime] = []
_runtime_lock = threading.Lock()


def runtime() -> _Runtime:
  """The OpenCL runtime of this process, started on first use; OpenCLUnavailable names what to install.
  One per process even when threads ask first at once: two would give two contexts, and buffers of one
  passed to kernels of the other."""
  if not _runtime:
    with _runtime_lock:
      if not _runtime: _runtime.append(_Runtime())
  return _runtime[0]


class CLAllocator(Allocator):
  """Device buffers (cl_mem handles). Writes are blocking; a read waits for the queued kernels before it;
  region copies are queued like kernels."""
  def alloc(self, nbytes: int) -> int:
    rt, err = runtime(), _int()
    mem = rt.cl.clCreateBuffer(rt.context, _CL_MEM_READ_WRITE, max(nbytes, 1), None, ctypes.byref(err))
    if err.value != 0: raise MemoryError(f"could not allocate {nbytes} bytes on the OpenCL device (error {err.value})")
    # held here: at interpreter exit module globals become None before the last buffers are freed
    self._release = rt.cl.clReleaseMemObject
    return mem

  def free(self, handle: int) -> None: self._release(handle)

  def copyin(self, handle: int, data: memoryview) -> None:
    if not data.nbytes: return
    host = np.frombuffer(data, np.uint8)
    rt = runtime()
    rt.check(rt.cl.clEnqueueWriteBuffer(rt.queue, handle, 1, 0, data.nbytes, host.ctypes.data, 0, None, None), "write")

  def copyout(self, handle: int, nbytes: int) -> bytes:
    out = ctypes.create_string_buffer(max(nbytes, 1))
    if nbytes:
      rt = runtime()
      rt.check(rt.cl.clEnqueueReadBuffer(rt.queue, handle, 1, 0, nbytes, out, 0, None, None), "read")
    return out.raw[:nbytes]

  def copy_region(self, dst: int, dst_offset: int, src: int, src_offset: int, nbytes: int) -> None:
    """Queued on the in-order queue: it runs after the kernels before it and before the ones after it."""
    if not nbytes: return
    rt = runtime()
    rt.check(rt.cl.clEnqueueCopyBuffer(rt.queue, src, dst, src_offset, dst_offset, nbytes, 0, None, None), "copy")

  def copy(self, dst: int, src: int, nbytes: int) -> None:
    """A whole buffer, on the device (Buffer.copy_from)."""
    self.copy_region(dst, 0, src, 0, nbytes)


class CLCompiler(Compiler):
  """OpenCL C (one kernel or several) -> the device's program binary, behind a header line with each
  kernel's launch grid."""
  @property
  def cachekey(self) -> str:  # type: ignore[override]
    return f"opencl {runtime().identity} {BUILD_OPTIONS.decode()}"

  def compile(self, src: str) -> bytes:
    rt, err = runtime(), _int()
    text = src.encode()
    program = rt.cl.clCreateProgramWithSource(rt.context, 1, ctypes.byref(ctypes.c_char_p(text)),
                                              ctypes.byref(_size_t(len(text))), ctypes.byref(err))
    rt.check(err.value, "clCreateProgramWithSource")
    rt.build(program, "a kernel", src)
    try:
      size = _size_t()
      rt.check(rt.cl.clGetProgramInfo(program, _CL_PROGRAM_BINARY_SIZES, ctypes.sizeof(size), ctypes.byref(size), None), "binary size")
      binary = ctypes.create_string_buffer(size.value)
      pointer = ctypes.c_char_p(ctypes.addressof(binary))
      rt.check(rt.cl.clGetProgramInfo(program, _CL_PROGRAM_BINARIES, ctypes.sizeof(pointer), ctypes.byref(pointer), None), "binaries")
    finally:
      rt.cl.clReleaseProgram(program)
    header = json.dumps({"launch": launch_sizes(src), "local": local_sizes(src)}).encode()
    return header + b"\n" + binary.raw


class _CLLibrary:
  """A built program (one kernel, or a batch of them), the launch grid of each of its kernels and the
  work-group size of those that state one."""
  def __init__(self, lib: bytes):
    header, binary = lib.split(b"\n", 1)
    meta = json.loads(header)
    self.launch = {name: tuple(sizes) for name, sizes in meta["launch"].items()}
    self.local = {name: tuple(sizes) for name, sizes in meta.get("local", {}).items()}
    self.rt = rt = runtime()
    err, status = _int(), _int()
    self.program = rt.cl.clCreateProgramWithBinary(rt.context, 1, ctypes.byref(_void_p(rt.device)),
                                                   ctypes.byref(_size_t(len(binary))),
                                                   ctypes.byref(ctypes.c_char_p(binary)), ctypes.byref(status), ctypes.byref(err))
    self.rt.check(err.value or status.value, "clCreateProgramWithBinary")
    rt.build(self.program, ", ".join(self.launch))

  def __del__(self) -> None:
    if getattr(self, "program", None): self.rt.cl.clReleaseProgram(self.program)


class CLProgram:
  """One kernel of a built program, launched over its grid in the work groups its source states (a LOCAL
  axis), else in the ones the platform picks."""
  def __init__(self, name: str, lib: bytes | _CLLibrary):
    self.library = library = lib if isinstance(lib, _CLLibrary) else _CLLibrary(lib)
    self.rt, err = library.rt, _int()
    self.global_size = (_size_t * 3)(*library.launch[name])
    self.local_size = (_size_t * 3)(*library.local[name]) if name in library.local else None
    self.kernel = self.rt.cl.clCreateKernel(library.program, name.encode(), ctypes.byref(err))
    self.rt.check(err.value, f"clCreateKernel({name})")
    # a cl_kernel's arguments are state shared by every caller: two threads setting them at once would
    # launch with a mix of both calls' buffers (OpenCL leaves clSetKernelArg unsynchronized)
    self.lock = threading.Lock()

  def __call__(self, *args: Any) -> None:
    """Buffers (cl_mem handles as c_void_p), then scalar parameters (ctypes values, from scalar_arg)."""
    cl = self.rt.cl
    with self.lock:
      for i, a in enumerate(args): self.rt.check(cl.clSetKernelArg(self.kernel, i, ctypes.sizeof(a), ctypes.byref(a)), f"argument {i}")
      if 0 in tuple(self.global_size): return
      self.rt.check(cl.clEnqueueNDRangeKernel(self.rt.queue, self.kernel, 3, None, self.global_size, self.local_size, 0, None, None),
                    "launch")

  def __del__(self) -> None:
    if getattr(self, "kernel", None): self.rt.cl.clReleaseKernel(self.kernel)


def build_many(kernels: Iterable[tuple[str, str]]) -> list[CLProgram]:
  """Several kernels (distinct names) built as one program: one compiler run for a jitted function."""
  kernels = list(kernels)  # the engine may pass a generator that does codegen as it goes
  library = _CLLibrary(_compiler.compile_cached("".join(src for _, src in kernels)))
  return [CLProgram(name, library) for name, _ in kernels]


# scalar parameters as the kernel declares them (tgfn/renderer/dialects.py: bool as uchar, halves as bits)
scalar_arg = scalar_arg_converter(ctypes.c_uint8, half_as_bits=True)


def synchronize() -> None:
  """Wait for every queued kernel (a copy out already does)."""
  rt = runtime()
  rt.check(rt.cl.clFinish(rt.queue), "clFinish")


def kernel_arg(handle: int) -> ctypes.c_void_p: return _void_p(handle)


_compiler = CLCompiler()
DEVICE = Compiled("OPENCL", CLAllocator(), OpenCLRenderer(), _compiler, CLProgram, build_many, scalar_arg=scalar_arg,
                  kernel_arg=kernel_arg, synchronize=synchronize)
