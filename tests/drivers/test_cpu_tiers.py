"""Tiered compilation on the CPU device (tgfn_drivers/_cpu_tiers.py): a large batch not on disk is built
quick first and its kernels switch to the optimized build when the background compile is done; results are
bit-identical before and after, only the optimized build goes to disk, and a small batch builds once."""
import ctypes
import gc
import threading
import weakref
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine import realize
from tgfn_drivers import _cpu_tiers, cpu
from tgfn_drivers._cpu_threads import load_pool

# a kernel with a loop and libm calls: work for the optimizer, and a result whose bits would show a change
# in evaluation order
KERNEL = """void {name}(float* restrict out, const float* restrict x) {{
  for (long long i = 0; i < 4096; i++) out[i] = expf(x[i] * {scale}f) / (1.0f + sqrtf(x[i] * x[i] + {scale}f)); /* {pad} */
}}
"""


def _kernels(count: int, pad: int) -> list[tuple[str, str]]:
  return [(f"t{i}", "float expf(float), sqrtf(float);\n" + KERNEL.format(name=f"t{i}", scale=i + 0.5, pad="." * pad))
          for i in range(count)]


def _outputs(programs) -> list[np.ndarray]:
  x = np.linspace(-3, 3, 4096, dtype=np.float32)
  outs = []
  for p in programs:
    out = np.zeros_like(x)
    p(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data))
    outs.append(out)
  return outs


@pytest.fixture
def builds(monkeypatch, tmp_path):
  """An empty disk cache, tiering on, and every compile recorded as (flags, background)."""
  load_pool()
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.setenv("TGFN_TIERED_COMPILE", "1")
  seen: list[tuple[list[str], bool]] = []
  real = cpu.CCompiler.start
  monkeypatch.setattr(cpu.CCompiler, "start",
                      lambda self, src, background=False: (seen.append((cpu.compiler_flags(src), background)), real(self, src, background))[1])
  return seen


@pytest.fixture
def held_rebuilds(monkeypatch):
  """The optimized rebuilds wait until the test sets the returned event: what runs before it is the quick
  build however loaded the machine is."""
  release, upgrade_later = threading.Event(), _cpu_tiers.upgrade_later
  monkeypatch.setattr(_cpu_tiers, "upgrade_later",
                      lambda build, install: upgrade_later(lambda: (release.wait(), build())[1], install))
  yield release
  release.set()


def test_a_large_cold_batch_runs_quick_builds_then_switches_to_optimized_ones_with_the_same_bits(builds, held_rebuilds):
  # each kernel alone is a large batch: the units cut as the batch grows are quick builds from the first one
  kernels = _kernels(4, pad=_cpu_tiers.TIERED_MIN_CHARS)
  programs = cpu.build_many(kernels)
  assert all(p.provisional for p in programs)
  assert builds and all(flags[:len(_cpu_tiers.QUICK_OPT)] == _cpu_tiers.QUICK_OPT and not bg for flags, bg in builds)
  quick = _outputs(programs)
  quick_functions = [p.fxn for p in programs]
  held_rebuilds.set()
  _cpu_tiers.wait()
  assert not any(p.provisional for p in programs) and _cpu_tiers.pending() == 0
  assert all(p.fxn is not f for p, f in zip(programs, quick_functions))
  rebuilt = [flags for flags, bg in builds if bg]
  assert rebuilt and all("-O2" in flags and "-Og" not in flags for flags in rebuilt)
  for q, o in zip(quick, _outputs(programs)): np.testing.assert_array_equal(q.view(np.uint32), o.view(np.uint32))
  # the disk holds the optimized units only: a new batch of the same kernels builds nothing
  builds.clear()
  again = cpu.build_many(kernels)
  assert builds == [] and not any(p.provisional for p in again)


def test_a_small_batch_builds_once_at_the_usual_flags(builds):
  programs = cpu.build_many(_kernels(3, pad=10))
  assert not any(p.provisional for p in programs)
  assert builds and not any("-Og" in flags or bg for flags, bg in builds)


def test_tiering_can_be_switched_off(builds, monkeypatch):
  monkeypatch.setenv("TGFN_TIERED_COMPILE", "0")
  programs = cpu.build_many(_kernels(4, pad=_cpu_tiers.TIERED_MIN_CHARS // 4))
  assert not any(p.provisional for p in programs)
  assert not any("-Og" in flags or bg for flags, bg in builds)


def test_a_jitted_function_runs_its_quick_kernels_then_replays_the_optimized_ones(builds, held_rebuilds, monkeypatch):
  monkeypatch.setenv("DEV", "CPU")
  monkeypatch.setattr(_cpu_tiers, "TIERED_MIN_CHARS", 1)  # tier this small function's batch
  monkeypatch.setattr(cpu, "FULL_OPT_FLOPS", 0)  # its kernels at -O2 (a simple unit is built once: its quick build)
  monkeypatch.setattr(realize, "_compiled", OrderedDict())
  rng = np.random.default_rng(0)
  x, w = (tnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((64, 96), (96, 32)))
  f = tgfn.jit(lambda x, w: (tnp.tanh(x @ w) * 1.5 - 0.25).sum(0))
  first = np.asarray(f(x, w))
  programs = [k.program for k in realize._compiled.values()]
  assert programs and all(p.provisional for p in programs)
  quick_libraries = [weakref.ref(p.fxn.library) for p in programs]
  second = np.asarray(f(x, w))  # still quick: launch by launch, no straight-line replay yet
  held_rebuilds.set()
  _cpu_tiers.wait()
  third, fourth = np.asarray(f(x, w)), np.asarray(f(x, w))  # optimized, then the straight-line replay
  for got in (second, third, fourth): np.testing.assert_array_equal(got.view(np.uint32), first.view(np.uint32))
  want = np.tanh(np.asarray(x, np.float64) @ np.asarray(w, np.float64)) * 1.5 - 0.25
  np.testing.assert_allclose(first, want.sum(0), rtol=1e-4, atol=1e-4)
  # nothing holds a quick build any more (the replay took the optimized functions): they are unloaded
  gc.collect()
  assert all(ref() is None for ref in quick_libraries)


def test_a_simple_unit_is_built_once_in_a_tiered_batch(builds):
  """A simple unit's quick build would be its optimized build (SIMPLE_OPT is QUICK_OPT): it is built once."""
  kernels = [(name, cpu.SIMPLE_MARK + src) for name, src in _kernels(2, pad=_cpu_tiers.TIERED_MIN_CHARS)]
  programs = cpu.build_many(kernels)
  assert not any(p.provisional for p in programs) and _cpu_tiers.pending() == 0
  assert builds and all(flags[:len(cpu.SIMPLE_OPT)] == cpu.SIMPLE_OPT and not bg for flags, bg in builds)
