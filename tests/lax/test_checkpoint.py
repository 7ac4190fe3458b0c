"""tgfn.checkpoint: the same gradients under every policy, the saved values the policy names, and a
backward pass that recomputes inside a call of its own (the barrier)."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.test_util import check_grads
from tgfn.uop.body import Call
from tgfn.uop.ops import Ops, toposort
from tests.conftest import assert_close

RNG = np.random.default_rng(3)
WS = [tnp.asarray(RNG.normal(size=(4, 4)) * 0.5) for _ in range(3)]
X = tnp.asarray(RNG.normal(size=(2, 4)))
P = tgfn.checkpoint_policies
POLICIES = [P.nothing_saveable, P.everything_saveable, P.dots_saveable, P.save_only_these_names("pre")]


def layer(h, w): return tnp.tanh(tgfn.checkpoint_name(h @ w, "pre")) * 1.5


def net(ws, x, wrap):
  h = x
  for w in ws: h = wrap(layer)(h, w)
  return (h * h).sum()


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.kind)
def test_gradients_match_without_checkpoint(policy):
  want = tgfn.grad(net)(WS, X, lambda f: f)
  wrap = lambda f: tgfn.checkpoint(f, policy=policy)
  for got in (tgfn.grad(net)(WS, X, wrap), tgfn.jit(tgfn.grad(lambda ws, x: net(ws, x, wrap)))(WS, X)):
    for g, r in zip(got, want): assert_close(g, np.asarray(r), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.kind)
def test_finite_differences_second_order_and_vmap(policy):
  f = tgfn.remat(layer, policy=policy)
  check_grads(f, (X, WS[0]), order=2)
  per_example = tgfn.vmap(tgfn.grad(lambda w, x: f(x, w).sum()), in_axes=(None, 0))(WS[0], X[:, None, :])
  for i in range(2):
    assert_close(per_example[i], np.asarray(tgfn.grad(lambda w: layer(X[i:i + 1], w).sum())(WS[0])), rtol=1e-12)


def test_policies_choose_what_the_forward_pass_saves():
  def spec(policy):
    out = tgfn.checkpoint(layer, policy=policy)(X, WS[0])
    assert out.uop.op is Ops.CALL and isinstance(out.uop.arg[0], Call)
    return out.uop.arg[0]
  assert spec(P.nothing_saveable).saved == () and spec(P.everything_saveable).saved == ()
  dots = spec(P.dots_saveable).saved
  assert len(dots) == 1 and dots[0].op is Ops.REDUCE_AXIS
  assert spec(P.save_only_these_names("pre")).saved == dots  # the named value is the product
  assert spec(P.save_only_these_names("other")).saved == ()
  with pytest.raises(TypeError, match="policy must be one of tgfn.checkpoint_policies"):
    tgfn.checkpoint(layer, policy="dots")


def test_the_backward_pass_recomputes_inside_its_own_call():
  wrap = lambda f: tgfn.checkpoint(f)
  grads = tgfn.grad(net)(WS, X, wrap)
  calls = {u.arg[0].name for g in grads for u in toposort([g.uop]) if u.op is Ops.CALL}
  assert "checkpoint backward" in calls
  # no tanh of the forward pass is shared with the gradient graph outside the calls: it lives in bodies
  outside = [u for g in grads for u in toposort([g.uop]) if u.op is Ops.EXP2]
  assert outside == []


def test_static_argnums_and_decorator_form():
  @tgfn.checkpoint
  def f(x): return tnp.sin(x) * x
  g = tgfn.checkpoint(lambda x, n: x ** n, static_argnums=1)
  assert_close(tgfn.grad(lambda x: f(x).sum())(X), np.asarray(tgfn.grad(lambda x: (tnp.sin(x) * x).sum())(X)), rtol=1e-12)
  assert_close(tgfn.grad(lambda x: g(x, 3).sum())(X), 3 * np.asarray(X) ** 2, rtol=1e-12)
