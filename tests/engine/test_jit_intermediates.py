"""A jitted graph's intermediates (CompiledGraph._plan_intermediates): a buffer whose last reader has run is
reused by a later intermediate; where handles are addresses, one of another size lives in it as a view."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.device import Device
from tgfn.engine.call import BufferView
from tgfn.engine.jit import PREFAULT_BYTES


def _chain(x):
  # three materialized reductions, each broadcast into the next: of 64, then 32, then 48 elements; the
  # 64-element one is free (its last reader has run) when the 48-element one is written
  a = x.sum(axis=1, keepdims=True)
  c = (x / a).sum(axis=0, keepdims=True)
  e = (x * c)[:48].sum(axis=1, keepdims=True)
  return x[:48] - e


def test_a_smaller_intermediate_lives_in_a_freed_larger_block():
  if not Device[Device.DEFAULT].address_handles: pytest.skip("a view of another size needs address handles")
  x = np.random.default_rng(0).uniform(1, 2, (64, 32)).astype(np.float32)
  f = tgfn.jit(_chain)
  out = f(tnp.array(x))
  (entry,) = f._cache.values()
  graph = entry.graph
  views = [b for b in graph.fixed.values() if isinstance(b, BufferView)]
  assert [(v.size, v.base.size) for v in views] == [(48, 64)]
  assert graph.intermediate_bytes == (64 + 32) * 4, "two blocks made for three intermediates"
  np.testing.assert_allclose(out.numpy(), np.asarray(_chain(tnp.array(x))), rtol=1e-6)
  np.testing.assert_allclose(f(tnp.array(x)).numpy(), out.numpy(), rtol=0)  # the generated replay: the same


def test_large_intermediate_blocks_are_prefaulted_once_when_planned(monkeypatch):
  allocator = Device[Device.DEFAULT].allocator
  if not hasattr(allocator, "prefault"): pytest.skip("the device's allocator maps pages on demand only")
  calls = []
  monkeypatch.setattr(allocator, "prefault", lambda handle, nbytes: calls.append(nbytes), raising=False)
  rows = PREFAULT_BYTES // 4 * 2  # the row sums: an intermediate of twice the threshold
  f = tgfn.jit(lambda x: x - x.sum(axis=1, keepdims=True))
  x = np.ones((rows, 3), np.float32)
  np.testing.assert_array_equal(f(tnp.array(x)).numpy(), x - 3)
  assert calls == [rows * 4]
  f(tnp.array(x))
  assert calls == [rows * 4], "mapped once, when the graph is planned, not at every call"
