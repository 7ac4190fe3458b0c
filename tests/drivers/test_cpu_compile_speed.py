"""What keeps the CPU driver's cold compile short, checked for behaviour (no timings): the C prelude reads no
system header, yet every C library function a kernel may call is declared; small kernels compile with
lighter optimization (as do contractions), in units of their own; the last units of a batch are split over
the compiler processes; a warm batch reads its units on the calling thread."""
import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.dtype import dtypes
from tgfn.engine.realize import prepare_kernel
from tgfn.renderer.dialects import C
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops
from tgfn_drivers import _cpu_units, cpu
from tgfn_drivers._cpu_threads import POOL_LINK, load_pool
from tgfn_drivers.cpu import find_c_compiler


def test_the_c_prelude_reads_no_system_header_and_declares_every_function_kernels_call(tmp_path):
  assert "#include" not in C.prelude
  calls = [f"{C.math(op, dt)}(({dt.cname})x)" for op in (Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TRUNC)
           for dt in (dtypes.float32, dtypes.float64)]
  bits = C.bitcast("(float)x", dtypes.float32, dtypes.int32)  # a bit cast is a memcpy
  src = C.prelude + f"double k(double x) {{ return {' + '.join(calls)} + {bits}; }}\n"
  (tmp_path / "k.c").write_text(src)
  # an undeclared function, or one declared unlike the C library's, is an error here
  proc = subprocess.run([*find_c_compiler(), "-std=c11", "-Werror=implicit-function-declaration", "-Werror=builtin-declaration-mismatch",
                         "-c", str(tmp_path / "k.c"), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr


KERNEL = "void {name}(float* restrict data0) {{ data0[0] = {value}f; /* {pad} */ }}\n"


def _kernel(name: str, value: float, light: bool, pad: int = 0) -> tuple[str, str]:
  return name, (cpu.LIGHT_MARK if light else "") + KERNEL.format(name=name, value=value, pad="." * pad)


@pytest.fixture
def fresh(monkeypatch, tmp_path):
  """An empty disk cache, the pool already loaded (its compile is not what these tests watch), one build per
  unit (tiered builds: tests/drivers/test_cpu_tiers.py), and every C unit compiled recorded."""
  load_pool()
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.setenv("TGFN_TIERED_COMPILE", "0")
  units: list[str] = []
  real = cpu.CCompiler.start
  monkeypatch.setattr(cpu.CCompiler, "start", lambda self, src, background=False: (units.append(src), real(self, src, background))[1])
  return units


def _run_all(programs, want):
  out = np.zeros(1, np.float32)
  for p, value in zip(programs, want):
    p(out.ctypes.data)
    assert out[0] == value


def test_each_kernel_gets_its_optimization_level(monkeypatch):
  """SIMPLE_OPT for vector code without gated loads (a contraction, whatever its size) and for a few scalar
  operations; LIGHT_OPT for longer scalar loops and padded (gated) reads; -O2 for long float code and for
  integer arithmetic on values (random bits; int64 index math does not count)."""
  import tgfn
  monkeypatch.setenv("DEV", "CPU")
  a = tnp.asarray(np.ones((256, 256), np.float32))

  def prepared(out):
    return [prepare_kernel(item.kernel, "CPU") for item in create_schedule([out.uop])]
  [tiny] = prepared(tnp.exp(a[:4, :4]).sum())
  contraction = max(prepared(a @ a), key=lambda p: p.flops)  # 2 * 256^3 float ops, after the packing kernel
  [long] = prepared(tnp.tanh(tnp.log(tnp.tile(a, (4, 4)) + 1.0)))
  scalar_loop = prepared(tnp.cumsum(a, axis=0)[::-1] * 2.0)[-1]  # (a scan: an unvectorized reduction per row)
  [padded] = prepared(tnp.pad(tnp.asarray(np.ones((64, 256), np.float32)), ((0, 0), (16, 16))) * 2.0)  # vector code, gated loads
  [bits] = prepared(tgfn.random.uniform(tgfn.random.key(0), (64, 64)))
  [few_bits] = prepared(tgfn.random.uniform(tgfn.random.key(0), (4, 4)))
  assert tiny.flops < cpu.FULL_OPT_FLOPS <= contraction.flops and cpu.FULL_OPT_FLOPS <= long.flops
  assert cpu.op_counts(contraction.linear).vector_code and cpu.op_counts(padded.linear).gated_loads
  counts = cpu.op_counts(bits.linear)
  assert counts.integer_values > counts.floats_besides_mac
  levels = [cpu.optimization_level(p.source) for p in (tiny, contraction, few_bits, scalar_loop, padded, long, bits)]
  assert levels == [cpu.SIMPLE_MARK] * 3 + [cpu.LIGHT_MARK] * 2 + [""] * 2


def test_each_level_compiles_with_its_own_flags(monkeypatch):
  argvs = []
  real = subprocess.Popen
  monkeypatch.setattr(cpu.subprocess, "Popen", lambda argv, **kw: (argvs.append(argv), real(argv, **kw))[1])
  for mark in (cpu.SIMPLE_MARK, cpu.LIGHT_MARK, ""):
    cpu.CCompiler().compile(mark + KERNEL.format(name="k", value=1.5, pad=""))
  # the flags: after the wrapper's ("sh", "-c", script, "tgfn-cc", source file) and the compiler's name
  simple, light, full = (argv[argv.index("tgfn-cc") + 3:] for argv in argvs)
  assert simple[:len(cpu.SIMPLE_OPT)] == cpu.SIMPLE_OPT and "-O2" not in simple and "-O1" not in simple
  assert light[:len(cpu.LIGHT_OPT)] == cpu.LIGHT_OPT and "-O2" not in light
  assert "-O2" in full and not {*cpu.LIGHT_OPT, *cpu.SIMPLE_OPT} & set(full)


def test_a_batch_compiles_each_optimization_level_in_units_of_its_own(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  kernels = [_kernel(f"k{i}", i + 0.5, light=i % 3 != 0) for i in range(7)]
  programs = cpu.build_many(iter(kernels))
  _run_all(programs, [i + 0.5 for i in range(7)])  # in the order given, whatever unit each went to
  assert len(fresh) == 2
  light, full = sorted(fresh, key=lambda src: not src.startswith(cpu.LIGHT_MARK))
  assert light == "".join(src for _, src in kernels if src.startswith(cpu.LIGHT_MARK))
  assert full == "".join(src for _, src in kernels if not src.startswith(cpu.LIGHT_MARK))


def test_no_unit_passes_the_source_budget_even_with_one_compiler_process(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  kernels = [_kernel(f"b{i}", i + 0.5, light=True, pad=60) for i in range(9)]
  monkeypatch.setattr(_cpu_units, "MAX_UNIT_CHARS", 3 * len(kernels[0][1]))
  _run_all(cpu.build_many(iter(kernels)), [i + 0.5 for i in range(9)])
  assert sorted(fresh) == sorted("".join(src for _, src in kernels[i:i + 3]) for i in (0, 3, 6))


def test_what_is_left_when_codegen_ends_is_split_over_the_compiler_processes(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 10_000)  # no unit fills up: all of it is left at the end
  monkeypatch.setattr(_cpu_units, "TAIL_CHARS", 100)
  kernels = [_kernel(f"k{i}", i + 0.5, light=True, pad=60) for i in range(6)]
  _run_all(cpu.build_many(iter(kernels)), [i + 0.5 for i in range(6)])
  assert sorted(fresh) == sorted(["".join(src for _, src in kernels[:3]), "".join(src for _, src in kernels[3:])])
  fresh.clear()
  _run_all(cpu.build_many(iter(kernels)), [i + 0.5 for i in range(6)])
  assert fresh == []  # a warm run cuts the same units: all on disk
  fresh.clear()
  monkeypatch.setattr(_cpu_units, "TAIL_CHARS", 10_000)  # a small rest stays one unit: a process costs more than it saves
  cpu.build_many(iter(_kernel(f"j{i}", i + 0.5, light=True) for i in range(6)))
  assert len(fresh) == 1
  fresh.clear()
  monkeypatch.setattr(_cpu_units, "TAIL_CHARS", 100)  # a piece is never smaller than the largest kernel of the rest
  cpu.build_many(iter([_kernel("big", 0.5, light=True, pad=400), *(_kernel(f"m{i}", i + 0.5, light=True) for i in range(3))]))
  assert len(fresh) == 1


def test_a_failing_unit_names_its_kernels(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 1)  # one unit per kernel
  broken = ("broken", cpu.LIGHT_MARK + "typedef float broken_t broken_t;\nvoid broken(float* data0) {}\n")
  with pytest.raises(RuntimeError) as info:
    cpu.build_many([_kernel("fine", 1.5, light=True), broken])
  first_line = str(info.value).splitlines()[0]
  assert "broken" in first_line and "fine" not in first_line


def test_a_warm_batch_reads_its_units_and_starts_no_compiler(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 100)
  kernels = [_kernel(f"w{i}", i + 0.5, light=i % 2 == 0, pad=60) for i in range(6)]
  _run_all(cpu.build_many(iter(kernels)), [i + 0.5 for i in range(6)])
  assert len(fresh) > 1
  fresh.clear()
  _run_all(cpu.build_many(iter(kernels)), [i + 0.5 for i in range(6)])
  assert fresh == []


def test_units_start_small_and_double_up_to_unit_chars(fresh, monkeypatch):
  """The first unit closes at FIRST_UNIT_CHARS, each next one at twice the size of the one before, up to
  UNIT_CHARS: a compiler starts early in codegen, and later units are few."""
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "FIRST_UNIT_CHARS", 200)
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 800)
  monkeypatch.setattr(_cpu_units, "TAIL_CHARS", 10_000)  # the rest is one unit
  kernels = [_kernel(f"g{i}", i + 0.5, light=True, pad=100 - len(_kernel(f"g{i}", i + 0.5, True)[1])) for i in range(26)]
  assert {len(src) for _, src in kernels} == {100}
  _run_all(cpu.build_many(iter(kernels)), [i + 0.5 for i in range(26)])
  assert sorted(len(src) for src in fresh) == sorted([200, 400, 800, 800, 400])


def test_units_left_when_codegen_ends_all_start_at_once(fresh, monkeypatch):
  """While codegen runs, at most jobs - 1 compilers run and closed units queue; once it is done, every unit
  left starts (up to FINAL_JOBS_PER_JOB x jobs), so none runs alone at the end while other cores idle."""
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 100)  # one unit per kernel: codegen (a list here) outruns gcc
  live, most, real_start, real_result = [0], [0], cpu.CCompiler.start, cpu.CompileJob.result
  def start(self, src, background=False):
    live[0] += 1
    most[0] = max(most[0], live[0])
    return real_start(self, src, background)
  def result(self):
    live[0] -= 1
    return real_result(self)
  monkeypatch.setattr(cpu.CCompiler, "start", start)
  monkeypatch.setattr(cpu.CompileJob, "result", result)
  _run_all(cpu.build_many([_kernel(f"s{i}", i + 0.5, light=True, pad=60) for i in range(8)]), [i + 0.5 for i in range(8)])
  assert most[0] == 2 * 2


def test_compilers_are_started_and_reaped_on_the_calling_thread(fresh, monkeypatch):
  """No helper thread: one would wait for the interpreter lock, which codegen holds, at every step of
  starting a compiler or noticing its end."""
  import threading
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 100)
  threads, real = [], cpu.CompileJob.result
  monkeypatch.setattr(cpu.CompileJob, "result", lambda self: (threads.append(threading.current_thread()), real(self))[1])
  before = threading.active_count()
  _run_all(cpu.build_many(iter(_kernel(f"c{i}", i + 0.5, light=True, pad=60) for i in range(6))), [i + 0.5 for i in range(6)])
  assert len(fresh) > 1 and len(threads) == len(fresh) and set(threads) == {threading.current_thread()}
  assert threading.active_count() == before


def test_kernel_libraries_link_no_standard_library_but_the_pool_links_libm(monkeypatch):
  commands = []
  real_popen = subprocess.Popen
  monkeypatch.setattr(cpu.subprocess, "Popen", lambda argv, **kw: commands.append(list(argv)) or real_popen(argv, **kw))
  calls = " + ".join(f"{C.math(op, dtypes.float32)}(x)" for op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT))
  src = cpu.LIGHT_MARK + C.prelude + (f"void k_link(float* restrict out, double y) {{ float x = (float)(_Float16)y; "
                                      f"out[0] = {calls}; }}\n")  # libm's functions, and libgcc's float16 helper
  program = cpu.CPUProgram("k_link", cpu.CCompiler().compile(src))
  (argv,) = [a for a in commands if "-shared" in a and "-pthread" not in a]  # (not the pool's, nor a macro query)
  assert argv[-4:-2] == list(cpu.KERNEL_LINK) and "-nostdlib" in argv, "a kernel unit skips libc's and libm's link"
  out = np.zeros(1, np.float32)
  program(ctypes.c_void_p(out.ctypes.data), ctypes.c_double(1.5))
  x = np.float32(np.float16(1.5))
  np.testing.assert_allclose(out[0], np.exp2(x) + np.log2(x) + np.sin(x) + np.sqrt(x), rtol=1e-6)
  pool = cpu.CCompiler()
  pool.link_flags = POOL_LINK  # as tgfn_drivers/_cpu_threads.py builds the pool
  assert "-nostdlib" not in pool.cachekey and "-nostdlib" in cpu.CCompiler().cachekey


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_light_kernels_compile_with_clang(monkeypatch):
  """CC=clang gets the light flags without gcc's pass switches (clang rejects -fmove-loop-invariants)."""
  monkeypatch.setenv("CC", "clang")
  compiler = cpu.CCompiler()
  assert compiler.is_clang
  src = cpu.LIGHT_MARK + "void k(float* restrict data0) { data0[0] = 1.5f; }\n"
  program = cpu.CPUProgram("k", compiler.compile(src))
  out = np.zeros(1, np.float32)
  program(out.ctypes.data)
  assert out[0] == 1.5
