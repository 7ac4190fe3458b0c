"""pmap, shard_map and jit with shardings trace once per input structure, as jit does: a repeat call with
the same shapes, dtypes and devices replays the compiled kernels (f is not called), a new shape traces
again. Counted as JAX users count traces: a Python side effect inside f runs only when f is traced."""
import time

import numpy as np

import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tgfn.engine import queues
from tgfn.sharding import NamedSharding, P, ShardedArray, make_mesh
from tgfn.transforms.jit import RETRACE_WARNING_AFTER, RetraceWarning


def _counting(f):
  calls = []
  def counted(*args):
    calls.append(1)
    return f(*args)
  return counted, calls


def test_pmap_traces_once_per_shape_and_repeats_only_launch():
  f, traces = _counting(lambda x, w: lax.psum(x @ w, "i"))
  mapped = tgfn.pmap(f, "i", in_axes=(0, None))
  w = tnp.asarray(np.eye(3, dtype=np.float32) * 2)
  for k in range(3):  # new values each call, same structure
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3) + k
    np.testing.assert_allclose(mapped(tnp.asarray(x), w).numpy(), np.stack([(x[0] + x[1]) * 2] * 2))
  assert len(traces) == 1
  x = np.ones((2, 5, 3), np.float32)  # a new shape is a miss
  np.testing.assert_allclose(mapped(tnp.asarray(x), w).numpy(), np.full((2, 5, 3), 4.0))
  assert len(traces) == 2
  mapped(tnp.asarray(x), w)
  assert len(traces) == 2


def test_pmap_over_other_devices_or_another_dtype_traces_again():
  f, traces = _counting(lambda x: lax.pmean(x, "i"))
  x = np.arange(8, dtype=np.float32).reshape(2, 4)
  np.testing.assert_allclose(tgfn.pmap(f, "i")(tnp.asarray(x)).numpy(), np.stack([x.mean(0)] * 2))
  mapped = tgfn.pmap(f, "i", devices=["CPU:2", "CPU:3"])
  mapped(tnp.asarray(x))
  mapped(tnp.asarray(x.astype(np.float64)))
  mapped(tnp.asarray(x.astype(np.float64)))
  assert len(traces) == 3


def test_shard_map_traces_once_per_shape():
  mesh = make_mesh((4,), ("i",))
  f, traces = _counting(lambda b: b - lax.pmean(b, "i"))
  mapped = tgfn.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
  for k in range(3):
    x = np.arange(16, dtype=np.float32) * (k + 1)
    want = (x.reshape(4, 4) - x.reshape(4, 4).mean(0)).reshape(-1)  # each block minus the blocks' mean
    np.testing.assert_allclose(mapped(tnp.asarray(x)).numpy(), want, rtol=1e-6)
  assert len(traces) == 1
  mapped(tnp.zeros(32))
  assert len(traces) == 2


def test_jit_with_shardings_traces_once_per_shape_and_keeps_its_layouts():
  mesh = make_mesh((2,), ("d",))
  split, replicated = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())
  f, traces = _counting(lambda x, w: tnp.tanh(x @ w))
  step = tgfn.jit(f, in_shardings=(split, replicated))
  w = np.eye(3, dtype=np.float32) / 2
  for k in range(5):  # new values each call, same structure; once both arguments come laid out, x otherwise
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10 + k
    out = step(*(tgfn.device_put(a, replicated) for a in (x, w))) if k == 2 else step(tnp.asarray(x), w)
    assert isinstance(out, ShardedArray) and out.sharding == split
    assert [b.device for b in out.blocks] == ["CPU", "CPU:1"]
    np.testing.assert_allclose(out.numpy(), np.tanh(x @ w), rtol=1e-6)
  assert len(traces) == 1
  x = np.ones((6, 3), np.float32)  # a new shape is a miss
  np.testing.assert_allclose(step(x, w).numpy(), np.tanh(x @ w), rtol=1e-6)
  step(x, w)
  assert len(traces) == 2
  by_own_layout = tgfn.jit(f, in_shardings=(None, None))  # each argument keeps its own: a new one retraces
  columns = NamedSharding(mesh, P(None, "d"))
  assert by_own_layout(tgfn.device_put(x, split), tgfn.device_put(w, replicated)).sharding == split
  wide = np.ones((3, 4), np.float32)
  out = by_own_layout(tgfn.device_put(x, replicated), tgfn.device_put(wide, columns))
  assert out.sharding == columns
  np.testing.assert_allclose(out.numpy(), np.tanh(x @ wide), rtol=1e-6)
  assert len(traces) == 4


def test_a_retrace_of_jit_with_shardings_is_reported_as_plain_jit_reports_it(monkeypatch, capsys):
  mesh = make_mesh((2,), ("d",))
  step = tgfn.jit(lambda x: x * 2, in_shardings=NamedSharding(mesh, P("d")))
  step(np.ones(4, np.float32))
  monkeypatch.setenv("DEBUG", "1")
  step(np.ones(4, np.float32))
  assert "jit call of sharded <lambda> with 2 kernel(s)" in capsys.readouterr().out
  monkeypatch.setenv("DEBUG", "0")
  monkeypatch.setenv("TGFN_LOG_COMPILES", "1")
  step(np.ones(6, np.float32))
  split = "NamedSharding(mesh={'d': 2}, spec=PartitionSpec('d'))"
  assert f"retracing because leaf 0: ((4,), 'float32', {split}) -> ((6,), 'float32', {split})" in capsys.readouterr().err
  monkeypatch.setenv("TGFN_LOG_COMPILES", "0")
  with pytest.warns(RetraceWarning, match="compiled 5 times"):
    for n in range(RETRACE_WARNING_AFTER - 1): step(np.ones(8 + 2 * n, np.float32))


def test_a_pmap_compile_is_reported_with_its_reason(monkeypatch, capsys):
  monkeypatch.setenv("TGFN_LOG_COMPILES", "1")
  mapped = tgfn.pmap(lambda x: x + 1, "i")
  for n in (3, 3, 5): mapped(tnp.ones((2, n)))
  err = capsys.readouterr().err
  assert err.count("tgfn.pmap: compiling <lambda>") == 2
  assert "retracing because leaf 0: ((2, 3), 'float32', 'CPU') -> ((2, 5), 'float32', 'CPU')" in err


def test_grad_of_a_pmap_from_outside_still_differentiates_its_graph():
  # traced inputs are not compiled: the unrolled graph joins grad's trace
  mapped = tgfn.pmap(lambda x: lax.psum(x * x, "i"), "i")
  g = tgfn.grad(lambda x: mapped(x).sum())(tnp.asarray(np.arange(4, dtype=np.float32).reshape(2, 2)))
  np.testing.assert_allclose(g.numpy(), 2 * 2 * np.arange(4, dtype=np.float32).reshape(2, 2))


def test_a_reused_storage_is_not_overwritten_while_another_device_reads_it():
  # storage 0 is read on CPU (slowly), then written on CPU:1: the write must wait for the read
  order = []
  def slow_read():
    time.sleep(0.05)
    order.append("read")
  queues.run_on_queues([("CPU:1", lambda: order.append("produce"), (), (0,)), ("CPU", slow_read, (0,), (1,)),
                        ("CPU:1", lambda: order.append("overwrite"), (), (0,))])
  assert order == ["produce", "read", "overwrite"]


def test_copies_of_a_replayed_multi_device_graph_are_timed():
  queues.CollectiveTimers.reset()
  mapped = tgfn.pmap(lambda x: lax.psum(x, "i"), "i")
  x = tnp.asarray(np.ones((4, 1000), np.float32))
  for _ in range(2): np.testing.assert_allclose(mapped(x).numpy(), np.full((4, 1000), 4.0))
  assert queues.CollectiveTimers.copies > 0 and queues.CollectiveTimers.mpi == 0
