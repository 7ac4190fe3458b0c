"""The CPU worker pool (tgfn_drivers/_cpu_threads.py): hand-written kernels of the shape the code
generator emits call tg_parallel_for; every index runs exactly once, on bounded threads, after fork too."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from tgfn.renderer.cstyle import THREAD_PRELUDE
from tgfn_drivers._cpu_threads import load_pool, num_threads
from tgfn_drivers.cpu import CCompiler, CPUProgram

ROOT = Path(__file__).resolve().parents[2]

KERNELS = THREAD_PRELUDE + r"""
#include <sys/syscall.h>
#include <unistd.h>

/* visits[i] += 1 and tids[i] = the running thread; bad_chunks counts chunks that break the contract */
struct count_ctx { int *visits; long long *tids; long long *bad_chunks; long long n, grain; };
static void count_body(void *c, long long lo, long long hi) {
  struct count_ctx *a = c;
  long long tid = syscall(SYS_gettid);
  if (lo % a->grain != 0 || hi <= lo || (hi - lo < a->grain && hi != a->n))
    __atomic_fetch_add(a->bad_chunks, 1, __ATOMIC_RELAXED);
  for (long long i = lo; i < hi; i++) { __atomic_fetch_add(&a->visits[i], 1, __ATOMIC_RELAXED); a->tids[i] = tid; }
}
void count_visits(int *visits, long long *tids, long long *bad_chunks, long long n, long long grain) {
  struct count_ctx a = {visits, tids, bad_chunks, n, grain};
  tg_parallel_for(count_body, &a, n, grain);
}

/* the generator's shape */
struct k_ctx { float *data0; const float *data1; };
static void k_body(void *c, long long lo, long long hi) {
  struct k_ctx *a = c;
  for (long long i = lo; i < hi; i++) a->data0[i] = a->data1[i] * 2.0f;
}
void k(float *restrict data0, const float *restrict data1) {
  struct k_ctx a = {data0, data1};
  tg_parallel_for(k_body, &a, 1000000, 4096);
}

/* rows in parallel, and each row's columns in parallel again from inside the body */
struct row_ctx { int *visits; long long row; };
struct grid_ctx { int *visits; };
static void col_body(void *c, long long lo, long long hi) {
  struct row_ctx *a = c;
  for (long long j = lo; j < hi; j++) __atomic_fetch_add(&a->visits[a->row * 5000 + j], 1, __ATOMIC_RELAXED);
}
static void grid_body(void *c, long long lo, long long hi) {
  struct grid_ctx *g = c;
  for (long long r = lo; r < hi; r++) { struct row_ctx a = {g->visits, r}; tg_parallel_for(col_body, &a, 5000, 64); }
}
void nested(int *visits) { struct grid_ctx g = {visits}; tg_parallel_for(grid_body, &g, 64, 1); }
"""


class Kernels:
  """The test kernels, compiled once per process (into the test run's cache). Two test threads may ask
  first at once: a kernel is published only with its argtypes set (without them ctypes would pass the
  long long counts as C ints)."""
  _lib: dict[str, CPUProgram] = {}
  _lock = threading.Lock()

  @classmethod
  def get(cls, name: str) -> CPUProgram:
    with cls._lock:
      if not cls._lib:
        load_pool()  # first: these tests are about the pool (a library loaded earlier runs serially until it is in)
        binary = CCompiler().compile_cached(KERNELS)
        lib = {fn: CPUProgram(fn, binary) for fn in ("count_visits", "k", "nested")}
        lib["count_visits"].fxn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_longlong] * 2
        lib["k"].fxn.argtypes = [ctypes.c_void_p] * 2
        lib["nested"].fxn.argtypes = [ctypes.c_void_p]
        cls._lib.update(lib)
    return cls._lib[name]


def count_visits(n: int, grain: int) -> tuple[np.ndarray, np.ndarray, int]:
  visits, tids, bad = np.zeros(max(n, 1), np.int32), np.zeros(max(n, 1), np.int64), np.zeros(1, np.int64)
  Kernels.get("count_visits").fxn(visits.ctypes.data, tids.ctypes.data, bad.ctypes.data, n, grain)
  return visits[:n], tids[:n], int(bad[0])


@pytest.mark.parametrize("n", [0, 1, 99, 100, 101, 1003, 1_000_000])
def test_every_index_runs_exactly_once_in_grain_aligned_chunks(n):
  visits, tids, bad_chunks = count_visits(n, 100)
  assert (visits == 1).all(), f"indices visited other than once: {np.flatnonzero(visits != 1)[:10]}"
  assert bad_chunks == 0, "a chunk did not start at a multiple of grain or was shorter than grain (not the last)"
  assert (tids != 0).all()


def test_a_generated_shape_kernel_writes_results_visible_after_return():
  x = np.arange(1_000_000, dtype=np.float32)
  out = np.zeros_like(x)
  for _ in range(5):
    out[:] = 0
    Kernels.get("k").fxn(out.ctypes.data, x.ctypes.data)
    np.testing.assert_array_equal(out, x * 2)


def test_two_python_threads_launch_at_once_and_both_are_right():
  errors: list[str] = []

  def launch_many(tag: int) -> None:
    for i in range(50):
      n = 200_000 + 37 * i + tag
      visits, _, bad = count_visits(n, 1000)
      if not (visits == 1).all() or bad: errors.append(f"thread {tag}, launch {i}: wrong visits")

  threads = [threading.Thread(target=launch_many, args=(t,)) for t in range(2)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert errors == []


def test_a_launch_nested_inside_a_body_completes():
  visits = np.zeros(64 * 5000, np.int32)
  Kernels.get("nested").fxn(visits.ctypes.data)
  assert (visits == 1).all()


def test_launches_create_no_threads():
  count_visits(100_000, 100)  # the pool starts here, on first parallel use
  before = len(os.listdir("/proc/self/task"))
  for _ in range(1000): count_visits(10_000, 100)
  # not more: a thread an earlier test started (a compile pool's, a device queue's) may finish meanwhile
  assert len(os.listdir("/proc/self/task")) <= before


def test_num_threads_is_the_cpus_this_process_may_use():
  assert num_threads() == int(os.environ.get("CPU_THREADS") or len(os.sched_getaffinity(0)))
  assert load_pool() is load_pool()


SETUP = """
import os, threading
import numpy as np
from tests.drivers.test_cpu_threads import count_visits
from tgfn_drivers._cpu_threads import num_threads
def threads():  # the pool's workers, by the name they give themselves (others come and go: the pool's loader, BLAS)
  names = []
  for t in os.listdir("/proc/self/task"):
    try:
      names.append(open(f"/proc/self/task/{t}/comm").read().strip())
    except FileNotFoundError:  # a thread that ended meanwhile
      pass
  return names.count("tgfn-worker")
"""


def run_python(code: str, before_setup: str = "", **env: str) -> str:
  """Run before_setup + SETUP + code in a fresh interpreter with `env` added; return what it printed."""
  program = textwrap.dedent(before_setup) + SETUP + textwrap.dedent(code)
  proc = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                        text=True, env={**os.environ, **env}, timeout=120)
  assert proc.returncode == 0, proc.stderr
  return proc.stdout


def test_cpu_threads_1_runs_everything_on_the_caller():
  out = run_python("""
  before = threads()
  visits, tids, bad = count_visits(1_000_000, 100)
  assert (visits == 1).all() and bad == 0
  print(num_threads(), set(tids.tolist()) == {threading.get_native_id()}, threads() - before)
  """, CPU_THREADS="1")
  assert out.split() == ["1", "True", "0"]


def test_cpu_threads_sets_the_thread_count():
  out = run_python("""
  before = threads()
  visits, tids, bad = count_visits(1_000_000, 100)
  assert (visits == 1).all() and bad == 0
  print(num_threads(), threads() - before)
  """, CPU_THREADS="3")
  assert out.split() == ["3", "2"]  # the caller and two workers


def test_a_bad_cpu_threads_is_an_error():
  code = "from tgfn_drivers._cpu_threads import num_threads; num_threads()"
  proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "CPU_THREADS": "two"})
  assert proc.returncode != 0 and "CPU_THREADS must be a whole number" in proc.stderr


def test_a_kernel_loaded_before_the_pool_runs_serially_then_on_the_pool(tmp_path):
  """A kernel library never waits for the pool: loaded while the pool is still being built (held here by
  its load lock), its parallel loop runs on the calling thread, right; once the pool is in, on the pool."""
  hold = """
  from tgfn_drivers import _cpu_threads
  _cpu_threads._load_lock.acquire()  # before the CPU device opens: its background load of the pool waits here
  """
  out = run_python("""
  import ctypes
  from tests.drivers.test_cpu_threads import KERNELS
  from tgfn_drivers.cpu import CCompiler, CPUProgram
  prog = CPUProgram("count_visits", CCompiler().compile_cached(KERNELS))
  prog.fxn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_longlong] * 2
  def run():
    visits, tids, bad = np.zeros(1_000_000, np.int32), np.zeros(1_000_000, np.int64), np.zeros(1, np.int64)
    prog.fxn(visits.ctypes.data, tids.ctypes.data, bad.ctypes.data, 1_000_000, 100)
    return (visits == 1).all() and bad[0] == 0, set(tids.tolist()) == {threading.get_native_id()}
  before = threads()
  print(_cpu_threads._pool is None, *run(), threads() - before)
  _cpu_threads._load_lock.release()
  _cpu_threads._pool_loading.result()
  print(run()[0], threads() - before)
  """, hold, CPU_THREADS="2", TGFN_CACHE_DIR=str(tmp_path))
  assert out.split() == ["True", "True", "True", "0", "True", "1"]  # then the caller and one worker


def test_a_forked_child_restarts_the_pool():
  out = run_python("""
  assert (count_visits(1_000_000, 100)[0] == 1).all()  # the parent's workers are running
  pid = os.fork()
  if pid == 0:
    before = threads()
    ok = (count_visits(1_000_000, 100)[0] == 1).all()
    os._exit(0 if ok and threads() == before + 1 else 1)  # a new worker: the parent's did not survive fork
  _, status = os.waitpid(pid, 0)
  print(os.waitstatus_to_exitcode(status), (count_visits(1_000_000, 100)[0] == 1).all())
  """, CPU_THREADS="2")
  assert out.split() == ["0", "True"]


def test_the_pool_is_built_once_a_parallel_kernel_needs_it_and_loaded_from_disk_when_the_device_opens(tmp_path):
  """A first run builds nothing when the CPU device opens: the pool is built, in the background, when the
  first library with a parallel kernel is loaded. A later run loads it from disk as the device opens."""
  first = run_python("""
  import time
  from tgfn_drivers import _cpu_threads
  import tgfn_drivers.cpu  # opening the device loads a pool from disk, and builds none
  time.sleep(0.5)
  print(_cpu_threads._pool is None, _cpu_threads._pool_loading is None)
  from tests.drivers.test_cpu_threads import KERNELS
  from tgfn_drivers.cpu import CCompiler, CPUProgram
  program = CPUProgram("k", CCompiler().compile_cached(KERNELS))  # a library with a parallel kernel
  print(_cpu_threads._pool_loading is not None, _cpu_threads._pool_loading.result() is _cpu_threads._pool)
  """, TGFN_CACHE_DIR=str(tmp_path))
  assert first.split() == ["True", "True", "True", "True"]
  again = run_python("""
  import time
  from tgfn_drivers import _cpu_threads
  import tgfn_drivers.cpu
  for _ in range(500):
    if _cpu_threads._pool is not None: break
    time.sleep(0.01)
  print(_cpu_threads._pool is not None, _cpu_threads._pool_loading is None)
  """, TGFN_CACHE_DIR=str(tmp_path))
  assert again.split() == ["True", "True"]
