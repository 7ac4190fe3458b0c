"""Sharded arrays: NamedSharding layouts, device_put to a sharding, and jit partitioned by in_shardings
and out_shardings (data-parallel, column- and row-split matmuls) against the same math on one device."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.sharding import NamedSharding, P, ShardedArray, make_mesh


@pytest.fixture(autouse=True)
def _four_interpreter_devices(monkeypatch):  # the layouts do not depend on the backend; PYTHON compiles nothing
  monkeypatch.setenv("DEV", "PYTHON")
  monkeypatch.setenv("TGFN_PYTHON_DEVICES", "4")


def _rng(*shape, seed=0): return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(np.float32)


def _copies_between_devices(lowered) -> int:
  """Copies in a compiled sharded call (its inputs come laid out on their devices: every copy communicates)."""
  return sum(1 for step in lowered.graph.steps if step.kernel is None and step.call is None)


def test_device_put_to_a_sharding_places_each_block_on_its_device():
  mesh = make_mesh((2, 2), ("x", "y"))
  x = _rng(4, 6)
  s = tgfn.device_put(x, NamedSharding(mesh, P("x", "y")))
  assert isinstance(s, ShardedArray) and s.sharding.spec == P("x", "y")
  shards = s.addressable_shards
  assert [sh.device for sh in shards] == ["PYTHON", "PYTHON:1", "PYTHON:2", "PYTHON:3"]
  for sh in shards:
    assert sh.data.device == sh.device
    np.testing.assert_array_equal(sh.data.numpy(), x[sh.index])
  np.testing.assert_array_equal(s.numpy(), x)
  assert tnp.ones(3).sharding.device_set == {"PYTHON"}
  with pytest.raises(ValueError, match="not divisible"): tgfn.device_put(_rng(3, 6), NamedSharding(mesh, P("x")))
  with pytest.raises(ValueError, match="names mesh axes"): NamedSharding(mesh, P("z"))


def test_data_parallel_gradient_equals_the_one_device_gradient():
  mesh = make_mesh((4,), ("batch",))
  params = {"w1": _rng(5, 8), "b1": _rng(8), "w2": _rng(8, 3), "b2": _rng(3)}
  x, y = _rng(8, 5, seed=1), _rng(8, 3, seed=2)
  def loss(p, x, y):
    h = tnp.tanh(x @ p["w1"] + p["b1"])
    return ((h @ p["w2"] + p["b2"] - y) ** 2).mean()
  replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
  step = tgfn.jit(tgfn.value_and_grad(loss), in_shardings=(replicated, split, split), out_shardings=replicated)
  value, grads = step(params, x, y)
  want_value, want_grads = tgfn.value_and_grad(loss)(params, x, y)
  np.testing.assert_allclose(value.numpy(), want_value.numpy(), rtol=1e-5)
  for k in params:
    assert grads[k].sharding.spec == P()
    np.testing.assert_allclose(grads[k].numpy(), want_grads[k].numpy(), rtol=1e-4, atol=1e-6)


def test_column_split_matmul_needs_no_communication_and_row_split_one_all_reduce():
  mesh = make_mesh((2,), ("model",))
  x, w = _rng(4, 6), _rng(6, 8)
  column = tgfn.jit(lambda x, w: tnp.tanh(x @ w), in_shardings=(NamedSharding(mesh, P()), NamedSharding(mesh, P(None, "model"))))
  out = column(x, w)
  assert out.sharding.spec == P(None, "model") and _copies_between_devices(column.lower(x, w)) == 0
  np.testing.assert_allclose(out.numpy(), np.tanh(x @ w), rtol=1e-5, atol=1e-6)
  h = _rng(4, 8)
  row = tgfn.jit(lambda h, w: h @ w, in_shardings=(NamedSharding(mesh, P(None, "model")), NamedSharding(mesh, P("model"))))
  out = row(h, w.T)
  assert out.sharding.spec == P() and _copies_between_devices(row.lower(h, w.T)) == 2  # each device gets the other's partial
  np.testing.assert_allclose(out.numpy(), h @ w.T, rtol=1e-5, atol=1e-5)


def test_out_shardings_reshard_and_sharded_arguments_carry_their_layout():
  mesh = make_mesh((2,), ("d",))
  x = tgfn.device_put(_rng(4, 4), NamedSharding(mesh, P("d")))
  f = tgfn.jit(lambda x: x * 2 + 1, out_shardings=NamedSharding(mesh, P(None, "d")))
  out = f(x)
  assert out.sharding.spec == P(None, "d")
  np.testing.assert_allclose(out.numpy(), x.numpy() * 2 + 1)
  with pytest.raises(ValueError, match="one mesh"):
    tgfn.jit(lambda a, b: a + b, in_shardings=(NamedSharding(mesh, P()), NamedSharding(make_mesh((4,), ("e",)), P())))(x, x)


def test_a_constant_laid_out_by_a_sharding_has_each_block_on_its_device():
  """A constant (zeros) has no device of its own: device_put to a sharding must still put block d on mesh
  device d, or the compiled sharded call binds it where it was realized (the default device) and device
  1's computation reads a block committed to device 0 (the tensor-parallel example's zero bias)."""
  mesh = make_mesh((2,), ("model",))
  zeros = tgfn.device_put(tnp.zeros(8), NamedSharding(mesh, P("model")))
  for sh in zeros.addressable_shards:
    assert sh.data.device == sh.device
    assert sh.data.realize().uop.device == sh.device  # realized there, not on the default device
  w = tgfn.device_put(_rng(4, 8), NamedSharding(mesh, P(None, "model")))
  x = _rng(3, 4, seed=1)
  f = tgfn.jit(lambda x, w, b: (tnp.tanh(x @ w + b)).sum(1),
               in_shardings=(NamedSharding(mesh, P()), w.sharding, zeros.sharding))
  for _ in range(2):  # compiled, then replayed
    np.testing.assert_allclose(f(x, w, zeros).numpy(), np.tanh(x @ w.numpy()).sum(1), rtol=1e-5, atol=1e-5)


def test_a_constant_output_of_a_sharded_jit_has_each_block_on_its_device():
  """As device_put's: a sharded output computed from constants only lives on the mesh's devices, so the next
  compiled call can read it with blocks of its own."""
  mesh = make_mesh((2,), ("model",))
  split = NamedSharding(mesh, P("model"))
  f = tgfn.jit(lambda x: (x * 2, tnp.zeros(4)), in_shardings=split, out_shardings=split)
  doubled, zeros = f(tnp.ones(4))
  assert [b.device for b in zeros.blocks] == list(mesh.device_names)
  g = tgfn.jit(lambda x, z: x + z, in_shardings=split, out_shardings=split)
  np.testing.assert_array_equal(g(doubled, zeros).numpy(), np.full(4, 2.0))
