"""A jitted function's own results passed back in are taken without flattening them again
(tgfn/transforms/jit_memo.py), and the very arrays of its last call without building their signature:
only immutable results, only the very same objects, and nothing kept alive."""
import gc
import weakref

import numpy as np

import tgfn
import tgfn.numpy as tnp
import tgfn.transforms.jit as jit_module
from tgfn import nn


def _model():
  rng = np.random.default_rng(0)
  w = lambda *s: tnp.array(rng.standard_normal(s).astype(np.float32))  # noqa: E731
  return nn.Sequential([nn.Linear(w(8, 4), w(8)), nn.relu, nn.Linear(w(3, 8), w(3))])


def _train():
  opt = nn.optim.adam(1e-2)

  def step(model, state, x, y):
    loss, grads = tgfn.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
    updates, state = opt.update(grads, state, model)
    return nn.optim.apply_updates(model, updates), state, loss
  model = _model()
  return tgfn.jit(step), model, opt.init(model)


def _batch(i):
  rng = np.random.default_rng(i)
  return tnp.array(rng.standard_normal((5, 4)).astype(np.float32)), tnp.array(rng.standard_normal((5, 3)).astype(np.float32))


def _count_flattens(monkeypatch) -> list:
  calls = []
  flatten = jit_module.flatten
  monkeypatch.setattr(jit_module, "flatten", lambda *a, **k: calls.append(1) or flatten(*a, **k))
  return calls


def test_results_passed_back_are_not_flattened_and_train_as_the_flattening_path_does(monkeypatch):
  step, model, state = _train()
  plain_step, plain_model, plain_state = _train()
  for i in range(2): model, state, _ = step(model, state, *_batch(i))
  calls = _count_flattens(monkeypatch)
  for i in range(2, 6): model, state, loss = step(model, state, *_batch(i))
  assert calls == [], "the results of the last call should be taken back without a flatten"
  monkeypatch.undo()
  # the same steps through the flattening path: a fresh jit whose memo is dropped before every call
  for i in range(6):
    plain_step._last = None
    plain_model, plain_state, plain_loss = plain_step(plain_model, plain_state, *_batch(i))
  for a, b in zip(tgfn.tree.leaves((model, state, loss)), tgfn.tree.leaves((plain_model, plain_state, plain_loss))):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_another_object_or_a_changed_state_is_flattened(monkeypatch):
  step, model, state = _train()
  for i in range(2): model, state, _ = step(model, state, *_batch(i))
  calls = _count_flattens(monkeypatch)
  rebuilt = nn.Sequential(list(model.layers))  # equal structure, another object
  bumped = state._replace(count=state.count + 1)  # a NamedTuple rebuilt with one new child
  n_entries = len(step._cache)  # (no new compile either way)
  out = step(rebuilt, bumped, *_batch(2))
  assert len(calls) >= 1, "an argument that is not the last call's own result must be flattened"
  assert len(step._cache) == n_entries
  monkeypatch.undo()
  step._last = None
  again = step(rebuilt, bumped, *_batch(2))
  for a, b in zip(tgfn.tree.leaves(out), tgfn.tree.leaves(again)): np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_remembered_results_are_not_kept_alive():
  step, model, state = _train()
  model, state, _ = step(model, state, *_batch(0))
  model, state, loss = step(model, state, *_batch(1))
  weight = weakref.ref(model.layers[0].weight)
  moment = weakref.ref(state.mu.layers[0].weight)
  assert step._last.memo is not None and step._last.memo.elements
  del model, state, loss
  gc.collect()
  assert weight() is None and moment() is None, "the memo kept a result alive"
  assert all(e.leaves is None for e in step._last.memo.elements), "the memo should forget a dead result"


def test_mutable_results_are_not_remembered():
  step = tgfn.jit(lambda p, x: ({"w": p["w"] * 2}, [x + 1]))
  out = step({"w": tnp.ones(3)}, tnp.ones(2))
  (entry,) = step._cache.values()
  assert entry.result_plan is None and entry.memo is None
  out[0]["w"] = tnp.zeros(3)  # a dict can change after the call: it must be flattened again
  np.testing.assert_array_equal(np.asarray(step(out[0], tnp.ones(2))[0]["w"]), np.zeros(3))


def test_clear_cache_forgets_the_remembered_structures():
  step, model, state = _train()
  for i in range(3): model, state, _ = step(model, state, *_batch(i))
  assert step._memo_trees
  step.clear_cache()
  assert step._last is None and not step._memo_trees
  model, state, loss = step(model, state, *_batch(3))
  assert np.isfinite(float(loss))


class _CountingDict(dict):
  gets = 0

  def get(self, key, default=None):
    type(self).gets += 1
    return super().get(key, default)


def test_the_same_arrays_again_skip_the_signature_lookup():
  """A call given the very arrays of the last all-Array call goes straight to its entry: no signature is
  built or looked up. Other arrays of the same shape are looked up, and give their own results."""
  f = tgfn.jit(lambda x, y: x * 2 + y)
  x, y = tnp.array(np.arange(4, dtype=np.float32)), tnp.ones(4)
  f(x, y), f(x, y)  # (traced, then found by signature)
  f._flat_cache = _CountingDict(f._flat_cache)
  _CountingDict.gets = 0
  np.testing.assert_array_equal(np.asarray(f(x, y)), np.arange(4) * 2 + 1)
  np.testing.assert_array_equal(np.asarray(f(x, y)), np.arange(4) * 2 + 1)
  assert _CountingDict.gets == 0
  z = tnp.array(np.full(4, 5, np.float32))
  np.testing.assert_array_equal(np.asarray(f(z, y)), np.full(4, 11))
  assert _CountingDict.gets == 1
  np.testing.assert_array_equal(np.asarray(f(x, z)), np.arange(4) * 2 + 5)  # (one argument the same: looked up)
  assert _CountingDict.gets == 2


def test_the_same_arrays_path_keeps_no_argument_alive():
  f = tgfn.jit(lambda x: x + 1)
  x = tnp.ones(3)
  f(x), f(x)
  node = weakref.ref(x.uop)
  del x
  gc.collect()
  assert node() is None
  np.testing.assert_array_equal(np.asarray(f(tnp.zeros(3))), np.ones(3))
