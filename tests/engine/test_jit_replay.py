"""The jit replay (CompiledGraph._make_replay): every call without DEBUG or DEBUG_NANS runs the generated
straight-line function -- donation included -- and gives what the generic loop of __call__ gives,
refusing the same unsafe donations."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import nn
from tgfn.device import Device
from tgfn.engine.jit import CompiledGraph
from tgfn.helpers import Context


def _graph(jitted):
  (entry,) = jitted._cache.values()
  return entry.graph


def _count_replays(graph, monkeypatch) -> list:
  calls = []
  replay = graph._replay
  monkeypatch.setattr(graph, "_replay", lambda *a: calls.append(1) or replay(*a))
  return calls


def _step(p, m, g):
  # two outputs of different shapes: two kernels, each may take over its donated input's memory (a
  # multi-output kernel may not, see CompiledGraph._reads_only_in_place)
  return p - 0.01 * g / (tnp.sqrt(g * g) + 1e-8), 0.9 * m + g.sum()


def _inputs():
  rng = np.random.default_rng(0)
  return [rng.standard_normal(n).astype(np.float32) for n in (1000, 10, 1000)]


def test_a_donating_step_takes_the_replay_and_matches_the_generic_path(monkeypatch):
  step = tgfn.jit(_step, donate_argnums=(0, 1))
  p, m, g = _inputs()
  step(tnp.array(p), tnp.array(m), tnp.array(g))  # compile
  graph = _graph(step)
  assert sorted(graph.donation.values()) == [0, 1], "the step should donate p and m to its outputs"
  replays = _count_replays(graph, monkeypatch)
  args = [tnp.array(v) for v in (p, m, g)]
  memory = [a.uop.buffer.arg for a in args[:2]]
  fast = step(*args)
  assert replays == [1]
  assert [o.uop.buffer.arg for o in fast] == memory  # updated in place
  for a in args[:2]:
    with pytest.raises(RuntimeError, match="donated"): a.numpy()
  with Context(DEBUG_NANS=1):  # the generic loop of CompiledGraph.__call__
    slow = step(*[tnp.array(v) for v in (p, m, g)])
  assert replays == [1]
  for a, b in zip(fast, slow): np.testing.assert_array_equal(a.numpy(), b.numpy())
  np.testing.assert_array_equal(args[2].numpy(), g)  # not donated: untouched


def test_the_replay_refuses_to_donate_a_buffer_passed_twice(monkeypatch):
  add = tgfn.jit(lambda a, b: a + b, donate_argnums=0)
  add(tnp.array([0.0, 0.0]), tnp.array([0.0, 0.0]))
  replays = _count_replays(_graph(add), monkeypatch)
  x = tnp.array([1.0, 2.0])
  out = add(x, x)
  assert replays == [1]
  np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
  np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])  # still usable: its memory was not given away
  assert out.uop.buffer.arg != x.uop.buffer.arg


def test_the_replay_raises_for_an_argument_donated_before(monkeypatch):
  scale = tgfn.jit(lambda w: w * 2.0, donate_argnums=0)
  w = tnp.array([1.0, 2.0])
  np.testing.assert_array_equal(scale(w).numpy(), [2.0, 4.0])
  replays = _count_replays(_graph(scale), monkeypatch)
  with pytest.raises(RuntimeError, match="donated"): scale(w)
  assert replays == [1]


def test_a_copy_between_devices_takes_the_replay(monkeypatch):
  moved = tgfn.jit(lambda x: tgfn.device_put(x * 2, "PYTHON") + 1)
  x = tnp.array(np.arange(4, dtype=np.float32))
  np.testing.assert_array_equal(moved(x).numpy(), [1.0, 3.0, 5.0, 7.0])
  graph = _graph(moved)
  assert any(program is None for program, _, _ in graph._launches), "the graph should copy between devices"
  replays = _count_replays(graph, monkeypatch)
  np.testing.assert_array_equal(moved(x * 2).numpy(), [1.0, 5.0, 9.0, 13.0])
  assert replays == [1]


def test_cpu_kernels_are_launched_as_their_ctypes_functions():
  if Device.DEFAULT != "CPU": pytest.skip("the CPU driver's launcher")
  double = tgfn.jit(lambda v: v * 2)
  double(tnp.array([1.0]))
  (kernel,) = _graph(double).kernels
  assert kernel.program.direct_launcher(2) is kernel.program.fxn
  assert kernel.program.direct_launcher(3) is kernel.program  # other argument types: the checked wrapper


def test_rebuilding_a_sequential_does_not_flatten_its_layers(monkeypatch):
  model = nn.Sequential([nn.Linear(tnp.ones((2, 3)), tnp.zeros(2)), nn.relu])
  monkeypatch.setattr(tgfn.tree, "leaves", lambda *a, **k: pytest.fail("a layer was flattened"))
  rebuilt = nn.Sequential(model.layers)  # what unflattening a jit output does
  assert [type(lay) for lay in rebuilt.layers] == [nn.Linear, nn.Lambda]


def test_the_first_call_runs_the_generic_loop_and_the_second_generates_the_replay(monkeypatch):
  made = []
  make = CompiledGraph._make_replay
  monkeypatch.setattr(CompiledGraph, "_make_replay", lambda self: made.append(1) or make(self))
  step = tgfn.jit(_step, donate_argnums=(0, 1))
  p, m, g = _inputs()
  expected = [np.asarray(v) for v in _step(tnp.array(p), tnp.array(m), tnp.array(g))]
  outs = [step(tnp.array(p), tnp.array(m), tnp.array(g))]
  assert made == [], "the first call should not wait for the straight-line replay to be generated"
  outs += [step(tnp.array(p), tnp.array(m), tnp.array(g)) for _ in range(2)]
  assert made == [1], "the second call generates it, once"
  for out in outs:
    for a, b in zip(out, expected): np.testing.assert_allclose(a.numpy(), b, rtol=1e-6)


def _mlp_step(w1, w2, x):
  # several kernels in a row (matmuls, an elementwise epilogue, a reduction), one of them with 2 outputs
  h = tnp.maximum(x @ w1, 0.0)
  y = h @ w2
  return y.sum(axis=0), tnp.tanh(y), h.mean()


def test_cpu_kernels_in_a_row_are_one_launch_batch_and_compute_what_launch_by_launch_does():
  if Device.DEFAULT != "CPU": pytest.skip("the CPU driver's launch batches")
  from tgfn_drivers import _cpu_threads
  _cpu_threads.load_pool()  # (tg_run_launches lives in the pool's library)
  rng = np.random.default_rng(0)
  args = [rng.standard_normal(s).astype(np.float32) for s in ((16, 32), (32, 8), (4, 16))]
  step = tgfn.jit(_mlp_step)
  for _ in range(3): batched = step(*[tnp.array(a) for a in args])
  graph = _graph(step)
  assert len(graph.kernels) >= 3
  batches = graph._launch_batches()
  assert [b.count for b in batches.values()] == [len(graph.kernels)], "every launch should be in one batch"
  with Context(DEBUG_NANS=1):  # launch by launch (CompiledGraph._run)
    single = step(*[tnp.array(a) for a in args])
  for a, b in zip(batched, single): np.testing.assert_array_equal(a.numpy(), b.numpy())
  for a, b in zip(batched, _mlp_step(*[tnp.array(a) for a in args])): np.testing.assert_allclose(a.numpy(), b, rtol=1e-5)


def test_the_replay_is_generated_again_once_launch_batches_can_be_made(monkeypatch):
  if Device.DEFAULT != "CPU": pytest.skip("the CPU driver's launch batches")
  from tgfn_drivers import _cpu_threads
  ready = []
  monkeypatch.setattr(_cpu_threads, "launch_runner", lambda on_ready: ready.append(on_ready) or None)
  step = tgfn.jit(_mlp_step)
  args = [tnp.ones(s) for s in ((16, 32), (32, 8), (4, 16))]
  for _ in range(2): step(*args)
  graph = _graph(step)
  assert "pack" not in " ".join(graph._replay.__code__.co_names), "no batch while the runner is not loaded"
  assert ready, "the graph should ask to hear when batches can be made"
  monkeypatch.undo()
  _cpu_threads.load_pool()
  ready[0]()  # what the pool's loader calls
  out = step(*args)
  assert any(name.startswith("pack") for name in graph._replay.__code__.co_names)
  np.testing.assert_allclose(out[2].numpy(), 16.0, rtol=1e-6)


def test_batches_arriving_before_the_first_call_leave_it_to_the_generic_loop(monkeypatch):
  made = []
  make = CompiledGraph._make_replay
  monkeypatch.setattr(CompiledGraph, "_make_replay", lambda self: made.append(1) or make(self))
  graph = CompiledGraph.__new__(CompiledGraph)
  graph._replay = graph._first_replay
  graph._batches_ready()
  assert graph._replay == graph._first_replay, "the first call should still run the generic loop"
  step = tgfn.jit(_mlp_step)
  args = [tnp.ones(s) for s in ((16, 32), (32, 8), (4, 16))]
  step(*args)
  _graph(step)._batches_ready()
  step(*args)
  assert made == [1], "the second call generates the replay, once"


def test_a_kernel_with_a_scalar_parameter_or_too_many_pointers_is_launched_on_its_own(monkeypatch):
  if Device.DEFAULT != "CPU": pytest.skip("the CPU driver's launch batches")
  from collections import OrderedDict
  from tgfn.engine import realize as realize_mod
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())  # this test's kernels only
  from tgfn_drivers import _cpu_threads
  double = tgfn.jit(lambda v: v * 2)
  double(tnp.array([1.0]))
  (kernel,) = _graph(double).kernels
  assert kernel.program.batch_address(2) is not None
  assert kernel.program.batch_address(_cpu_threads.MAX_BATCH_ARGS + 1) is None
  x = tnp.array([1.0, 2.0])
  np.testing.assert_array_equal(np.asarray(x * 2.5), [2.5, 5.0])  # eager: 2.5 is the kernel's scalar parameter
  scaled = [k for k in realize_mod._compiled.values() if k.device == "CPU" and k.lowered is not None and k.lowered.params]
  assert scaled and all(k.program.batch_address(2) is None for k in scaled)
  kernel.program.provisional = True
  try:
    assert kernel.program.batch_address(2) is None  # a quick build is called through itself (its upgrade)
  finally:
    kernel.program.provisional = False
