"""DEV=OPENCL against the PYTHON reference interpreter: a broad sample of the op suite
(tests/drivers/backend_cases.py) runs on both and must agree -- bit for bit, but for libm-level functions
and the float policy's fused reductions. Skipped where no OpenCL runtime is installed (CI installs PoCL,
.ci/run)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
from tgfn.engine import realize as realize_mod
from tests.drivers.backend_cases import APPROXIMATE, CASES, assert_agree, reference, run_case


def _opencl_or_skip() -> None:
  from tgfn_drivers import opencl
  try:
    opencl.runtime()
  except opencl.OpenCLUnavailable as e:
    pytest.skip(str(e))


@pytest.mark.parametrize("name", list(CASES))
def test_opencl_matches_the_reference(name: str, monkeypatch) -> None:
  _opencl_or_skip()
  want, _ = reference(name, monkeypatch)
  got = run_case(name, "OPENCL", monkeypatch)
  assert len(got) == len(want)
  for i, (g, w) in enumerate(zip(got, want)): assert_agree(g, w, name in APPROXIMATE, f"{name} output {i}")


def test_kernels_use_global_ids(monkeypatch) -> None:
  """The output axes of an elementwise kernel are the launch grid, innermost first; a reduction loops."""
  _opencl_or_skip()
  monkeypatch.setenv("DEV", "OPENCL")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  import tgfn.numpy as tnp
  (tnp.ones((3, 5, 7)) * 2 + tnp.ones((3, 5, 7))).sum(2).numpy()
  sources = [c.source for c in realize_mod._compiled.values()]
  assert any(s.startswith("// tgfn launch: global=5,3,1") and "get_global_id(1)" in s and "for (" in s for s in sources), sources
  assert all("#pragma OPENCL FP_CONTRACT OFF" in s for s in sources)


def test_unavailable_runtime_says_what_to_install(monkeypatch) -> None:
  from tgfn_drivers import opencl
  monkeypatch.setattr(opencl.ctypes.util, "find_library", lambda name: "/nonexistent/libOpenCL.so")
  with pytest.raises(opencl.OpenCLUnavailable, match="apt-get install pocl-opencl-icd"):
    opencl._Runtime()  # what runtime() starts once per process


def test_device_is_listed() -> None:
  assert tgfn.Device.canonicalize("opencl") == "OPENCL"


def test_values_move_between_devices() -> None:
  _opencl_or_skip()
  import tgfn.numpy as tnp
  on_device = tgfn.device_put(tnp.arange(6.0) * 2, "OPENCL")
  back = tgfn.device_put(on_device + 1, "CPU")
  assert (on_device + 1).device == "OPENCL" and back.device == "CPU"
  assert np.asarray(back * 3).tolist() == [3.0, 9.0, 15.0, 21.0, 27.0, 33.0]


def test_block_until_ready_waits_for_the_queue(monkeypatch) -> None:
  """OpenCL launches return before the kernel ends: block_until_ready must finish the queue, or a timing
  taken after it measures only the launch."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  device, finished = tgfn.Device["OPENCL"], []
  monkeypatch.setattr(device, "synchronize", lambda real=device.synchronize: (real(), finished.append(True)))
  x = tgfn.device_put(tnp.arange(6.0), "OPENCL")
  (x * 2).block_until_ready()
  tgfn.block_until_ready({"y": x + 1})
  assert finished == [True, True]


def test_values_from_constants_run_where_the_inputs_live(monkeypatch) -> None:
  """Arrays on the CPU, OPENCL the default device: a gradient's constant-only pieces (the seed 1.0, a
  broadcast zero) ran on OPENCL and their cl_mem handles went to CPU kernels as pointers (garbage, -1.6e13)."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  x = tnp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
  t, w, b = tnp.array([True, True, False, True]), tnp.array([0.3, -0.2, 0.5]), tnp.array(0.1)
  def loss(w, b):  # the JAX quickstart's logistic regression
    p = 0.5 * (tnp.tanh((tnp.dot(x, w) + b) / 2) + 1)
    return -tnp.sum(tnp.log(p * t + (1 - p) * (1 - t)))
  monkeypatch.setenv("DEV", "OPENCL")
  got = tgfn.grad(loss, (0, 1))(w, b)[1]
  assert got.device == "CPU" and float(np.asarray(got)) == pytest.approx(-0.519425873515188, rel=1e-5)


def test_threads_starting_opencl_at_once_share_one_runtime(monkeypatch) -> None:
  """Two runtimes would be two contexts, with one thread's buffers passed to the other's kernels (the
  threaded jit test got wrong values on OPENCL). A slow start makes the race certain without the lock."""
  import threading
  import time
  from tgfn_drivers import opencl
  made = []
  def slow_start() -> object:
    time.sleep(0.05)
    made.append(object())
    return made[-1]
  monkeypatch.setattr(opencl, "_Runtime", slow_start)
  monkeypatch.setattr(opencl, "_runtime", [])
  got, start = [], threading.Barrier(4)
  def ask() -> None:
    start.wait()
    got.append(opencl.runtime())
  threads = [threading.Thread(target=ask) for _ in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert len(made) == 1 and all(r is made[0] for r in got)


def test_a_jitted_function_builds_as_one_program(monkeypatch) -> None:
  _opencl_or_skip()
  from tgfn_drivers import opencl
  import tgfn.numpy as tnp
  monkeypatch.setenv("DEV", "OPENCL")
  monkeypatch.setenv("TGFN_DISABLE_COMPILER_CACHE", "1")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  builds = []
  monkeypatch.setattr(opencl.CLCompiler, "compile", lambda self, src, real=opencl.CLCompiler.compile: (builds.append(src), real(self, src))[1])
  step = tgfn.jit(lambda x: ((x * 2).sum(0), tnp.exp(x).max(1), x.T @ x))
  outs = step(tnp.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4) / 10))
  assert len(builds) == 1 and builds[0].count("__kernel void") == 3, f"{len(builds)} builds"
  np.testing.assert_allclose(np.asarray(outs[2]), (np.arange(12.0).reshape(3, 4) / 10).T @ (np.arange(12.0).reshape(3, 4) / 10), rtol=1e-6)


def _lax_loops() -> dict:
  """A scan with xs and ys (forward, reverse, under jit, over int8 slices of odd byte sizes), a while_loop, a
  fori_loop and a gradient through a scan: their bodies read and write slices of the stacked buffers."""
  import tgfn.numpy as tnp
  from tgfn import lax
  rng = np.random.default_rng(3)
  xs, w = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(3, 3)).astype(np.float32)
  codes = rng.integers(-100, 100, size=(4, 3)).astype(np.int8)
  step = lambda c, x: (tnp.tanh(c @ tnp.asarray(w) + x), c * x)
  scan = lambda reverse: lambda: lax.scan(step, tnp.ones(3), tnp.asarray(xs), reverse=reverse)
  loss = lambda x: lax.scan(lambda c, v: (tnp.sin(c * v), c * v), x, tnp.asarray(xs))[1].sum()
  return {
    "scan": scan(False), "reverse_scan": scan(True),
    "jit_scan": lambda: tgfn.jit(lambda x: lax.scan(step, x, tnp.asarray(xs)))(tnp.ones(3)),
    "int8_scan": lambda: lax.scan(lambda c, x: (c + x, x * 3 - c), tnp.zeros(3, "int8"), tnp.asarray(codes)),
    "while_loop": lambda: lax.while_loop(lambda c: c[1] < 7, lambda c: (c[0] * 1.5 + 1, c[1] + 1),
                                         (tnp.asarray(xs[0]), tnp.asarray(0))),
    "fori_loop": lambda: lax.fori_loop(0, 6, lambda i, c: c * 0.5 + tnp.asarray(xs)[i], tnp.zeros(3)),
    "grad_scan": lambda: tgfn.jit(tgfn.grad(loss))(tnp.asarray(xs[1])),
  }


@pytest.mark.parametrize("name", list(_lax_loops()))
def test_lax_loop_bodies_match_the_reference(name: str, monkeypatch) -> None:
  """OpenCL buffers (cl_mem) are not addresses, so a loop body's slices are staged through scratch buffers
  by device-side region copies (clEnqueueCopyBuffer); the values must be the reference's."""
  _opencl_or_skip()
  results = {}
  for dev in ("PYTHON", "OPENCL"):
    monkeypatch.setenv("DEV", dev)
    results[dev] = [np.asarray(leaf) for leaf in tgfn.tree.leaves(_lax_loops()[name]())]
  for got, want in zip(results["OPENCL"], results["PYTHON"], strict=True):
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=name)  # tanh and sin: the platform's


def test_loop_slices_are_staged_with_region_copies(monkeypatch) -> None:
  """OpenCL has no buffer views: a 4-step scan copies each x slice in and each y slice back, 4 + 4 copies."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  from tgfn import lax
  from tgfn_drivers import opencl
  monkeypatch.setenv("DEV", "OPENCL")
  assert not tgfn.Device["OPENCL"].address_handles
  copies = []
  real = opencl.CLAllocator.copy_region
  monkeypatch.setattr(opencl.CLAllocator, "copy_region", lambda self, *a: (copies.append((a[1], a[3], a[4])), real(self, *a)))
  carry, ys = lax.scan(lambda c, x: (c + x, c * x), tnp.zeros(3), tnp.arange(12.0, dtype="float32").reshape(4, 3))
  assert ys.numpy().tolist() == [[0, 0, 0], [0, 4, 10], [18, 35, 56], [81, 120, 165]] and carry.numpy().tolist() == [18, 22, 26]
  assert sorted(copies) == sorted([(0, 12 * i, 12) for i in range(4)] + [(12 * i, 0, 12) for i in range(4)])


def test_kernels_run_in_work_groups_from_a_local_axis(monkeypatch) -> None:
  """The heuristic gives a GPU-style renderer one opt, LOCAL on the innermost output axis: the kernel index is
  group id * 64 + local id, the launch line states the work-group size, the driver passes it to
  clEnqueueNDRangeKernel, and an axis of 100 (not a multiple of 64) returns past its end."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  from tgfn_drivers import opencl
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  launched = []
  real = opencl.CLProgram.__call__
  monkeypatch.setattr(opencl.CLProgram, "__call__", lambda self, *a: (launched.append(self), real(self, *a))[1])
  x = np.arange(300, dtype=np.float32).reshape(3, 100) / 7
  results = {}
  for dev in ("PYTHON", "OPENCL"):
    monkeypatch.setenv("DEV", dev)
    results[dev] = np.asarray(tnp.sqrt(tnp.asarray(x)) * 3 + 1)
  np.testing.assert_array_equal(results["OPENCL"], results["PYTHON"])
  (kernel,) = [k for k in realize_mod._compiled.values() if k.device == "OPENCL"]
  assert [str(o) for o in kernel.opts] == ["Opt(LOCAL, 1, 64)"], kernel.opts
  assert kernel.source.startswith("// tgfn launch: global=128,3,1 local=64,1,1\n"), kernel.source
  assert "get_group_id(0) * 64 + get_local_id(0)" in kernel.source and ">= 100) return;" in kernel.source
  assert [(tuple(p.global_size), tuple(p.local_size)) for p in launched] == [((128, 3, 1), (64, 1, 1))]


def test_the_local_opt_is_checked() -> None:
  """LOCAL takes one output axis, once, with a group no longer than the axis; a renderer without work groups
  (the CPU's C) refuses a LOCAL axis instead of looping over it unguarded."""
  from tgfn.codegen.opts import Opt, OptError, OptOps, apply_opts
  from tgfn.codegen.pipeline import optimize
  from tgfn.renderer.cstyle import CStyleRenderer, OpenCLRenderer, local_sizes
  from tgfn.uop.ops import AxisType, Ops, UOp
  from tgfn.dtype import dtypes
  out, a = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 0), UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 1)
  i, j, r = UOp.range(6, 0, AxisType.GLOBAL), UOp.range(10, 1, AxisType.GLOBAL), UOp.range(4, 2, AxisType.REDUCE)
  load = UOp(Ops.LOAD, dtypes.float32, (a, (i * 10 + j) * 4 + r))
  ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, i * 10 + j, UOp(Ops.REDUCE, dtypes.float32, (load, r), Ops.ADD))),))
  for bad in ([Opt(OptOps.LOCAL, 2, 2)], [Opt(OptOps.LOCAL, 1, 11)], [Opt(OptOps.LOCAL, 1, 4), Opt(OptOps.LOCAL, 0, 2)],
              [Opt(OptOps.LOCAL, 1, 4), Opt(OptOps.UPCAST, 1, 2)]):
    with pytest.raises(OptError): apply_opts(ast, bad)
  program = optimize(ast, [Opt(OptOps.LOCAL, 1, 4)])
  source = OpenCLRenderer().render("k", program, [dtypes.float32] * 2)
  assert local_sizes(source) == {"k": (4, 1, 1)} and source.startswith("// tgfn launch: global=12,6,1 local=4,1,1")
  with pytest.raises(NotImplementedError, match="LOCAL axis"): CStyleRenderer().render("k", program, [dtypes.float32] * 2)


def test_a_jitted_call_body_with_constants_runs_where_its_inputs_live(monkeypatch) -> None:
  """Arrays on the CPU, OPENCL the default device: the constant-only values of a jitted gradient through a
  custom_vjp (its seed, the clip bounds) must be computed on the CPU too. On the default device, a CPU kernel
  read an OpenCL cl_mem handle as an address and returned garbage."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  monkeypatch.setenv("DEV", "OPENCL")
  clip = tgfn.custom_vjp(lambda x, lo, hi: x)
  clip.defvjp(lambda x, lo, hi: (x, (lo, hi)), lambda res, g: (tnp.clip(g, res[0], res[1]), None, None))
  f = lambda x: clip(x * 10.0, -1.0, 1.0).sum() * 5.0
  x = tgfn.device_put(tnp.asarray(np.arange(4.0)), "CPU")
  got = tgfn.jit(tgfn.grad(f))(x)
  assert got.device == "CPU" and np.asarray(got).tolist() == [10.0] * 4


def test_a_loop_body_runs_on_its_calls_device(monkeypatch) -> None:
  """A fori_loop's body traced with a counter made on the default device (OPENCL) runs on the device of the
  call (CPU, where the input lives): the body is compiled for that device, so no OpenCL kernel is handed CPU
  buffers."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  from tgfn import lax
  f = lambda x: lax.fori_loop(0, 4, lambda i, v: v * tnp.sin(v) + i, x)
  x = np.arange(3.0) / 4
  monkeypatch.setenv("DEV", "PYTHON")
  want = [np.asarray(v) for v in tgfn.jvp(f, (tnp.asarray(x),), (tnp.asarray(x),))]
  monkeypatch.setenv("DEV", "OPENCL")
  on_cpu = tgfn.device_put(tnp.asarray(x), "CPU")
  got = tgfn.jvp(f, (on_cpu,), (on_cpu,))
  assert [v.device for v in got] == ["CPU", "CPU"]
  for g, w in zip(got, want): np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12)


def test_while_loop_carry_stays_on_the_device(monkeypatch) -> None:
  """A while_loop reads its predicate on the host once per test (101 times for 100 trips), but its carry never
  leaves the device: the final carry is a device-side copy, and reading the results is one copy per leaf."""
  _opencl_or_skip()
  import tgfn.numpy as tnp
  from tgfn import lax
  from tgfn_drivers import opencl
  monkeypatch.setenv("DEV", "OPENCL")
  copied_out = []
  real = opencl.CLAllocator.copyout
  monkeypatch.setattr(opencl.CLAllocator, "copyout", lambda self, h, n: (copied_out.append(n), real(self, h, n))[1])
  for trips in (100, 101):  # the carry ends in the output buffers or in the scratch set
    copied_out.clear()
    i, x = lax.while_loop(lambda c: c[0] < trips, lambda c: (c[0] + 1, c[1] * 0.5 + 1),
                          (tnp.asarray(0, "int32"), tnp.zeros(1000)))
    tgfn.Array.realize_all([i, x])
    assert len(copied_out) == trips + 1 and set(copied_out) == {1}, (trips, copied_out[-3:])  # the predicates
    assert int(i) == trips and np.asarray(x)[0] == np.float32(2 - 2.0 ** (1 - trips))
    assert len(copied_out) == trips + 3
