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
