"""A jitted function's kernels compile as a batch: one C unit per compiler process, one library each,
remembered on disk by kernel AST so a warm process runs neither codegen nor the compiler."""
from __future__ import annotations

import builtins
import gc
import io
import os
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.device import Device
from tgfn.engine import realize
from tgfn_drivers import _cpu_units, cpu
from tgfn_drivers._cpu_threads import load_pool


@pytest.fixture
def fresh(monkeypatch, tmp_path):
  """CPU, an empty disk cache, an empty in-memory kernel cache, one build per unit (tiered builds:
  tests/drivers/test_cpu_tiers.py), and the pool and target macros already known (their one-time compiler
  runs are not what these tests count)."""
  monkeypatch.setenv("DEV", "CPU")
  monkeypatch.setenv("TGFN_TIERED_COMPILE", "0")
  load_pool()
  _ = Device["CPU"].compiler.cachekey
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(realize, "_compiled", OrderedDict())
  return tmp_path


def _compiler_runs(fn, *args):
  before = cpu.CompilerRuns.count
  out = fn(*args)
  return out, cpu.CompilerRuns.count - before


def many_kernels(x, y):
  """Eight outputs, nine kernels, six of one name (r_16_1: reductions never share a kernel), a softmax-like
  reduction and a contraction."""
  outs = [(x * (k + 0.5) + y).sum(1, keepdims=True) for k in range(6)]
  return outs + [tnp.exp(x - x.max(1, keepdims=True)).sum(1), x @ y.T]


def _inputs():
  rng = np.random.default_rng(0)
  return [tnp.asarray(rng.standard_normal((16, 64)).astype(np.float32)) for _ in range(2)]


def _assert_equal(got, want):
  for g, w in zip(got, want): np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_jitted_function_starts_one_compiler_process_cold_and_none_warm(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  x, y = _inputs()
  cold, runs = _compiler_runs(tgfn.jit(many_kernels), x, y)
  assert runs == 1
  assert len(realize._compiled) >= 8  # kernels compiled in that one process
  _assert_equal(cold, many_kernels(x, y))  # eager: kernels compiled one at a time, no batch
  # a new process, as far as the caches can tell: nothing in memory, the disk cache warm
  monkeypatch.setattr(realize, "_compiled", OrderedDict())
  monkeypatch.setattr(realize, "prepare_kernel", lambda *a, **k: pytest.fail("codegen ran with a warm cache"))
  warm, runs = _compiler_runs(tgfn.jit(many_kernels), x, y)
  assert runs == 0
  _assert_equal(warm, cold)


def test_kernels_already_in_memory_are_not_compiled_again(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  x, y = _inputs()
  tgfn.jit(many_kernels)(x, y)
  compiled = realize.Counters.kernels_compiled
  # the same kernels plus one new one: only the new one compiles (alone: no batch of one)
  out, runs = _compiler_runs(tgfn.jit(lambda x, y: many_kernels(x, y) + [x - 7.25]), x, y)
  assert runs == 1 and realize.Counters.kernels_compiled == compiled + 1
  np.testing.assert_array_equal(np.asarray(out[-1]), np.asarray(x) - np.float32(7.25))


def test_a_batch_splits_over_parallel_compiler_processes(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 1)  # every kernel a unit of its own
  x, y = _inputs()
  out, runs = _compiler_runs(tgfn.jit(many_kernels), x, y)
  assert runs == 9
  libraries = {id(k.program.fxn.library) for k in realize._compiled.values()}
  assert len(libraries) == 9
  _assert_equal(out, many_kernels(x, y))  # eager: its scalars are kernel arguments, so kernels of its own


def test_units_close_at_unit_chars_in_order_and_are_the_same_warm(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 100)
  monkeypatch.setattr(_cpu_units, "TAIL_CHARS", 1000)  # the rest is one unit (its split: tests/drivers/test_cpu_compile_speed.py)
  units = []
  real = cpu.CCompiler.start
  monkeypatch.setattr(cpu.CCompiler, "start", lambda self, src, background=False: (units.append(src), real(self, src, background))[1])
  sources = [(f"k{i}", f"void k{i}(float* restrict data0) {{ data0[0] = {i}.5f; /* {'.' * (40 * (i % 3))} */ }}\n")
             for i in range(7)]
  programs = cpu.build_many(iter(sources))  # a generator is fine: units start while it is consumed
  out = np.zeros(1, np.float32)
  for i, p in enumerate(programs):
    p(out.ctypes.data)
    assert out[0] == i + 0.5
  sizes = [len(src) for _, src in sources]
  expected, size = [[]], 0
  for i, n in enumerate(sizes):  # in order, each unit closing once it reaches UNIT_CHARS
    expected[-1].append(i)
    size += n
    if size >= 100 and i < len(sizes) - 1: expected, size = expected + [[]], 0
  assert sorted(units) == sorted("".join(sources[i][1] for i in unit) for unit in expected)  # (compiled in parallel)
  assert len(units) > 1
  units.clear()
  cpu.build_many(sources)
  assert units == []  # the same units again: every one from the disk cache


def test_codegen_and_the_compiler_overlap(fresh, monkeypatch):
  """A jitted function's first C unit compiles while the rest of its kernels are still being generated."""
  import threading
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "2")
  monkeypatch.setattr(_cpu_units, "UNIT_CHARS", 1)
  started = threading.Event()
  real_start, real_prepare = cpu.CCompiler.start, realize.prepare_kernel
  monkeypatch.setattr(cpu.CCompiler, "start", lambda self, src, background=False: (started.set(), real_start(self, src, background))[1])
  seen = []
  def prepare(kernel, *a, **k):
    if seen: seen.append(started.wait(timeout=30))  # the first unit is compiling before codegen ends
    else: seen.append(None)
    return real_prepare(kernel, *a, **k)
  monkeypatch.setattr(realize, "prepare_kernel", prepare)
  x, y = _inputs()
  out = tgfn.jit(many_kernels)(x, y)
  assert len(seen) == 9 and all(seen[1:])
  _assert_equal(out, many_kernels(x, y))


def test_compile_jobs_default_to_one_more_than_the_cpus(monkeypatch):
  """One compiler process more than the CPUs fills the gaps that starting and linking and codegen leave."""
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "")
  assert _cpu_units.compile_jobs() == len(os.sched_getaffinity(0)) + 1
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  assert _cpu_units.compile_jobs() == 1


def test_compile_jobs_must_be_a_positive_whole_number(monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "two")
  with pytest.raises(ValueError, match="TGFN_COMPILE_JOBS must be a whole number"): _cpu_units.compile_jobs()


def test_the_prepared_source_cache_is_keyed_by_codegen_switches(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  x, y = _inputs()
  tgfn.jit(many_kernels)(x, y)
  assert any(k.opts for k in realize._compiled.values())
  monkeypatch.setattr(realize, "_compiled", OrderedDict())
  monkeypatch.setenv("NOOPT", "1")  # the same ASTs under another switch: codegen again, no opts
  out, runs = _compiler_runs(tgfn.jit(many_kernels), x, y)
  assert runs == 1 and not any(k.opts for k in realize._compiled.values())
  _assert_equal(out, many_kernels(x, y))


def test_a_damaged_prepared_source_entry_is_rebuilt(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  x, y = _inputs()
  want = tgfn.jit(many_kernels)(x, y)
  entries = [p for p in (fresh / "batches").rglob("*") if p.is_file()]
  assert len(entries) == 1
  entries[0].write_bytes(entries[0].read_bytes()[:-5] + b"XXXXX")
  monkeypatch.setattr(realize, "_compiled", OrderedDict())
  _assert_equal(tgfn.jit(many_kernels)(x, y), want)


def test_a_batch_library_stays_loaded_while_any_of_its_programs_is_referenced(monkeypatch, tmp_path):
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  closed = []
  real_dlclose = cpu._ctypes.dlclose
  monkeypatch.setattr(cpu._ctypes, "dlclose", lambda handle: (closed.append(handle), real_dlclose(handle)))
  sources = [(f"k{i}", f"void k{i}(float* restrict data0) {{ data0[0] = {i}.5f; }}\n") for i in range(5)]
  programs = cpu.build_many(sources)
  assert len({id(p.fxn.library) for p in programs}) == 1  # one library for the batch
  handle = programs[0].fxn.library.cdll._handle
  out = np.zeros(1, np.float32)
  del programs[:4]
  gc.collect()
  assert handle not in closed  # four programs gone, the last still holds the library
  programs[0](out.ctypes.data)
  assert out[0] == 4.5
  del programs[0]
  gc.collect()
  assert closed.count(handle) == 1


def test_the_cache_key_names_the_cpu_model_and_the_target_macros(monkeypatch, tmp_path):
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  compiler = cpu.CCompiler()
  key = compiler.cachekey
  assert f"cpu:{cpu.cpu_model()}" in key and cpu.cpu_model()
  monkeypatch.setattr(cpu, "cpu_model", lambda: "Imaginary CPU 9000")
  assert compiler.cachekey != key and "Imaginary CPU 9000" in compiler.cachekey
  # another CPU's -march=native macros (from the disk cache of target queries): another key
  monkeypatch.setattr(cpu, "_target_macros", {})
  before = cpu.CompilerRuns.count
  other = compiler.cachekey  # this "CPU" was never queried: the compiler runs once
  assert cpu.CompilerRuns.count == before + 1
  monkeypatch.setattr(cpu, "_target_macros", {})
  assert compiler.cachekey == other and cpu.CompilerRuns.count == before + 1  # now from disk
  monkeypatch.setattr(cpu, "_target_macros", {tuple(compiler._cc()): "#define __AVX512F__ 1\n"})
  assert compiler.cachekey != other


def test_cpu_model_reads_proc_cpuinfo(monkeypatch):
  real_open = builtins.open
  fake = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Example Core 7 @ 3.00GHz\nflags\t\t: fpu sse2\n"
  monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO(fake) if path == "/proc/cpuinfo" else real_open(path, *a, **k))
  assert cpu.cpu_model.__wrapped__() == "Example Core 7 @ 3.00GHz"  # (unwrapped: the answer is cached)
  assert cpu._cpu_features.__wrapped__() == "fpu sse2"


def test_small_reductions_get_no_register_tile_or_unroll():
  """Tiles on tiny kernels cost compile time and save nothing (tgfn/codegen/heuristic.py)."""
  from tgfn.codegen.heuristic import hand_coded_opts
  from tgfn.codegen.opts import OptOps
  from tgfn.schedule.schedule import create_schedule

  def opts_of(rows: int, cols: int) -> set:
    x = tnp.ones((rows, cols)).realize()
    ast = create_schedule([tnp.exp(x).sum(1).uop])[-1].kernel.ast
    return {o.op for o in hand_coded_opts(ast, 32, 16)}
  assert not {OptOps.UPCAST, OptOps.UNROLL} & opts_of(256, 10)  # softmax rows of 10 classes
  assert OptOps.UNROLL in opts_of(256, 512)


def _lazy_params():
  """A model's parameters as its initializers leave them: lazy graphs, one per array (seven kernels)."""
  keys = tgfn.random.split(tgfn.random.key(3), 4)
  return [tgfn.random.normal(keys[0], (32, 16)), tgfn.random.uniform(keys[1], (16,)) * 0.5,
          tgfn.random.normal(keys[2], (16, 8)) * 0.1, tnp.zeros((8,)) + 0.25]


def _levels(kernels) -> set[str]:
  """The optimization levels (cpu.optimization_level) of compiled kernels."""
  return {cpu.optimization_level(k.source) for k in kernels}


def _realized_one_by_one(arrays):
  return [np.asarray(a) for a in arrays]


def test_realizing_several_outputs_compiles_their_kernels_as_one_batch(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  params = _lazy_params()
  _, runs = _compiler_runs(tgfn.block_until_ready, params)
  assert runs == len(_levels(realize._compiled.values())) < len(realize._compiled)  # one process per level, not per kernel
  _assert_equal(params, _realized_one_by_one(_lazy_params()))


def test_a_jit_call_computes_its_lazy_arguments_in_one_batch(fresh, monkeypatch):
  monkeypatch.setenv("TGFN_COMPILE_JOBS", "1")
  f = tgfn.jit(lambda w1, b1, w2, b2, x: tnp.tanh(x @ w1 + b1) @ w2 + b2)
  x = tnp.asarray(np.ones((4, 32), np.float32))
  params = _lazy_params()
  out, runs = _compiler_runs(f, *params, x)
  # the arguments' kernels in one process per optimization level, the function's in one per level too
  function = {k.source for k in f.lower(*params, x).kernels}
  arguments = [k for k in realize._compiled.values() if k.source not in function]
  assert len(arguments) >= 4 and runs == len(_levels(arguments)) + len(_levels(f.lower(*params, x).kernels))
  w1, b1, w2, b2 = _realized_one_by_one(_lazy_params())
  np.testing.assert_allclose(np.asarray(out), np.tanh(np.ones((4, 32), np.float32) @ w1 + b1) @ w2 + b2, rtol=1e-5, atol=1e-6)
