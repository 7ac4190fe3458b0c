"""`custom_vjp_primal_jvp` (internal, tgfn/transforms/custom.py): reverse mode runs the rule, forward mode
differentiates the function itself (plain custom_vjp refuses jvp, as JAX does), vmap batches both; and a
custom_vjp argument kept as a residual is not copied into a buffer of its own."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.transforms.custom import custom_vjp, custom_vjp_primal_jvp


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
  monkeypatch.setenv("DEV", "CPU")


def _scaled_rule(kind):
  """sin with a reverse rule that is deliberately 3 * cos: which rule ran shows in the result."""
  f = kind(lambda x: tnp.sin(x))
  f.defvjp(lambda x: (tnp.sin(x), x), lambda x, ct: (3.0 * tnp.cos(x) * ct,))
  return f


X = np.linspace(-1.0, 2.0, 5)


def test_reverse_mode_uses_the_rule_and_forward_mode_the_function():
  f = _scaled_rule(custom_vjp_primal_jvp)
  x = tnp.array(X)
  assert_close(f(x), np.sin(X), 1e-12, 1e-12)
  assert_close(tgfn.grad(lambda v: f(v).sum())(x), 3 * np.cos(X), 1e-12, 1e-12)
  out, tangent = tgfn.jvp(f, (x,), (tnp.ones(5),))
  assert_close(out, np.sin(X), 1e-12, 1e-12)
  assert_close(tangent, np.cos(X), 1e-12, 1e-12)
  # forward over reverse: the JVP of the rule's body
  assert_close(tgfn.jvp(tgfn.grad(lambda v: f(v).sum()), (x,), (tnp.ones(5),))[1], -3 * np.sin(X), 1e-12, 1e-12)
  with pytest.raises(TypeError, match="forward-mode"):
    tgfn.jvp(_scaled_rule(custom_vjp), (x,), (tnp.ones(5),))


def test_vmap_and_jit_keep_both_modes():
  f = _scaled_rule(custom_vjp_primal_jvp)
  xs = tnp.array(np.stack([X, X + 1]))
  grads = tgfn.jit(tgfn.vmap(tgfn.grad(lambda v: f(v).sum())))(xs)
  assert_close(grads, 3 * np.cos(np.asarray(xs)), 1e-12, 1e-12)
  tangents = tgfn.vmap(lambda v: tgfn.jvp(f, (v,), (tnp.ones(5),))[1])(xs)
  assert_close(tangents, np.cos(np.asarray(xs)), 1e-12, 1e-12)


def test_an_argument_kept_as_a_residual_is_not_copied():
  f = custom_vjp(lambda x, y: tnp.sin(x) * y)
  f.defvjp(lambda x, y: (tnp.sin(x) * y, (x, y)), lambda res, ct: (tnp.cos(res[0]) * res[1] * ct, tnp.sin(res[0]) * ct))
  x, y = tnp.array(X), tnp.array(X[::-1].copy())
  g = tgfn.jit(tgfn.grad(lambda a, b: f(a, b).sum()))  # with respect to x only: y is a residual, not a result
  assert_close(g(x, y), np.cos(X) * X[::-1], 1e-12, 1e-12)
  assert len(g.lower(x, y).kernels) == 1, [k.name for k in g.lower(x, y).kernels]  # cos(x) y, no copy of y


def test_the_traced_rules_are_kept_per_shape_and_dtype():
  """Eager code does not trace the function and both rules at every call (a convolution's rules are big)."""
  traces = []
  f = custom_vjp_primal_jvp(lambda x: traces.append(x.shape) or tnp.sin(x))
  f.defvjp(lambda x: (f.fun(x), x), lambda x, ct: (tnp.cos(x) * ct,))
  for values in (X, X + 1.0, X[:3]):
    assert_close(f(tnp.array(values)), np.sin(values), 1e-12, 1e-12)
  assert traces == [(5,), (5,), (3,), (3,)]  # the function, then the forward rule's call of it, per shape
  assert_close(tgfn.grad(lambda v: f(v).sum())(tnp.array(X[:3])), np.cos(X[:3]), 1e-12, 1e-12)
