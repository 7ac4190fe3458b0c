"""CPU: kernels rendered as C, compiled by the system C compiler into a shared object, called via ctypes."""
from __future__ import annotations

import _ctypes
import ctypes
import functools
import hashlib
import itertools
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from tgfn.codegen.decompositions import transcendental_switch
from tgfn.codegen.math_functions import FUNCTION_OPS, function_source
from tgfn.device import Allocator, Compiled, Compiler, cache_dir, cache_read, cache_write, warn_once
from tgfn.helpers import settings
from tgfn.renderer.cstyle import CStyleRenderer
from tgfn.scratch import scratch_dir
from tgfn_drivers._scalars import scalar_arg_converter
from tgfn.dtype import DType, dtypes
from tgfn.uop.ops import Ops, UOp
from tgfn_drivers import _cpu_threads, _cpu_tiers
from tgfn_drivers._cpu_threads import load_cached_pool_in_background, when_pool_ready
from tgfn_drivers._cpu_units import CompileJob, compile_units

# -fwrapv: signed overflow wraps (tgfn's integer semantics); no -ffast-math: NaN and inf must behave.
# -ffp-contract=off: GCC's default fuses a*b+c into one FMA (one rounding instead of two), which breaks
# agreement with the op-by-op rounding of tgfn/uop/alu.py and the PYTHON reference.
CFLAGS = ["-O2", "-march=native", "-fwrapv", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC"]
# Three optimization levels, each marked in the kernel's source (so it is part of the source and its cache key):
# - SIMPLE_OPT for vector code without gated loads (every tiled contraction, whatever its size, and the copies,
#   maps and reductions tgfn vectorized) and for a few thousand operations of anything: gcc's -Og and two passes
#   tgfn's code needs. -Og skips the loop optimizer and most SSA cleanups, which find little in code tgfn has
#   already tiled, vectorized, hoisted and folded. Each of the MLP step's kernels, timed against its -O1 build
#   (interleaved), ran as fast (its 22 small kernels 3.97 against 4.10 ms in all, its four large contractions
#   within +-3%, as did 1024^2 and 2048^2 matmuls) in half the gcc time (the whole step: 152 against 307 ms).
#   -fexpensive-optimizations puts `vzeroupper` before calls into libm (without it a kernel calling exp2f per
#   lane ran 20x slower on AVX2); -fmove-loop-invariants hoists what a kernel's loops recompute (the packing
#   kernels ran 1.5x slower without it).
# - LIGHT_OPT for the rest below -O2's thresholds: scalar loops and gated (padded) loads, which -Og leaves as
#   branches and unclamped index arithmetic (the conv step's padded kernels ran 1.4-3.5x slower at -Og):
#   -O1, -fexpensive-optimizations, -ftree-vrp (drops index clamps it can prove), without gcc's conditional
#   constant propagation and induction-variable passes, most of -O1's time on code whose constants codegen has
#   folded and whose index arithmetic it has laid out (the MLP step's C in 0.6x the time, as fast).
# - -O2 (no mark) for long float code (FULL_OPT_FLOPS float ops besides the multiply-accumulates: exp, log
#   polynomials over 4M elements ran 7% faster) and integer arithmetic on values (FULL_OPT_INTEGERS: random bits,
#   hashing: scalar code that -O2 vectorizes itself; the threefry bits of 10^6 uniforms took 1.15 ms at -O2, 8.1
#   at -O1, 18.6 at -Og).
SIMPLE_OPT = _cpu_tiers.QUICK_OPT
LIGHT_OPT = ["-O1", "-fexpensive-optimizations", "-ftree-vrp", "-fno-tree-ccp", "-fno-ivopts"]
# (gcc's pass switches: clang rejects them, and takes -Og as -O1)
GCC_ONLY_FLAGS = ("-fmove-loop-invariants", "-fno-tree-ccp", "-fno-ivopts")
SIMPLE_MAX_SCALAR_OPS = 1 << 18
FULL_OPT_FLOPS = 1 << 24
FULL_OPT_INTEGERS = 1 << 16
SIMPLE_MARK = "/* tgfn: simple code */\n"
LIGHT_MARK = "/* tgfn: light optimization */\n"


def compiler_flags(src: str) -> list[str]:
  """The flags `src` is compiled with: CFLAGS, with SIMPLE_OPT for -O2 where the source starts with SIMPLE_MARK
  or is a tiered batch's quick build (tgfn_drivers/_cpu_tiers.py), LIGHT_OPT where it starts with LIGHT_MARK."""
  if src.startswith(SIMPLE_MARK) or _cpu_tiers.is_quick(src): return [*SIMPLE_OPT, *CFLAGS[1:]]
  return [*LIGHT_OPT, *CFLAGS[1:]] if src.startswith(LIGHT_MARK) else CFLAGS


def optimization_level(src: str) -> str:
  """The mark that sets `src`'s flags ('' for the full -O2): a C unit holds kernels of one level."""
  return next((mark for mark in (SIMPLE_MARK, LIGHT_MARK) if src.startswith(mark)), "")


def find_c_compiler() -> list[str]:
  """The compiler command: $CC (which may carry arguments, e.g. `ccache gcc`) if set, else cc, gcc or clang."""
  if (chosen := os.environ.get("CC")) is not None and chosen.strip():
    argv = shlex.split(chosen)
    if shutil.which(argv[0]) is None:  # an explicit choice is used or reported, never silently replaced
      raise RuntimeError(f"the CPU device needs a C compiler, but CC={chosen!r} names no executable file "
                         f"(not found on PATH). Point CC= at a C compiler, unset CC to use cc, gcc or clang, "
                         f"or run on the reference interpreter with DEV=PYTHON.")
    return argv
  for candidate in ("cc", "gcc", "clang"):
    if shutil.which(candidate): return [candidate]
  raise RuntimeError("the CPU device needs a C compiler, and none was found (tried $CC, cc, gcc, clang). "
                     "Install one (e.g. `apt-get install gcc`), point CC= at it, or run on the "
                     "reference interpreter with DEV=PYTHON.")


def _scratch_roots() -> list[Path]:
  """Where to compile and load, in order of preference: under TMPDIR, else under the cache folder."""
  user = os.getuid() if hasattr(os, "getuid") else 0
  roots = [Path(os.environ.get("TMPDIR") or tempfile.gettempdir()) / f"tgfn-{user}"]
  try:
    roots.append(cache_dir() / "scratch")
  except OSError:
    pass
  return roots


# a fresh file name for every binary: dlopen returns the library already loaded under the same name
_file_numbers = itertools.count()


def _fresh_library_path(roots: list[Path]) -> Path:
  errors = []
  for root in roots:
    try:
      return scratch_dir(root) / f"kernel-{next(_file_numbers)}.so"
    except OSError as e:
      errors.append(f"{root}: {e}")
  raise RuntimeError(f"no folder to compile kernels in: {'; '.join(errors)}. "
                     f"Set TMPDIR or TGFN_CACHE_DIR to a writable folder.")


class CompilerRuns:
  """How many compiler processes this process has started (kernels, batches, the worker pool, the
  target query): tests check that a batch of kernels starts one, and a warm cache none."""
  count = 0
  _lock = threading.Lock()

  @classmethod
  def add(cls) -> None:
    with cls._lock: cls.count += 1


@functools.cache
def cpu_model() -> str:
  """The CPU's model name, as /proc/cpuinfo spells it (else what the platform module says)."""
  try:
    with open("/proc/cpuinfo") as f: info = f.read()
  except OSError:
    info = ""
  for field in ("model name", "Hardware", "cpu model", "uarch", "CPU part"):  # x86, then other architectures
    for line in info.splitlines():
      if line.split(":")[0].strip() == field and ":" in line: return line.split(":", 1)[1].strip()
  import platform
  return platform.processor() or platform.machine() or "unknown"


@functools.cache
def _cpu_features() -> str:
  """The first CPU's feature list from /proc/cpuinfo ("flags" on x86, "Features" on ARM), or ''."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.split(":")[0].strip() in ("flags", "Features"): return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return ""


def _executable_identity(argv: list[str]) -> str:
  """Each executable the compiler command names, resolved, with its size and modification time."""
  out = []
  for word in argv:
    if (found := shutil.which(word)) is not None:
      real = os.path.realpath(found)
      st = os.stat(real)
      out.append(f"{real}:{st.st_size}:{st.st_mtime_ns}")
  return " ".join(out)


# compiler command -> its -march=native macros, once per process (the pool's compiler shares it)
_target_macros: dict[tuple[str, ...], str] = {}


# A kernel library links only libgcc's helpers (float16 conversions): its other outside symbols (libm's
# exp2f, log2f, ...) resolve when it is loaded, against the process, which has libm in its global scope
# (CPython links it; _load_libm makes sure). Not reading libc's and libm's link scripts and libraries saves
# ~7 of the ~30 ms of CPU a compiler process costs before any code (the MLP step's first call runs four).
KERNEL_LINK = ("-nostdlib", "-lgcc")


def _load_libm() -> None:
  """libm in the process's global symbol scope, where kernel libraries find exp2f, sinf, ... (an
  interpreter built without it, or one that loaded it privately, would leave them unresolved)."""
  try:
    ctypes.CDLL("libm.so.6", mode=ctypes.RTLD_GLOBAL)  # glibc's name: no search (find_library runs processes)
  except OSError:
    from ctypes.util import find_library
    if (name := find_library("m")) is not None:  # elsewhere; none where libc holds libm (macOS, musl)
      try:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
      except OSError:
        pass


_load_libm()


class CCompiler(Compiler):
  extra_flags: tuple[str, ...] = ()  # e.g. -pthread for the worker pool
  link_flags: tuple[str, ...] = KERNEL_LINK

  def __init__(self) -> None:
    self.cc: Optional[list[str]] = None

  @property
  def cachekey(self) -> str:  # type: ignore[override]
    # -march=native means a different instruction set on another CPU: key on the CPU and what it expands to
    target = hashlib.sha256(self.target_macros().encode()).hexdigest()
    return (f"{' '.join(self._cc())} {' '.join([*CFLAGS, *self.extra_flags, *self.link_flags])} simple:{' '.join(SIMPLE_OPT)} light:{' '.join(LIGHT_OPT)} "
            f"cpu:{cpu_model()} target:{target}")

  def target_macros(self) -> str:
    """The compiler's predefined macros for -march=native: which instruction set kernels are built for.
    Asking the compiler takes a process (tens of ms), so the answer is kept on disk, keyed by the compiler
    executables (path, size, time) and this CPU's model and feature flags."""
    cc = tuple(self._cc())
    if (known := _target_macros.get(cc)) is not None: return known
    key = hashlib.sha256("\0".join([*cc, _executable_identity(list(cc)), cpu_model(), _cpu_features()]).encode()).hexdigest()
    if (stored := cache_read("targets", key)) is not None: macros = stored.decode()
    else:
      CompilerRuns.add()
      proc = subprocess.run([*cc, "-march=native", "-dM", "-E", "-x", "c", "-"], input=b"", capture_output=True)
      macros = proc.stdout.decode()
      if proc.returncode == 0 and macros: cache_write("targets", key, macros.encode())
    return _target_macros.setdefault(cc, macros)

  @property
  def is_clang(self) -> bool:
    """Whether the compiler is clang (its predefined macros say so), which takes its own flags and builtins."""
    return "__clang__" in self.target_macros()

  def _cc(self) -> list[str]:
    if self.cc is None: self.cc = find_c_compiler()
    return self.cc

  def compile_many(self, srcs: list[str]) -> list[bytes]:
    """One compiler process per source, all at once; all stopped if one fails or the wait is interrupted."""
    jobs: list[CompileJob] = []
    try:
      jobs.extend(self.start(src) for src in srcs)
      return [job.result() for job in jobs]
    except BaseException:
      for job in jobs: job.cancel()
      raise

  def compile(self, src: str, background: bool = False) -> bytes:
    """`src` built into a shared object; `background`: the compiler process runs at a lower CPU priority."""
    return self.start(src, background).result()

  def start(self, src: str, background: bool = False) -> CompileJob:
    """A compiler process building `src`, started now; its `result()` waits for the shared object."""
    cc = self._cc()
    flags = [f for f in compiler_flags(src) if f not in GCC_ONLY_FLAGS] if self.is_clang else compiler_flags(src)
    out = _fresh_library_path(_scratch_roots())
    CompilerRuns.add()
    return CompileJob(cc, [*flags, *self.extra_flags], list(self.link_flags), src, out, background)


_libc = ctypes.CDLL(None)
_libc.aligned_alloc.restype, _libc.aligned_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.restype, _libc.free.argtypes = None, [ctypes.c_void_p]
_madvise = getattr(_libc, "madvise", None)
if _madvise is not None: _madvise.restype, _madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MADV_HUGEPAGE, _MADV_POPULATE_WRITE, _HUGE_PAGE, _PAGE = 14, 23, 2 << 20, 4096


class MallocAllocator(Allocator):
  """Host memory from the C allocator, 64-byte aligned; the handle is the raw address kernels take.
  Freed blocks up to 1 MiB are kept in per-size free lists (64 MiB at most), because a jitted call
  allocates its outputs every time and reusing a block is much cheaper than asking C for one.
  Blocks of HUGE_BLOCK bytes and more are whole 2 MiB pages, marked for transparent huge pages (Linux,
  where it is the `madvise` mode): C hands such blocks out freshly mapped, and touching them for the first
  time takes one fault per 2 MiB instead of one per 4 KiB (writing a fresh 50 MB output: 4x less CPU)."""
  POOL_LIMIT, POOLED_BLOCK, HUGE_BLOCK = 64 << 20, 1 << 20, 8 << 20

  def __init__(self) -> None:
    self._free: dict[int, list[int]] = {}
    self._size: dict[int, int] = {}
    self._pooled_bytes = 0
    # Threads share the pool. The locked sections create no Python container, so no garbage collection
    # (and no Buffer.__del__ calling free) can start inside one; the lock need not be reentrant.
    self._lock = threading.Lock()
    # held here: at interpreter exit module globals become None before the last buffers are freed
    self._c_free = _libc.free

  def alloc(self, nbytes: int) -> int:
    ptr = self._alloc(nbytes)
    if settings.POISON_MEMORY: ctypes.memset(ptr, 0x6B, max(64, (nbytes + 63) // 64 * 64))
    return ptr

  def _alloc(self, nbytes: int) -> int:
    size = max(64, (nbytes + 63) // 64 * 64)
    if self._free.get(size):
      self._lock.acquire()
      if blocks := self._free[size]:  # still there: another thread may have taken the last one
        self._pooled_bytes -= size
        ptr = blocks.pop()
        self._lock.release()
        return ptr
      self._lock.release()
    if size >= self.HUGE_BLOCK and _madvise is not None:
      size = (size + _HUGE_PAGE - 1) // _HUGE_PAGE * _HUGE_PAGE
      ptr = _libc.aligned_alloc(_HUGE_PAGE, size)
      if ptr: _madvise(ptr, size, _MADV_HUGEPAGE)  # a hint: where it is refused, small pages as before
    else: ptr = _libc.aligned_alloc(64, size)
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
    self._c_free(handle)
  def prefault(self, handle: int, nbytes: int) -> None:
    """Map the pages of a block now, in one system call (Linux 5.14+; elsewhere nothing): a fresh block's
    pages would otherwise fault in one by one when a kernel first writes them, about 1.5x the time (the
    first call of the MLP step: 5.8 MB of intermediates, ~1.7 ms here against 3-5 ms of faults)."""
    if _madvise is None or nbytes < _PAGE: return
    start = handle // _PAGE * _PAGE
    _madvise(start, (handle + nbytes - start + _PAGE - 1) // _PAGE * _PAGE, _MADV_POPULATE_WRITE)  # (fails: no harm)

  def copyin(self, handle: int, data: memoryview) -> None:
    if data.nbytes: ctypes.memmove(handle, np.frombuffer(data, np.uint8).ctypes.data, data.nbytes)
  def copyout(self, handle: int, nbytes: int) -> bytes: return ctypes.string_at(handle, nbytes)
  def copy(self, dst: int, src: int, nbytes: int) -> None:  # between CPU device instances: one memmove
    if nbytes: ctypes.memmove(dst, src, nbytes)
  def copy_region(self, dst: int, dst_offset: int, src: int, src_offset: int, nbytes: int) -> None:
    if nbytes: ctypes.memmove(dst + dst_offset, src + src_offset, nbytes)


_dlopen = ctypes.CDLL  # the loader, a name tests can replace
_unloadable_roots: set[Path] = set()  # folders where loading failed once (e.g. a noexec mount): skipped later


class _Library:
  """A loaded shared object, unloaded (dlclose) when nothing references it any more. Each function
  taken from it keeps a reference, so a kernel is never unloaded while something can still call it.
  A library with parallel kernels (it exports tg_use_pool) runs them on one thread until the worker pool
  is loaded, then on the pool."""
  def __init__(self, binary: bytes):
    self.cdll = _load(binary)
    try:
      self._use_pool = self.cdll["tg_use_pool"]
    except AttributeError:  # no parallel kernel in it
      return
    self._use_pool.restype, self._use_pool.argtypes = None, [ctypes.c_void_p]
    when_pool_ready(self)

  def use_pool(self, parallel_for: int) -> None: self._use_pool(parallel_for)

  def function(self, name: str) -> Any:
    fxn = self.cdll[name]  # not getattr: the CDLL would cache the function, a cycle that delays unloading
    fxn.restype, fxn.library = None, self
    return fxn

  def __del__(self) -> None:
    if getattr(self, "cdll", None) is not None and not sys.is_finalizing(): _ctypes.dlclose(self.cdll._handle)


def _load(binary: bytes) -> ctypes.CDLL:
  """dlopen `binary` from a scratch file (unlinked at once: the mapping outlives it). If a folder cannot
  map executable code (TMPDIR on a noexec mount), warn once and use the next one."""
  roots = [r for r in _scratch_roots() if r not in _unloadable_roots]
  errors = []
  for root in roots:
    try:
      path = _fresh_library_path([root])
      path.write_bytes(binary)
      try:
        lib = _dlopen(str(path))
      finally:
        path.unlink(missing_ok=True)
    except (OSError, RuntimeError) as e:
      errors.append(f"{root}: {e}")
      continue
    if errors:
      _unloadable_roots.update(roots[:len(errors)])
      warn_once("load", f"could not load compiled kernels from {roots[0]} ({errors[0]}); loading them from {root} "
                        f"instead. If TMPDIR is on a noexec mount, set TMPDIR to a folder that allows executing code.")
    return lib
  raise RuntimeError(f"could not load a compiled kernel: {'; '.join(errors) or 'no usable folder'}. If a folder is "
                     f"on a noexec mount ('failed to map segment'), set TMPDIR or TGFN_CACHE_DIR to a folder on a "
                     f"mount that allows executing code.")


# scalar parameters as the C renderer declares them (dialects.C.param_types: float16 as a double)
scalar_arg = scalar_arg_converter(ctypes.c_bool, half_as_bits=False)


class CPUProgram:
  """One kernel: a function of a loaded library (its own, or one it shares with the rest of a batch).
  A `provisional` program runs a tiered batch's quick build until `upgrade` swaps in the optimized one."""
  def __init__(self, name: str, lib: bytes | _Library, provisional: bool = False):
    self.name, self.provisional = name, provisional
    self.fxn = (lib if isinstance(lib, _Library) else _Library(lib)).function(name)

  def __call__(self, *pointers: Any) -> None:
    """Buffer pointers (ints), then scalar parameters (ctypes values, from scalar_arg)."""
    fxn = self.fxn  # once: an upgrade may swap it meanwhile
    if fxn.argtypes is None: fxn.argtypes = [type(p) if isinstance(p, ctypes._SimpleCData) else ctypes.c_void_p for p in pointers]
    fxn(*pointers)

  def upgrade(self, library: _Library) -> None:
    """Run this kernel from `library` (the optimized build of the same source) from now on."""
    fxn = library.function(self.name)
    fxn.argtypes = self.fxn.argtypes  # set before the swap: a call never meets a function without them
    self.fxn, self.provisional = fxn, False

  def direct_launcher(self, n_pointers: int) -> Any:
    """What the jit replay calls for a launch with `n_pointers` buffer pointers and no scalar parameter:
    the ctypes function itself, its argument types set here (one Python call less per launch). A
    provisional program is called through itself, so that its upgrade is seen."""
    pointers = (ctypes.c_void_p,) * n_pointers
    if self.fxn.argtypes is None: self.fxn.argtypes = pointers
    return self.fxn if tuple(self.fxn.argtypes) == pointers and not self.provisional else self

  def batch_address(self, n_pointers: int) -> Optional[int]:
    """The function's address, for a launch from a LaunchBatch with `n_pointers` buffer pointers and no
    scalar parameter; None if it cannot be (a provisional program is called through itself)."""
    if self.provisional or n_pointers > _cpu_threads.MAX_BATCH_ARGS or self.direct_launcher(n_pointers) is not self.fxn:
      return None
    return ctypes.cast(self.fxn, ctypes.c_void_p).value


class _Launch(ctypes.Structure):
  _fields_ = [("fn", ctypes.c_void_p), ("nargs", ctypes.c_int), ("first", ctypes.c_int)]


class LaunchBatch:
  """Kernels run one after another by one foreign call, tg_run_launches (tgfn_drivers/_cpu_threads.py).
  A caller passes the pointers of `slots` (the buffer slots the kernels use, in this order) packed as
  one bytes object: `run(table, count, pack(*pointers), index)`."""
  def __init__(self, run: Any, addresses: list[int], arg_slots: list[tuple[int, ...]]):
    self.slots = sorted({s for args in arg_slots for s in args})
    position = {s: i for i, s in enumerate(self.slots)}
    self.table = (_Launch * len(addresses))()
    index: list[int] = []
    for launch, address, args in zip(self.table, addresses, arg_slots):
      launch.fn, launch.nargs, launch.first = address, len(args), len(index)
      index += [position[s] for s in args]
    self.run, self.count = run, len(addresses)
    self.index = (ctypes.c_int * len(index))(*index)
    self.pack = struct.Struct(f"{len(self.slots)}P").pack


def batch_launcher(addresses: list[int], arg_slots: list[tuple[int, ...]], on_ready: Any) -> Optional[LaunchBatch]:
  """A LaunchBatch for these kernels, or None while the library that runs it loads (`on_ready`, a bound
  method held weakly, is then called once it has)."""
  run = _cpu_threads.launch_runner(on_ready)
  return None if run is None else LaunchBatch(run, addresses, arg_slots)


_NOT_FLOPS = frozenset({Ops.CONST, Ops.LOAD, Ops.STORE, Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_ACC,
                        Ops.VECTORIZE, Ops.GEP})


@dataclass(frozen=True)
class OpCounts:
  """What a kernel executes (per vector lane, once per iteration of the loops around each op)."""
  floats_besides_mac: int       # float ALU ops, less two per accumulation (a multiply-accumulate)
  integer_values: int           # integer ALU ops on values rather than indices (random bits, hashing)
  executed: int                 # ALU ops of any dtype, loads and stores
  vector_code: bool             # some value is a vector
  gated_loads: bool             # some load reads only where a condition holds (padding)


def op_counts(program: list[UOp]) -> OpCounts:
  floats = integers = executed = 0
  vector_code = gated_loads = False
  trips = [1]
  for u in program:
    if u.op is Ops.RANGE: trips.append(trips[-1] * u.src[0].arg)
    elif u.op is Ops.ENDRANGE: trips.pop()
    elif u.op is Ops.ASSIGN: floats -= trips[-1] * u.src[0].dtype.count  # its own op, and the product it adds
    elif u.op in (Ops.LOAD, Ops.STORE):
      executed += trips[-1]
      gated_loads |= u.op is Ops.LOAD and len(u.src) > 2
    elif u.op not in _NOT_FLOPS and u.dtype is not None:
      lanes = trips[-1] * u.dtype.count
      executed += lanes
      if not u.dtype.is_int: floats += lanes
      elif u.dtype.scalar() != dtypes.index and not u.dtype.is_bool: integers += lanes
    vector_code |= u.dtype is not None and u.dtype.count > 1
  return OpCounts(floats, integers, executed, vector_code, gated_loads)


class NativeCRenderer(CStyleRenderer):
  """C for this machine: vector width and register count read from what -march=native enables."""
  def __init__(self, compiler: CCompiler):
    self.compiler = compiler

  @property
  def function_ops(self) -> frozenset[Ops]:  # type: ignore[override]
    """exp2 and log2 as calls of one polynomial function per vector type (tgfn/codegen/math_functions.py):
    whole-vector code, several times faster than libm's lane-by-lane calls, within the same ulp bounds
    (docs/numpy.md), its C written once per unit. TRANSCENDENTAL=1 keeps libm; sin and cos stay libm calls."""
    return frozenset() if transcendental_switch() == "1" else FUNCTION_OPS

  def function_definition(self, op: Ops, dtype: DType) -> str:
    return function_source(self, op, dtype)

  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = (),
             linkage: str = "") -> str:
    """The C source, marked with its optimization level (the notes at SIMPLE_OPT)."""
    src = super().render(name, program, buffer_dtypes, param_dtypes, linkage)
    counts = op_counts(program)
    if counts.floats_besides_mac >= FULL_OPT_FLOPS or counts.integer_values >= FULL_OPT_INTEGERS: return src
    simple = (counts.vector_code or counts.executed < SIMPLE_MAX_SCALAR_OPS) and not counts.gated_loads
    return (SIMPLE_MARK if simple else LIGHT_MARK) + src

  @functools.cached_property
  def vector_bytes(self) -> int:  # type: ignore[override]
    macros = self.compiler.target_macros()
    return 64 if "__AVX512F__" in macros else 32 if "__AVX__" in macros else 16

  @functools.cached_property
  def vector_fma(self) -> dict[str, str]:  # type: ignore[override]
    """x86 builtins for whole-vector FMA: gcc compiles them about twice as fast as a loop over lanes."""
    macros, out = self.compiler.target_macros(), {}
    if "__FMA__" in macros:
      out.update({"float32x4": "__builtin_ia32_vfmaddps({0}, {1}, {2})", "float64x2": "__builtin_ia32_vfmaddpd({0}, {1}, {2})",
                  "float32x8": "__builtin_ia32_vfmaddps256({0}, {1}, {2})",
                  "float64x4": "__builtin_ia32_vfmaddpd256({0}, {1}, {2})"})
    if "__AVX512F__" in macros:
      out.update({"float32x16": "__builtin_ia32_vfmaddps512_mask({0}, {1}, {2}, (unsigned short)-1, 4)",
                  "float64x8": "__builtin_ia32_vfmaddpd512_mask({0}, {1}, {2}, (unsigned char)-1, 4)"})
    return out

  @functools.cached_property
  def vector_sqrt(self) -> dict[str, str]:  # type: ignore[override]
    """x86 builtins for whole-vector square roots, correctly rounded as sqrtf is: the lane loop stays
    scalar code at LIGHT_OPT's -O1 (an Adam update's kernel ran 2.5x slower)."""
    macros, out = self.compiler.target_macros(), {}
    if "__SSE2__" in macros: out.update({"float32x4": "__builtin_ia32_sqrtps({0})", "float64x2": "__builtin_ia32_sqrtpd({0})"})
    if "__AVX__" in macros:
      out.update({"float32x8": "__builtin_ia32_sqrtps256({0})", "float64x4": "__builtin_ia32_sqrtpd256({0})"})
    if "__AVX512F__" in macros:  # (4: the current rounding mode, as sqrtf)
      if self.compiler.is_clang:
        out.update({"float32x16": "__builtin_ia32_sqrtps512({0}, 4)", "float64x8": "__builtin_ia32_sqrtpd512({0}, 4)"})
      else:
        out.update({"float32x16": "__builtin_ia32_sqrtps512_mask({0}, {0}, (unsigned short)-1, 4)",
                    "float64x8": "__builtin_ia32_sqrtpd512_mask({0}, {0}, (unsigned char)-1, 4)"})
    return out

  @functools.cached_property
  def shuffle(self) -> str:  # type: ignore[override]
    return "clang" if self.compiler.is_clang else "gcc"

  @functools.cached_property
  def registers(self) -> int:  # type: ignore[override]
    macros = self.compiler.target_macros()
    return 32 if "__AVX512F__" in macros or "__aarch64__" in macros else 16


def build_many(kernels: Iterable[tuple[str, str]]) -> list[CPUProgram]:
  """Compile several kernels (distinct function names) as C units, each started as soon as it is cut
  (`kernels` may be a generator doing codegen: the compiler runs meanwhile; tgfn_drivers/_cpu_units.py), and
  load each resulting library once: its kernels' programs share it, so it stays loaded while any of them is
  referenced. In a batch of TIERED_MIN_CHARS or more that is not on disk, the units not compiled at SIMPLE_OPT
  anyway are built quick first and rebuilt optimized in the background (tgfn_drivers/_cpu_tiers.py)."""
  tiered = _cpu_tiers.enabled()
  def quick(src: str, batch_chars: int) -> Optional[str]:  # (a simple unit's quick build would be the same build)
    big = tiered and batch_chars >= _cpu_tiers.TIERED_MIN_CHARS
    return _cpu_tiers.quick_source(src) if big and not src.startswith(SIMPLE_MARK) else None
  units, order = compile_units(kernels, _compiler, optimization_level, quick)
  programs: dict[str, CPUProgram] = {}
  for unit in units:
    library = _Library(unit.binary)
    built = [CPUProgram(name, library, provisional=unit.optimized is not None) for name in unit.names]
    programs.update(zip(unit.names, built))
    if unit.optimized is not None: _rebuild_optimized(unit.optimized, built)
  return [programs[name] for name in order]


def _rebuild_optimized(src: str, programs: list[CPUProgram]) -> None:
  """Compile a quick-built unit at its usual flags in the background, keep it on disk, and switch its
  kernels to it."""
  def build() -> bytes:
    binary = _compiler.cached(src) or _compiler.compile(src, background=True)  # (another batch may have built it)
    _compiler.store(src, binary)
    return binary

  def install(binary: bytes) -> None:
    library = _Library(binary)
    for program in programs: program.upgrade(library)

  _cpu_tiers.upgrade_later(build, install)


_compiler = CCompiler()
load_cached_pool_in_background()
DEVICE = Compiled("CPU", MallocAllocator(), NativeCRenderer(_compiler), _compiler, CPUProgram, build_many,
                  scalar_arg=scalar_arg, address_handles=True, wait_for_optimized=_cpu_tiers.wait,
                  batch_launcher=batch_launcher)
