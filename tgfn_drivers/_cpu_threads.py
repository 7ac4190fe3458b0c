"""The CPU driver's worker pool: generated kernels split a parallel axis with `tg_parallel_for`.

A kernel that wants more than one core calls

  void tg_parallel_for(void (*body)(void *ctx, long long lo, long long hi), void *ctx, long long n, long long grain);

which runs `body` over [0, n) in chunks and returns when every chunk is done. The pool is C (below),
compiled once with the kernels' compiler and flags and loaded with RTLD_GLOBAL (hand-written C may
declare `tg_parallel_for` extern and resolve against it).

Generated kernels never wait for the pool. Their C (tgfn/renderer/cstyle.py, THREAD_PRELUDE) calls
`tg_parallel_for` through a pointer of their own library that starts at a serial loop, body(ctx, 0, n),
and the library exports `tg_use_pool` to point it at the pool. A library loaded before the pool is
ready is handed it when it is (`when_pool_ready`). Opening the CPU device loads the pool if it is on
disk; one that is not is built when the first library with a parallel kernel is loaded, in the
background at a lower CPU priority, while those kernels run on one thread: a cold first call does not
share its cores with the pool's build (~0.1 s of compiler time) nor wait for it.

Threads: `CPU_THREADS` (a positive integer) if set, else the CPUs this process may run on
(sched_getaffinity). The caller is one of them: the pool starts `threads - 1` workers, lazily, on the
first launch that splits. Chunks are handed out through an atomic counter and the caller takes chunks
too, so a slow (descheduled) thread delays the launch by at most one chunk. Each chunk is a multiple
of `grain` items (the last one may be shorter) and starts at a multiple of it; at most 32 chunks per
thread, so a tiny grain does not turn into millions of atomic increments.

Runs inline, as body(ctx, 0, n) on the calling thread, when n <= grain, when there is one thread, and
when the pool is busy: another thread's launch is in flight, or the call is nested inside a body.
Nothing ever waits for the pool to become free, so there is no deadlock and no thread per launch.

Idle workers poll for the next launch for 200 µs, then sleep on a condition variable: the poll keeps
a worker hot across launches (a launch both threads must join: 3.7 µs, against 24 µs to 16 ms without
it on a loaded machine), and stays short because a spinning thread takes CPU time from other processes
when cores are shared. 200 µs covers the gaps of small kernels between a training step's parallel
matmuls (the MLP step: 50-270 µs); with 20 µs the worker slept before most of them and the step ran
3.5% slower (median of 12 pairs of alternating fresh processes).
A forked child resets the pool (its workers did not survive the fork) and starts new ones on use.

When to call the pool (the code generator's threshold). Measured with bench/pool_overhead.py:
- an empty launch costs 0.25 µs inline, 0.4 µs split (the caller takes every chunk before a worker
  wakes), 3.7 µs when a hot worker must join; after 2 ms idle the worker sleeps and joining it costs
  20-35 µs on a quiet machine (shared/notes/cpu-kernels.md) and up to milliseconds on a loaded one;
- a woken worker that is late costs little, because the caller keeps taking chunks, but a worker
  descheduled in the middle of a chunk delays the launch by the rest of that chunk;
- with the cores busy with other work, 2 threads gain nothing (Linux gives each session a share,
  not each thread), and the pool cost 0-15% on kernels from 25 µs to 300 ms; on a quiet machine two
  threads paid off from about 1 ms of work with a plain condition-variable pool (notes); from the
  overheads above this pool should break even near 100 µs (an estimate: not measurable under load).
So: call tg_parallel_for only for kernels of at least ~250 µs of single-thread work, which for the
code generator's estimates is PARALLEL_MIN_FLOPS for compute-bound loops at ~5-10 GFLOP/s per core
(elementwise and reductions; a register-tiled matmul runs ~10x faster per flop, so use ~10x more),
or PARALLEL_MIN_BYTES moved for memory-bound loops (~10 GB/s per core). Below that, run the loop
directly. Choose `grain` so that one chunk is at least ~10 µs of work (~50,000 flops or ~100 KB), and
a multiple of the vector width.
"""
from __future__ import annotations

import ctypes
import os
import tempfile
import threading
import weakref
from concurrent.futures import Future
from typing import Any, Optional

# Work per launch below which a kernel should not call the pool at all (see the docstring).
PARALLEL_MIN_FLOPS = 2_000_000
PARALLEL_MIN_BYTES = 2_500_000

POOL_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*tg_body)(void *ctx, long long lo, long long hi);

#define CHUNKS_PER_THREAD 32
#define WORKER_SPIN_NS 200000LL  /* a worker polls this long for the next launch before it sleeps */
#define CALLER_SPIN_NS 20000LL  /* the caller polls this long for the last chunks before it sleeps */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int sleepers, caller_waiting;  /* guarded by lock */
static atomic_flag busy = ATOMIC_FLAG_INIT;  /* held by the one launch that uses the workers */
static _Atomic int thread_count;  /* 0 until first asked */
static int workers_started;       /* touched only while holding busy */

/* The launch in flight. Written by its caller before it publishes `ticket`; a worker reads it only
   after claiming a chunk, and the launch cannot finish (and be overwritten) before that chunk is done. */
static tg_body job_body;
static void *job_ctx;
static long long job_n, job_chunk;
static _Atomic unsigned long long ticket;  /* (number of chunks << 32) | next chunk to hand out */
static _Atomic long long chunks_done;

static int count_threads(void) {
  const char *env = getenv("CPU_THREADS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end == 0 && v >= 1 && v <= 4096) return (int)v;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

int tg_num_threads(void) {
  int n = atomic_load_explicit(&thread_count, memory_order_relaxed);
  if (n == 0) { n = count_threads(); atomic_store_explicit(&thread_count, n, memory_order_relaxed); }
  return n;
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int has_work(void) {
  unsigned long long t = atomic_load_explicit(&ticket, memory_order_relaxed);
  return (t & 0xffffffffULL) < (t >> 32);
}

/* Claim and run chunks until none is left; then count them done (once, so a launch in flight
   cannot finish between two of them) and wake the caller if this finished the launch. */
static void run_chunks(int is_caller) {
  long long mine = 0, total = 0;
  for (;;) {
    unsigned long long t = atomic_fetch_add_explicit(&ticket, 1, memory_order_acquire);
    long long i = (long long)(t & 0xffffffffULL);
    total = (long long)(t >> 32);
    if (i >= total) break;
    long long lo = i * job_chunk, hi = lo + job_chunk < job_n ? lo + job_chunk : job_n;
    job_body(job_ctx, lo, hi);
    mine++;
  }
  if (mine == 0) return;
  long long done = atomic_fetch_add_explicit(&chunks_done, mine, memory_order_acq_rel) + mine;
  if (done == total && !is_caller) {
    pthread_mutex_lock(&lock);
    if (caller_waiting) pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&lock);
  }
}

static void *worker_main(void *unused) {
  (void)unused;
#ifdef __linux__
  pthread_setname_np(pthread_self(), "tgfn-worker");  /* what top -H and /proc/<pid>/task/<tid>/comm show */
#endif
  for (;;) {
    run_chunks(0);
    long long deadline = now_ns() + WORKER_SPIN_NS;
    while (!has_work() && now_ns() < deadline) for (int k = 0; k < 64; k++) cpu_relax();
    if (has_work()) continue;
    pthread_mutex_lock(&lock);
    while (!has_work()) { sleepers++; pthread_cond_wait(&work_cv, &lock); sleepers--; }
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

/* Start the workers; returns how many run (fewer than asked if the system refuses threads). */
static int start_workers(int wanted) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;  /* workers block signals: they belong to the threads that run Python */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int started = 0;
  for (; started < wanted; started++) {
    pthread_t tid;
    if (pthread_create(&tid, &attr, worker_main, NULL) != 0) break;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return started;
}

void tg_parallel_for(tg_body body, void *ctx, long long n, long long grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain || tg_num_threads() == 1 || atomic_flag_test_and_set_explicit(&busy, memory_order_acquire)) {
    body(ctx, 0, n);
    return;
  }
  if (workers_started == 0) workers_started = start_workers(tg_num_threads() - 1);
  if (workers_started == 0) {
    atomic_flag_clear_explicit(&busy, memory_order_release);
    body(ctx, 0, n);
    return;
  }
  long long pieces = (n + grain - 1) / grain, most = (long long)CHUNKS_PER_THREAD * (workers_started + 1);
  long long chunk = grain * ((pieces + most - 1) / most), chunks = (n + chunk - 1) / chunk;
  job_body = body, job_ctx = ctx, job_n = n, job_chunk = chunk;
  atomic_store_explicit(&chunks_done, 0, memory_order_relaxed);
  atomic_store_explicit(&ticket, (unsigned long long)chunks << 32, memory_order_release);
  pthread_mutex_lock(&lock);
  for (int k = 0; k < sleepers && k < chunks - 1; k++) pthread_cond_signal(&work_cv);
  pthread_mutex_unlock(&lock);

  run_chunks(1);
  long long deadline = now_ns() + CALLER_SPIN_NS;
  while (atomic_load_explicit(&chunks_done, memory_order_acquire) < chunks && now_ns() < deadline)
    for (int k = 0; k < 64; k++) cpu_relax();
  if (atomic_load_explicit(&chunks_done, memory_order_acquire) < chunks) {
    pthread_mutex_lock(&lock);
    caller_waiting = 1;
    while (atomic_load_explicit(&chunks_done, memory_order_acquire) < chunks) pthread_cond_wait(&done_cv, &lock);
    caller_waiting = 0;
    pthread_mutex_unlock(&lock);
  }
  atomic_flag_clear_explicit(&busy, memory_order_release);
}

/* fork: the child has only the forking thread. Hold the lock across fork so the child never copies
   it mid-update, then give the child a fresh pool that starts its own workers on first use. */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&work_cv, NULL);
  pthread_cond_init(&done_cv, NULL);
  sleepers = caller_waiting = 0;
  workers_started = 0;
  atomic_store(&ticket, 0);
  atomic_store(&chunks_done, 0);
  atomic_flag_clear(&busy);
}

__attribute__((constructor)) static void register_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
"""


# The same library runs a jitted graph's kernels one after another in one foreign call (tg_run_launches):
# a ctypes call costs ~0.7 us of Python, 22 us for the 32 launches of the main job's step. Each launch
# is (function, number of pointer arguments, where its argument indices start); kernels take only
# pointers, so one case per argument count calls any of them with its own prototype.
MAX_BATCH_ARGS = 32


def _runner_source(max_args: int) -> str:
  cases = []
  for n in range(1, max_args + 1):
    params = ", ".join(["void *"] * n)
    args = ", ".join(f"ptr[a[{i}]]" for i in range(n))
    cases.append(f"    case {n}: ((void (*)({params}))f)({args}); break;")
  return ("\ntypedef struct { void *fn; int nargs; int first; } tg_launch;\n"
          "void tg_run_launches(const tg_launch *launch, int n, void *const *ptr, const int *arg) {\n"
          "  for (int i = 0; i < n; i++) {\n"
          "    const int *a = arg + launch[i].first;\n"
          "    void *f = launch[i].fn;\n"
          "    switch (launch[i].nargs) {\n" + "\n".join(cases) + "\n    }\n  }\n}\n")


LIBRARY_SOURCE = POOL_SOURCE + _runner_source(MAX_BATCH_ARGS)

_load_lock = threading.Lock()
_start_lock = threading.Lock()
_pool_loading: Optional[Future] = None  # the background load's end, once started
_pool: Optional[ctypes.CDLL] = None  # kept for the process lifetime: kernels resolve against it
_users_lock = threading.Lock()
_waiting_users: list[weakref.ref] = []  # kernel libraries loaded before the pool, to be handed it (guarded)
_waiting_runners: list[weakref.WeakMethod] = []  # callbacks for when tg_run_launches is loaded (guarded)


def _check_cpu_threads() -> None:
  value = os.environ.get("CPU_THREADS")
  if value is None or value == "": return
  if not value.isdigit() or not 1 <= int(value) <= 4096:
    raise ValueError(f"CPU_THREADS must be a whole number of threads from 1 to 4096, got {value!r}")


def load_pool() -> ctypes.CDLL:
  """Compile (once, disk-cached) and load the pool with RTLD_GLOBAL; later calls return the same library."""
  pool = _load_pool(compile=True)
  assert pool is not None  # (compiled if not on disk)
  return pool


def load_pool_in_background() -> Future:
  """`load_pool` on a thread of its own, started once, a build at a lower CPU priority (the first library
  with a parallel kernel starts it, when_pool_ready); the future of its end. Not a daemon: the interpreter
  waits for it at exit, so a short program leaves the pool on disk for the next one (and no compiler
  running behind it)."""
  global _pool_loading
  with _start_lock:
    if _pool_loading is None:
      _pool_loading = Future()
      threading.Thread(target=_load_into, args=(_pool_loading,), name="tgfn-pool-load").start()
  return _pool_loading


def load_cached_pool_in_background() -> None:
  """When the CPU device opens: load the pool on a thread if it is on disk (milliseconds). A pool not on
  disk is built only once a kernel library needs it, after its batch has compiled (when_pool_ready): a
  cold first call shares its two cores with no one (the pool's build is ~0.1 s of compiler time)."""
  def load() -> None:
    try:
      _load_pool(compile=False)
    except BaseException:  # (a bad CPU_THREADS: raised again, in the caller's thread, by the load that builds)
      pass
  threading.Thread(target=load, name="tgfn-pool-load-cached", daemon=True).start()


def _load_into(future: Future) -> None:
  try:
    future.set_result(_load_pool(compile=True, background=True))
  except BaseException as e:  # kernels keep running on one thread; whoever waits on the future sees why
    future.set_exception(e)
    from tgfn.device import warn_once
    warn_once("pool", f"the CPU worker pool could not be built ({e}); kernels run on one thread")


def when_pool_ready(library: Any) -> None:
  """Call `library.use_pool(address of tg_parallel_for)` now if the pool is loaded, else as soon as it
  is (from the thread that loads it). The library is held weakly meanwhile: one unloaded before then is
  skipped."""
  _check_cpu_threads()  # a bad CPU_THREADS is the caller's error, not a pool that quietly never comes
  with _users_lock:
    if _pool is None:
      _waiting_users.append(weakref.ref(library))
      load_pool_in_background()
      return
  library.use_pool(_parallel_for_address())


def launch_runner(on_ready: Any) -> Optional[Any]:
  """tg_run_launches (its argument types set) if the library is loaded; else None, the library is loaded
  in the background, and `on_ready` (a bound method, held weakly) is called once it is."""
  with _users_lock:
    if _pool is None:
      _waiting_runners.append(weakref.WeakMethod(on_ready))
      load_pool_in_background()
      return None
  return _pool.tg_run_launches


def _parallel_for_address() -> int:
  return ctypes.cast(_pool.tg_parallel_for, ctypes.c_void_p).value  # type: ignore[union-attr, return-value]


def _hand_over() -> None:
  """Point every library that waited for the pool at it (the pool has just been loaded)."""
  with _users_lock:
    waiting, runners = _waiting_users[:], _waiting_runners[:]
    _waiting_users.clear()
    _waiting_runners.clear()
  address = _parallel_for_address()
  for ref in waiting:
    if (library := ref()) is not None: library.use_pool(address)
  for method in runners:
    if (ready := method()) is not None: ready()


# the pool links libm (the kernels link no libraries, cpu.KERNEL_LINK: their libm calls resolve against the
# process's global scope, where cpu._load_libm puts it, and where this library's libm is too once it is in)
POOL_LINK = ("-Wl,--no-as-needed", "-lm")


def _load_pool(compile: bool, background: bool = False) -> Optional[ctypes.CDLL]:
  """The loaded pool; built if not on disk and `compile` (a `background` build runs at a lower CPU
  priority), else None."""
  global _pool
  if _pool is not None: return _pool
  with _load_lock:
    if _pool is None:
      _check_cpu_threads()
      from tgfn_drivers.cpu import CCompiler  # imported here: cpu.py imports this module
      compiler = CCompiler()
      compiler.extra_flags = ("-pthread",)
      compiler.link_flags = POOL_LINK
      binary = compiler.cached(LIBRARY_SOURCE)
      if binary is None and compile:
        binary = compiler.compile(LIBRARY_SOURCE, background=background)
        compiler.store(LIBRARY_SOURCE, binary)
      if binary is None: return None
      with tempfile.NamedTemporaryFile(prefix="tgfn-pool-", suffix=".so") as f:
        f.write(binary)
        f.flush()
        lib = ctypes.CDLL(f.name, mode=ctypes.RTLD_GLOBAL)  # never closed, so the mapping stays
      lib.tg_num_threads.restype, lib.tg_num_threads.argtypes = ctypes.c_int, []
      lib.tg_run_launches.restype = None
      lib.tg_run_launches.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
      _pool = lib
      _hand_over()
  return _pool


def num_threads() -> int:
  """The threads a parallel kernel launch uses, the caller included (fixed at the first launch)."""
  return int(load_pool().tg_num_threads())
