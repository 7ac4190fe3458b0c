"""What a launch through the CPU worker pool (tgfn_drivers/_cpu_threads.py) costs, and from what amount
of work two threads pay off. Hand-written C kernels of the code generator's shape, called via ctypes:

  direct        an empty kernel that does not call the pool
  inline        tg_parallel_for with n <= grain: the body runs on the caller
  split         tg_parallel_for over 64 chunks of an empty body: the caller may take them all
                before a worker wakes (what a too-small parallel kernel costs the caller)
  join          tg_parallel_for over 2 chunks that each wait until both have started: a worker must
                run one, so this is the full wake-and-join round trip

each back-to-back and with 2 ms of idle time (time.sleep) before every call (workers asleep). Then a
memory-light body (64 dependent multiply-adds per float, 128 flops) over n floats, on the caller only
vs through the pool, for n from 2^10 to 2^22: the speedup as a function of the work per launch; and
the same for a memory-bound body (out = in * 2) from 128 KiB to 128 MiB moved.

Run: python bench/pool_overhead.py [--calls 2000] [--spin-us N]   (N: override both spin limits)
CPU_THREADS=k picks the pool size, as for tgfn.
"""
import common  # noqa: F401  (first: removes OPENBLAS_* before numpy is imported)

import argparse
import ctypes
import re
import time

import numpy as np

from common import Timing, machine_info, time_calls

KERNELS = r"""
extern void tg_parallel_for(void (*body)(void *ctx, long long lo, long long hi), void *ctx, long long n, long long grain);

static void empty_body(void *c, long long lo, long long hi) { (void)c; (void)lo; (void)hi; }
void empty_direct(void) {}
void empty_inline(void) { tg_parallel_for(empty_body, 0, 1, 1); }
void empty_split(void) { tg_parallel_for(empty_body, 0, 64, 1); }

struct join_ctx { int *arrived; int target; };
static void join_body(void *c, long long lo, long long hi) {
  struct join_ctx *a = c;
  (void)lo; (void)hi;
  __atomic_fetch_add(a->arrived, 1, __ATOMIC_ACQ_REL);
  for (long spins = 0; __atomic_load_n(a->arrived, __ATOMIC_ACQUIRE) < a->target && spins < 100000000; spins++)
    __builtin_ia32_pause();
}
void join(int *arrived) { struct join_ctx a = {arrived, *arrived + 2}; tg_parallel_for(join_body, &a, 2, 1); }

struct mad_ctx { float *x; };
static void mad_body(void *c, long long lo, long long hi) {  /* n and lo are multiples of 16 */
  float *x = ((struct mad_ctx *)c)->x;
  for (long long i = lo; i < hi; i += 16) {
    float v[16];
    for (int j = 0; j < 16; j++) v[j] = x[i + j];
    for (int k = 0; k < 64; k++) for (int j = 0; j < 16; j++) v[j] = v[j] * 0.999f + 0.001f;
    for (int j = 0; j < 16; j++) x[i + j] = v[j];
  }
}
struct scale_ctx { float *out; const float *in; };
static void scale_body(void *c, long long lo, long long hi) {
  struct scale_ctx *a = c;
  for (long long i = lo; i < hi; i++) a->out[i] = a->in[i] * 2.0f;
}
void scale_caller(float *out, const float *in, long long n) { struct scale_ctx a = {out, in}; scale_body(&a, 0, n); }
void scale_pool(float *out, const float *in, long long n) { struct scale_ctx a = {out, in}; tg_parallel_for(scale_body, &a, n, 16384); }

void mad_caller(float *x, long long n) { struct mad_ctx a = {x}; mad_body(&a, 0, n); }
void mad_pool(float *x, long long n, long long grain) { struct mad_ctx a = {x}; tg_parallel_for(mad_body, &a, n, grain); }
"""
FLOPS_PER_ELEMENT = 128
GRAIN = 1024  # 128k flops (~10 us on one core) per chunk


def after_idle(fn, calls: int, idle_s: float = 0.002) -> Timing:
  fn()
  samples = []
  for _ in range(calls):
    time.sleep(idle_s)
    t0 = time.perf_counter_ns()
    fn()
    samples.append(time.perf_counter_ns() - t0)
  return Timing(samples)


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--calls", type=int, default=2000)
  parser.add_argument("--spin-us", type=float, default=None, help="override WORKER_SPIN_NS and CALLER_SPIN_NS")
  args = parser.parse_args()

  from tgfn_drivers import _cpu_threads
  if args.spin_us is not None:
    spin = f"_SPIN_NS {int(args.spin_us * 1000)}LL"
    _cpu_threads.POOL_SOURCE = re.sub(r"#define (WORKER|CALLER)_SPIN_NS \d+LL", lambda m: f"#define {m[1]}{spin}",
                                      _cpu_threads.POOL_SOURCE)
  from tgfn_drivers.cpu import CCompiler, CPUProgram
  binary = CCompiler().compile_cached(KERNELS)
  names = ("empty_direct", "empty_inline", "empty_split", "join", "mad_caller", "mad_pool", "scale_caller", "scale_pool")
  fn = {name: CPUProgram(name, binary).fxn for name in names}
  fn["join"].argtypes = [ctypes.c_void_p]
  fn["mad_caller"].argtypes = [ctypes.c_void_p, ctypes.c_longlong]
  fn["mad_pool"].argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong]
  for name in ("scale_caller", "scale_pool"): fn[name].argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]

  print(machine_info())
  spin = re.findall(r"#define (\w+_SPIN_NS) (\d+)", _cpu_threads.POOL_SOURCE)
  print(f"pool threads {_cpu_threads.num_threads()}; {', '.join(f'{k}={v}' for k, v in spin)}")

  arrived = np.zeros(1, np.int32)
  launches = {"direct": fn["empty_direct"], "inline": fn["empty_inline"],
              "split (64 empty chunks)": fn["empty_split"],
              "join (2 chunks, both threads)": lambda: fn["join"](arrived.ctypes.data)}
  print("\nus per launch of an empty kernel (median, p10-p90)")
  print(f"  {'launch':<32} {'back-to-back':>22} {'after 2 ms idle':>22}")
  for name, launch in launches.items():
    hot, cold = time_calls(launch, args.calls, warmup=50), after_idle(launch, max(args.calls // 4, 50))
    cell = lambda t: f"{t.median / 1e3:7.2f} ({t.p10 / 1e3:.1f}-{t.p90 / 1e3:.1f})"
    print(f"  {name:<32} {cell(hot):>22} {cell(cold):>22}")

  print(f"\ncompute-bound body, {FLOPS_PER_ELEMENT} flops per float, grain {GRAIN}: caller alone vs the pool (medians)")
  print(f"  {'n':>8} {'flops/launch':>13} {'1 thread us':>12} {'pool us':>10} {'speedup':>8} {'pool after idle us':>19}")
  for log_n in range(10, 23):
    n = 1 << log_n
    x = np.ones(n, np.float32)
    reps = max(20, min(args.calls, int(2e9 / (n * FLOPS_PER_ELEMENT))))
    one = time_calls(lambda: fn["mad_caller"](x.ctypes.data, n), reps, warmup=5)
    pool = time_calls(lambda: fn["mad_pool"](x.ctypes.data, n, GRAIN), reps, warmup=5)
    idle = after_idle(lambda: fn["mad_pool"](x.ctypes.data, n, GRAIN), max(20, reps // 4))
    print(f"  {n:>8} {n * FLOPS_PER_ELEMENT:>13.3g} {one.median / 1e3:>12.1f} {pool.median / 1e3:>10.1f} "
          f"{one.median / pool.median:>8.2f} {idle.median / 1e3:>19.1f}")

  print("\nmemory-bound body, out[i] = in[i] * 2 (8 bytes moved per float), grain 16384: caller alone vs the pool")
  print(f"  {'n':>8} {'bytes/launch':>13} {'1 thread us':>12} {'pool us':>10} {'speedup':>8} {'1 thread GB/s':>14}")
  for log_n in range(14, 25, 2):
    n = 1 << log_n
    x, out = np.ones(n, np.float32), np.empty(n, np.float32)
    reps = max(20, min(args.calls, int(4e9 / (n * 8))))
    one = time_calls(lambda: fn["scale_caller"](out.ctypes.data, x.ctypes.data, n), reps, warmup=5)
    pool = time_calls(lambda: fn["scale_pool"](out.ctypes.data, x.ctypes.data, n), reps, warmup=5)
    print(f"  {n:>8} {n * 8:>13.3g} {one.median / 1e3:>12.1f} {pool.median / 1e3:>10.1f} "
          f"{one.median / pool.median:>8.2f} {n * 8 / one.median:>14.1f}")


if __name__ == "__main__":
  main()

