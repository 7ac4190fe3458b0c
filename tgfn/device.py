"""The device contract: what a driver in `tgfn_drivers/` provides, and the registry that finds it.

A driver module `tgfn_drivers/<name>.py` defines `DEVICE`, a `Compiled`:
  allocator  alloc(nbytes) / free(handle) / copyin(handle, bytes) / copyout(handle, nbytes) -> bytes /
             copy_region(dst, dst_offset, src, src_offset, nbytes): a device-side copy, in order with the
             kernels (needed where handles are not addresses, for the slices of lax loop bodies) /
             optional copy(dst, src, nbytes): a whole buffer, on the device (Buffer.copy_from; a lax loop's
             final carry); without it such copies go through the host
  renderer   turns a linearized kernel into source (tgfn.renderer.Renderer)
  compiler   source -> binary bytes; `compile_cached` keeps binaries on disk keyed by content hash
  runtime    Program class: Program(name, binary)(*buffer handles, *scalar parameters) runs the kernel
  build_many optional: [(name, source), ...] -> one program per kernel, compiled together (a batch: the
             kernels of a jitted function); None where kernels compile one at a time
  address_handles: whether handle + byte offset addresses a view (zero-copy slices in lax loop bodies;
             without it the engine stages each slice through a scratch buffer with copy_region)
  synchronize optional: waits for every queued kernel, on a device whose launches return before the
             kernel ends (OPENCL, CUDA, WEBGPU); None where a launch is synchronous (CPU, LLVM, PYTHON)
Drivers import this module and the renderers, never the front end. `Device.DEFAULT` comes from `DEV=`.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import os
import pkgutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from tgfn.dtype import DType
from tgfn.helpers import settings
from tgfn.package_check import require_regular_package


class Allocator:
  def alloc(self, nbytes: int) -> Any: raise NotImplementedError
  def free(self, handle: Any) -> None:
    """Release memory; the default leaves it to the garbage collector (e.g. NumPy-held memory)."""
  def copyin(self, handle: Any, data: memoryview) -> None: raise NotImplementedError
  def copyout(self, handle: Any, nbytes: int) -> bytes: raise NotImplementedError
  def copy_region(self, dst: Any, dst_offset: int, src: Any, src_offset: int, nbytes: int) -> None:
    """Copy bytes [src_offset, src_offset + nbytes) of `src` to `dst` at `dst_offset`, on the device, ordered
    after the kernels launched before it and before the ones launched after it."""
    raise NotImplementedError(f"{type(self).__name__} has no copy_region (device-side copies between buffers)")


class HostAllocator(Allocator):
  """Host memory held by NumPy (64-byte aligned, so vector loads are fast)."""
  def alloc(self, nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + nbytes]
  def copyin(self, handle: np.ndarray, data: memoryview) -> None: handle[:] = np.frombuffer(data, np.uint8)
  def copyout(self, handle: np.ndarray, nbytes: int) -> bytes: return handle.tobytes()
  def copy(self, dst: np.ndarray, src: np.ndarray, nbytes: int) -> None:
    """Host memory to host memory in one C-level copy (device instances of one host backend share it)."""
    np.copyto(dst[:nbytes], src[:nbytes])
  def copy_region(self, dst: np.ndarray, dst_offset: int, src: np.ndarray, src_offset: int, nbytes: int) -> None:
    np.copyto(dst[dst_offset:dst_offset + nbytes], src[src_offset:src_offset + nbytes])


def cache_dir() -> Path:
  """The on-disk cache folder (TGFN_CACHE_DIR, else ~/.cache/tgfn), created if needed; OSError if it cannot be."""
  path = Path(settings.TGFN_CACHE_DIR or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tgfn")
  path.mkdir(parents=True, exist_ok=True)
  return path


_warned: set[str] = set()


def warn_once(topic: str, message: str) -> None:
  """A RuntimeWarning the first time `topic` comes up in this process; later ones are silent."""
  if topic in _warned: return
  _warned.add(topic)
  warnings.warn(message, RuntimeWarning, stacklevel=3)


def write_atomic(path: Path, data: bytes) -> None:
  """Write to a temporary file in the same folder, then rename: readers never see a partial file."""
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
  try:
    with os.fdopen(fd, "wb") as f: f.write(data)
    os.replace(tmp, path)
  except BaseException:
    Path(tmp).unlink(missing_ok=True)
    raise


_CACHE_MAGIC = b"TGFN1"
_UNCACHED_HINT = ("kernels still compile and run, without the cache; set TGFN_CACHE_DIR to a writable folder to "
                  "cache them")


def _entry_path(kind: str, key: str) -> Optional[Path]:
  """Where the cache entry `key` of `kind` lives; None (after a warning) when the cache folder cannot be made."""
  try:
    return cache_dir() / kind / key[:2] / key
  except OSError as e:
    warn_once("cache", f"cannot create the kernel cache folder ({e}); {_UNCACHED_HINT}")
    return None


def cache_read(kind: str, key: str) -> Optional[bytes]:
  """The payload stored under `key`, or None when it is missing, unreadable or fails its hash check (a
  torn or corrupted write: it is rebuilt). TGFN_DISABLE_COMPILER_CACHE=1 makes every read a miss."""
  if settings.TGFN_DISABLE_COMPILER_CACHE or (path := _entry_path(kind, key)) is None: return None
  try:
    blob = path.read_bytes()  # an entry that is a folder or unreadable is a miss, like a missing one
  except OSError:
    return None
  magic, digest, payload = blob[:5], blob[5:37], blob[37:]
  return payload if magic == _CACHE_MAGIC and hashlib.sha256(payload).digest() == digest else None


def cache_write(kind: str, key: str, payload: bytes) -> None:
  """Store `payload` under `key` with its hash, atomically. A cache that cannot be written is a warning."""
  if settings.TGFN_DISABLE_COMPILER_CACHE or (path := _entry_path(kind, key)) is None: return
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, _CACHE_MAGIC + hashlib.sha256(payload).digest() + payload)
  except OSError as e:
    warn_once("cache", f"cannot write the kernel cache entry {path} ({e}); {_UNCACHED_HINT}")


class Compiler:
  """Source to binary. Subclasses set `cachekey` (compiler identity and flags) and implement compile;
  `compile_many` may compile several sources at once (in parallel processes)."""
  cachekey: str = ""

  def compile(self, src: str) -> bytes: raise NotImplementedError

  def compile_many(self, srcs: list[str]) -> list[bytes]: return [self.compile(src) for src in srcs]

  def compile_cached(self, src: str) -> bytes:
    """Compile, keeping the binary on disk under the hash of (cachekey, src). Each entry carries the
    hash of its payload; an entry that fails the check (a torn or corrupted write) is rebuilt. A cache
    that cannot be created, read or written is a warning, never an error: the binary is still returned."""
    return self.compile_many_cached([src])[0]

  def cached(self, src: str) -> Optional[bytes]:
    """The binary of `src` if the disk cache has it, else None (nothing is compiled)."""
    return cache_read("kernels", self._cache_key(src))

  def store(self, src: str, binary: bytes) -> None:
    """Keep `binary`, the build of `src`, in the disk cache."""
    cache_write("kernels", self._cache_key(src), binary)

  def _cache_key(self, src: str) -> str: return hashlib.sha256((self.cachekey + "\0" + src).encode()).hexdigest()

  def compile_many_cached(self, srcs: list[str]) -> list[bytes]:
    """`compile_cached` for several sources; the ones not on disk go to `compile_many` together."""
    keys = [self._cache_key(src) for src in srcs]
    binaries = [cache_read("kernels", key) for key in keys]
    missing = [i for i, b in enumerate(binaries) if b is None]
    for i, payload in zip(missing, self.compile_many([srcs[i] for i in missing]) if missing else []):
      binaries[i] = payload
      self.store(srcs[i], payload)
    return binaries  # type: ignore[return-value]


def _same(handle: Any) -> Any: return handle
def _value_as_is(value: Any, dtype: DType) -> Any: return value


@dataclass
class Compiled:
  name: str
  allocator: Allocator
  renderer: Any                          # tgfn.renderer.Renderer
  compiler: Compiler
  runtime: Callable[[str, bytes], Callable[..., None]]
  build_many: Optional[Callable[[list[tuple[str, str]]], list[Callable[..., None]]]] = None
  # how a Program receives a buffer: computed once per buffer, so launching a kernel converts nothing
  kernel_arg: Callable[[Any], Any] = _same
  # how a Program receives a scalar parameter's value (a PARAM of `dtype`), passed after the buffers
  scalar_arg: Callable[[Any, DType], Any] = _value_as_is
  synchronize: Optional[Callable[[], None]] = None
  # several kernels launched by one call: (function addresses, each one's argument slots, a bound method to
  # call once batches can be made) -> a batch with .slots, .run, .table, .count, .pack, .index, or None for
  # now (tgfn_drivers/cpu.py LaunchBatch; the jit replay uses it)
  batch_launcher: Optional[Callable[[list[int], list[tuple[int, ...]], Callable[[], None]], Any]] = None
  # waits until every kernel running a quick first build runs its optimized one (tiered compilation: CPU)
  wait_for_optimized: Optional[Callable[[], None]] = None
  # whether a handle is a memory address, so handle + byte offset is a view into the buffer (CPU, LLVM,
  # CUDA); an opaque handle (an OpenCL cl_mem, a WebGPU buffer) has no views, and the allocator's
  # copy_region stages slices instead
  address_handles: bool = False


DONATED_MESSAGE = ("this array was donated to a jitted function (donate_argnums) and its memory now holds "
                   "that function's result; use the result instead, or do not donate the argument")


class Buffer:
  """`size` elements of `dtype` on `device`, allocated on first use."""
  __slots__ = ("device", "size", "dtype", "_handle", "_arg", "_allocator", "deleted")

  def __init__(self, device: str, size: int, dtype: DType):
    self.device, self.size, self.dtype = device, size, dtype
    self._handle: Optional[Any] = None
    self._arg: Optional[Any] = None
    self._allocator: Optional[Allocator] = None  # set with the handle: who frees it
    self.deleted = False

  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize

  @property
  def handle(self) -> Any:
    if self._handle is None:
      if self.deleted: raise RuntimeError(DONATED_MESSAGE)
      self._allocator = Device[self.device].allocator
      self._handle = self._allocator.alloc(self.nbytes)
    return self._handle

  @property
  def arg(self) -> Any:
    """This buffer as its device's kernels take it (e.g. a raw pointer on the CPU)."""
    if self._arg is None: self._arg = Device[self.device].kernel_arg(self.handle)
    return self._arg

  def __del__(self) -> None:
    if self._handle is not None: self._allocator.free(self._handle)

  @classmethod
  def allocated(cls, device: str, size: int, dtype: DType, allocator: Allocator,
                kernel_arg: Callable[[Any], Any]) -> Buffer:
    """A buffer allocated now through an allocator the caller already looked up (the jit replay path)."""
    buf = cls.__new__(cls)
    buf.device, buf.size, buf.dtype, buf._allocator, buf.deleted = device, size, dtype, allocator, False
    buf._handle = allocator.alloc(size * dtype.itemsize)
    buf._arg = kernel_arg(buf._handle)
    return buf

  def donate(self) -> Buffer:
    """Hand this memory to a new Buffer (a jitted function's output) and mark this one deleted."""
    heir = Buffer(self.device, self.size, self.dtype)
    heir._handle, heir._arg, heir._allocator = self.handle, self.arg, self._allocator
    self._handle = self._arg = None
    self.deleted = True
    return heir

  def copyin(self, data: np.ndarray) -> Buffer:
    flat = np.ascontiguousarray(data).reshape(-1)  # 1-D: memoryview cannot cast a view with a 0 in its shape
    Device[self.device].allocator.copyin(self.handle, memoryview(flat).cast("B"))
    return self

  def copy_from(self, src: Buffer) -> Buffer:
    """Copy `src` (same size and dtype) into this buffer: directly when both live in memory one allocator
    can copy between (CPU instances, one OpenCL, CUDA or WebGPU device), else through the host."""
    if (src.size, src.dtype) != (self.size, self.dtype):
      raise ValueError(f"copy between buffers of different shapes: {src} into {self}")
    mine, theirs = Device[self.device].allocator, Device[src.device].allocator
    if mine is theirs and hasattr(mine, "copy"): mine.copy(self.handle, src.handle, self.nbytes)
    else: self.copyin(src.numpy())
    return self

  def numpy(self) -> np.ndarray:
    """A fresh host copy of the contents, as a 1-D NumPy array (bfloat16 as its uint16 bits)."""
    return np.frombuffer(Device[self.device].allocator.copyout(self.handle, self.nbytes), self.dtype.np).copy()

  def __repr__(self) -> str: return f"<Buffer {self.device} {self.size} x {self.dtype.name}>"


@functools.cache
def _available_drivers() -> list[str]:
  import tgfn_drivers
  require_regular_package(tgfn_drivers, str(Path(__file__).resolve().parent.parent / "tgfn_drivers"))
  return sorted(m.name.upper() for m in pkgutil.iter_modules(tgfn_drivers.__path__) if not m.name.startswith("_"))


def instance_count(backend: str) -> int:
  """How many instances of `backend` this process has: TGFN_<BACKEND>_DEVICES (default 1), as JAX's
  --xla_force_host_platform_device_count makes several CPU devices of one host."""
  raw = os.environ.get(f"TGFN_{backend}_DEVICES", "1") or "1"
  try:
    count = int(raw)
  except ValueError:
    raise ValueError(f"TGFN_{backend}_DEVICES must be a positive integer, got {raw!r}") from None
  if count < 1: raise ValueError(f"TGFN_{backend}_DEVICES must be a positive integer, got {raw!r}")
  return count


class _DeviceRegistry:
  """`Device["CPU"]` loads `tgfn_drivers.cpu` once and returns its `DEVICE`.

  Device names are "<BACKEND>" or "<BACKEND>:<n>". Instance 0 is the plain backend name ("CPU:0" is
  "CPU"); instances 1..TGFN_<BACKEND>_DEVICES-1 keep their number. All instances of a backend share its
  driver (allocator, compiler, compiled kernels); each runs its kernels on a queue of its own
  (tgfn/engine/queues.py)."""
  def __init__(self) -> None: self._loaded: dict[str, Compiled] = {}

  def canonicalize(self, name: str) -> str:
    if not isinstance(name, str): name = getattr(name, "name", str(name))
    base, _, index = name.partition(":")
    base = base.upper()
    if base not in _available_drivers():
      raise ValueError(f"unknown device {name!r}; available devices: {', '.join(_available_drivers())}")
    if not index or index == "0": return base
    if not index.isdigit(): raise ValueError(f"device {name!r}: the instance after ':' must be a number")
    if int(index) >= (count := instance_count(base)):
      raise ValueError(f"device {name!r} does not exist: this process has {count} {base} device(s), "
                       f"{base}:0..{base}:{count - 1} (set TGFN_{base}_DEVICES before starting to have more)")
    return f"{base}:{int(index)}"

  @staticmethod
  def backend(name: str) -> str:
    """The backend of a canonical device name: "CPU:1" -> "CPU"."""
    return name.partition(":")[0]

  def __getitem__(self, name: str) -> Compiled:
    if (hit := self._loaded.get(name)) is not None: return hit  # the common case: a canonical name
    name = self.canonicalize(name)
    base = self.backend(name)
    if base not in self._loaded:
      self._loaded[base] = importlib.import_module(f"tgfn_drivers.{base.lower()}").DEVICE
    self._loaded[name] = self._loaded[base]  # an instance shares its backend's driver
    return self._loaded[name]

  @property
  def DEFAULT(self) -> str: return self.canonicalize(settings.DEV)


Device = _DeviceRegistry()


def has_64bit(device: str) -> bool:
  """Whether kernels on `device` hold 64-bit numbers (float64, int64, uint64): every backend but WEBGPU."""
  return Device[device].renderer.has_64bit


def wait_for_optimized_kernels() -> None:
  """Block until every kernel compiled so far runs its optimized build. The CPU device builds a large batch
  of new kernels quickly first and swaps in the optimized build from a background compile (docs/jit.md,
  "Tiered compilation"); time steady-state speed after this call."""
  for driver in {id(d): d for d in Device._loaded.values()}.values():
    if driver.wait_for_optimized is not None: driver.wait_for_optimized()
