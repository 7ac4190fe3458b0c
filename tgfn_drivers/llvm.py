"""LLVM: kernels rendered as LLVM IR (tgfn/renderer/llvmir.py), optimized and compiled to machine code
in-process by llvmlite (no compiler process), loaded with LLVM's MCJIT and called through ctypes.
Memory is the CPU driver's allocator, and a kernel with a THREAD axis runs on the CPU driver's
worker pool (tgfn_drivers/_cpu_threads.py). Needs `pip install llvmlite` (the `llvm` extra)."""
from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any, Iterable, Optional

from tgfn_drivers import require_backend

require_backend("LLVM")

import llvmlite  # noqa: E402
import llvmlite.binding as llvm  # noqa: E402

from tgfn.device import Compiled, Compiler, warn_once  # noqa: E402
from tgfn.renderer.llvmir import LLVMRenderer  # noqa: E402
from tgfn_drivers._scalars import scalar_arg_converter  # noqa: E402
from tgfn_drivers.cpu import MallocAllocator  # noqa: E402

OPT_LEVEL = 2
_lock = threading.Lock()  # LLVM's context and target machine are not shared between threads


@functools.cache
def _host_features() -> str:
  try:
    return llvm.get_host_cpu_features().flatten()
  except RuntimeError:  # LLVM cannot tell on some hosts: the generic CPU of the triple
    return ""


def new_target_machine() -> llvm.TargetMachine:
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  target = llvm.Target.from_triple(llvm.get_process_triple())
  # the JIT's default code model: calls to the C library are absolute, wherever the code is mapped
  return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=_host_features(), opt=OPT_LEVEL,
                                      jit=True)


# the compiler's own; an execution engine takes ownership of (and frees) the one it is given, so each gets a new one
target_machine = functools.cache(new_target_machine)


@functools.cache
def _data_layout() -> str: return str(target_machine().target_data)


BATCH_SEPARATOR = "\n; ---- next kernel ----\n"


class LLVMCompiler(Compiler):
  """IR -> optimized object code, in this process."""
  @functools.cached_property
  def cachekey(self) -> str:  # type: ignore[override]
    return (f"llvmlite {llvmlite.__version__} llvm {'.'.join(map(str, llvm.llvm_version_info))} "
            f"{llvm.get_process_triple()} {llvm.get_host_cpu_name()} {_host_features()} O{OPT_LEVEL}")

  def compile(self, src: str) -> bytes:
    """One kernel's IR, or several joined by BATCH_SEPARATOR (linked into one module: one optimizer and
    code generator run, one object)."""
    with _lock:
      tm = target_machine()
      module = None
      for part in src.split(BATCH_SEPARATOR):
        try:
          parsed = llvm.parse_assembly(part)
          parsed.verify()
        except RuntimeError as e:
          raise RuntimeError(f"LLVM rejected the kernel's IR: {e}\n--- source ---\n{part}") from e
        if module is None: module = parsed
        else: module.link_in(parsed)
      module.triple, module.data_layout = llvm.get_process_triple(), _data_layout()
      builder = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL))
      builder.getModulePassManager().run(module, builder)
      return tm.emit_object(module)


# stands in for the worker pool where it cannot be built: the whole range on the calling thread
_SERIAL_POOL = """define void @tg_parallel_for(ptr %body, ptr %ctx, i64 %n, i64 %grain) {
entry:
  call void %body(ptr %ctx, i64 0, i64 %n)
  ret void
}
"""


@functools.cache
def _pool_address() -> int:
  """Where `tg_parallel_for` is: the CPU driver's worker pool (C, built once by the C compiler), or
  without a C compiler a serial stand-in, after a warning."""
  from tgfn_drivers._cpu_threads import load_pool
  try:
    return ctypes.cast(load_pool().tg_parallel_for, ctypes.c_void_p).value  # type: ignore[return-value]
  except RuntimeError as e:
    warn_once("llvm-pool", f"LLVM kernels run on one thread: the CPU worker pool needs a C compiler ({e})")
  serial = _Loaded(_compiler.compile(_SERIAL_POOL), calls_pool=False)
  _keep.append(serial)
  return serial.address("tg_parallel_for")


_keep: list[Any] = []  # the serial stand-in, loaded for the life of the process


class _Loaded:
  """Object code loaded into an execution engine of its own, freed when no program holds it."""
  def __init__(self, binary: bytes, calls_pool: Optional[bool] = None):
    if b"tg_parallel_for" in binary if calls_pool is None else calls_pool:
      llvm.add_symbol("tg_parallel_for", _pool_address())
    with _lock:
      self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine())
      self.engine.add_object_file(llvm.ObjectFileRef.from_data(binary))
      self.engine.finalize_object()

  def address(self, name: str) -> int:
    with _lock: address = self.engine.get_function_address(name)
    if not address: raise RuntimeError(f"the compiled LLVM module has no function {name!r}")
    return address


class LLVMProgram:
  """One kernel: a function of loaded object code (its own, or one it shares with the rest of a batch)."""
  def __init__(self, name: str, binary: bytes | _Loaded):
    self.loaded = binary if isinstance(binary, _Loaded) else _Loaded(binary)
    self.address = self.loaded.address(name)
    self.fxn: Any = None

  def __call__(self, *args: Any) -> None:
    """Buffer pointers (ints), then scalar parameters (ctypes values, from scalar_arg)."""
    if self.fxn is None:
      types = [type(a) if isinstance(a, ctypes._SimpleCData) else ctypes.c_void_p for a in args]
      self.fxn = ctypes.CFUNCTYPE(None, *types)(self.address)
    self.fxn(*args)


# scalar parameters as the renderer declares them (llvmir.param_type: bool as a byte, halves as bits)
scalar_arg = scalar_arg_converter(ctypes.c_uint8, half_as_bits=True)


class NativeLLVMRenderer(LLVMRenderer):
  """Vector width and register count of this machine, from the features LLVM sees on it."""
  @functools.cached_property
  def vector_bytes(self) -> int:  # type: ignore[override]
    features = _host_features()
    return 64 if "+avx512f" in features else 32 if "+avx," in features + "," else 16

  @functools.cached_property
  def registers(self) -> int:  # type: ignore[override]
    return 32 if "+avx512f" in _host_features() or llvm.get_process_triple().startswith("aarch64") else 16


def build_many(kernels: Iterable[tuple[str, str]]) -> list[LLVMProgram]:
  """The kernels of a batch (a jitted function) as one module: compiled, cached and loaded once."""
  kernels = list(kernels)  # the engine may pass a generator that does codegen as it goes
  loaded = _Loaded(_compiler.compile_cached(BATCH_SEPARATOR.join(src for _, src in kernels)))
  return [LLVMProgram(name, loaded) for name, _ in kernels]


_compiler = LLVMCompiler()
DEVICE = Compiled("LLVM", MallocAllocator(), NativeLLVMRenderer(), _compiler, LLVMProgram, build_many,
                  scalar_arg=scalar_arg, address_handles=True)
