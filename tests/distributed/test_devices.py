"""Device instances: CPU:0..N-1 are distinct devices with a queue each; copies between them are direct."""
import threading

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.device import Buffer, Device
from tgfn.engine import queues


def test_instances_are_distinct_devices_and_listed():
  assert [d.name for d in tgfn.devices()] == ["CPU", "CPU:1", "CPU:2", "CPU:3"]
  assert [d.id for d in tgfn.local_devices()] == [0, 1, 2, 3]
  assert tgfn.device_count() == 4 and tgfn.process_count() == 1 and tgfn.process_index() == 0
  assert Device.canonicalize("cpu:0") == "CPU" and Device.canonicalize("CPU:2") == "CPU:2"
  assert Device["CPU:3"] is Device["CPU"]  # one driver: allocator, compiler and kernels shared


def test_one_device_by_default(monkeypatch):
  monkeypatch.delenv("TGFN_CPU_DEVICES")
  assert [d.name for d in tgfn.devices()] == ["CPU"]
  with pytest.raises(ValueError, match="has 1 CPU device"): tgfn.device_put(tnp.ones(2), "CPU:1")


@pytest.mark.parametrize("bad, message", [("CPU:4", "does not exist"), ("CPU:x", "must be a number")])
def test_bad_device_names_are_errors(bad, message):
  with pytest.raises(ValueError, match=message): Device.canonicalize(bad)


def test_device_put_between_instances_keeps_values_and_follows_the_data():
  a = tnp.arange(12.0).reshape(3, 4)
  b = tgfn.device_put(a, "CPU:2")
  assert b.device == "CPU:2" and (b * 2).device == "CPU:2"
  c = tgfn.device_put(tgfn.device_put(b * 2, tgfn.devices()[1]), "CPU")
  np.testing.assert_array_equal(c.numpy(), np.arange(12.0).reshape(3, 4) * 2)
  assert c.device == "CPU"
  with pytest.raises(ValueError, match="different devices"): tgfn.device_put(a, "CPU") + b
  np.testing.assert_array_equal((a + b).numpy(), np.arange(12.0).reshape(3, 4) * 2)  # uncommitted `a` follows b


def test_copy_between_instances_is_direct(monkeypatch):
  src = Buffer("CPU:1", 5, tgfn.float32).copyin(np.arange(5, dtype=np.float32))
  monkeypatch.setattr(Buffer, "numpy", lambda self: pytest.fail("copied through the host"))
  dst = Buffer("CPU:3", 5, tgfn.float32).copy_from(src)
  monkeypatch.undo()
  np.testing.assert_array_equal(dst.numpy(), np.arange(5, dtype=np.float32))


def test_queues_of_two_devices_run_concurrently():
  # each step waits for the other to start: run one after the other, the first would time out
  started = [threading.Event(), threading.Event()]
  def step(me):
    def run():
      started[me].set()
      assert started[1 - me].wait(30), "the other device's work never started while this one ran"
    return run
  queues.run_on_queues([("CPU", step(0), (), (0,)), ("CPU:1", step(1), (), (1,))])


def test_work_reading_another_devices_value_waits_for_it_and_errors_propagate():
  order = []
  slow = threading.Event()
  def produce():
    assert slow.wait(30)
    order.append("produce")
  steps = [("CPU", produce, (), (0,)), ("CPU:1", lambda: order.append("consume"), (0,), (1,)),
           ("CPU:2", slow.set, (), (2,))]
  queues.run_on_queues(steps)
  assert order == ["produce", "consume"]
  with pytest.raises(ZeroDivisionError): queues.run_on_queues([("CPU:1", lambda: 1 / 0, (), (0,))])


def test_a_realization_over_several_devices_runs_each_devices_kernels_on_its_queue(monkeypatch):
  seen = []
  real_submit = queues.submit
  monkeypatch.setattr(queues, "submit", lambda device, work, waits=(): seen.append(device) or real_submit(device, work, waits))
  parts = [tgfn.device_put(tnp.arange(8.0) + i, f"CPU:{i}") for i in range(4)]
  total = sum((tgfn.device_put(p * p, "CPU") for p in parts[1:]), parts[0] * parts[0])
  np.testing.assert_allclose(total.numpy(), sum((np.arange(8.0) + i) ** 2 for i in range(4)))
  assert set(seen) == {"CPU", "CPU:1", "CPU:2", "CPU:3"}


def _unordered_conflicts(graph, inputs, submitted) -> list[tuple[int, int]]:
  """Pairs of steps on different devices that touch overlapping memory (one writing it) with no chain of
  waits or queue order from the first to the second."""
  buffers = list(inputs) + [None] * (len(graph.slots) - graph.n_inputs)
  for s, b in graph.fixed.items(): buffers[s] = b
  def span(s):
    b = buffers[s]
    return None if b is None else (int(b.handle), int(b.handle) + b.nbytes)
  def overlap(a, b): return span(a) and span(b) and span(a)[0] < span(b)[1] and span(b)[0] < span(a)[1]
  steps = [st for st in graph.steps if st.kernel is None or graph.slots[st.slots[0]].size]
  index = {id(future): i for i, (_, future, _) in enumerate(submitted)}
  after: list[set[int]] = []
  for i, (device, _, waits) in enumerate(submitted):
    direct = {index[id(w)] for w in waits} | {j for j in range(i) if submitted[j][0] == device}
    after.append(direct.union(*(after[j] for j in direct)))
  return [(j, i) for i, later in enumerate(steps) for j, earlier in enumerate(steps[:i])
          if submitted[i][0] != submitted[j][0] and j not in after[i]
          and (any(overlap(a, b) for a in later.outputs for b in earlier.slots)
               or any(overlap(a, b) for a in later.inputs for b in earlier.outputs))]


def test_a_replayed_plan_orders_steps_whose_buffers_are_views_of_one_block(monkeypatch):
  """The plan puts intermediates into free blocks as views; on the queues a view must wait for the other
  devices' steps that still read its block (all_to_all came out with stale values)."""
  from tgfn import lax
  from tgfn.engine.call import BufferView
  from tgfn.sharding import compiled
  seen = {}
  real_submit, real_replay = queues.submit, queues.replay_on_queues
  def submit(device, work, waits=()):
    future = real_submit(device, work, waits)
    seen["submitted"].append((device, future, list(waits)))
    return future
  def replay(graph, inputs):
    seen.update(graph=graph, inputs=inputs, submitted=[])
    return real_replay(graph, inputs)
  monkeypatch.setattr(queues, "submit", submit)
  monkeypatch.setattr(compiled, "replay_on_queues", replay)
  f = lambda b: lax.all_to_all(b, "i", 0, 0, tiled=True)  # noqa: E731
  xs = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
  mapped = tgfn.pmap(f, "i")
  for _ in range(3):
    got = mapped(xs).numpy()
    assert any(isinstance(b, BufferView) for b in seen["graph"].fixed.values())  # the case this test is about
    assert _unordered_conflicts(seen["graph"], seen["inputs"], seen["submitted"]) == []
    np.testing.assert_array_equal(got, np.swapaxes(xs, 0, 1))


def test_groups_that_need_each_other_through_copies_are_split_not_looped():
  # two kernels (one per device) that each read a copy of the other's output: a cycle between groups
  # that the grouping rules cannot see value by value; ordering must fall back to one kernel per value
  from tgfn.schedule.grouping import _dependency_order
  groups = [["send0", "recv0"], ["send1", "recv1"]]
  reads = {"send0": set(), "recv0": {"send1"}, "send1": set(), "recv1": {"send0"}}
  result = []
  worker = threading.Thread(target=lambda: result.append(_dependency_order(groups, reads)), daemon=True)
  worker.start()
  worker.join(30)
  assert result, "ordering the groups did not finish"
  order = [node for group in result[0] for node in group]
  assert all(order.index(r) < order.index(node) for node, rs in reads.items() for r in rs)
