"""A jitted function called inside a trace, custom_vjp and custom_jvp are CALL nodes of a closed body
(tgfn/uop/body.py): one node in make_jaxpr's printout, and right under grad, jvp, vmap, jit and their
compositions -- the custom rules used, a nested jit differentiated and batched through its body."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine.realize import Counters
from tgfn.test_util import check_grads
from tgfn.uop import body
from tgfn.uop.ops import Ops, toposort
from tests.conftest import assert_close

RNG = np.random.default_rng(7)
X = tnp.asarray(RNG.normal(size=(4,)))
XB = tnp.asarray(RNG.normal(size=(3, 4)))
W = tnp.asarray(RNG.normal(size=(4, 4)) * 0.5)


@tgfn.jit
def layer(x, w):
  return tnp.tanh(x @ w) * 2.0


def net(x):
  return layer(layer(x, W), W).sum()


def _calls(out):
  return [u for u in toposort([out.uop]) if u.op is Ops.CALL]


def _call_lines(f, *args):
  return [line for line in str(tgfn.make_jaxpr(f)(*args)).splitlines() if "= call[" in line]


# ------------------------------------------------------------------------------------------- nested jit
def test_a_jitted_function_inside_jit_is_one_call_node():
  lines = _call_lines(tgfn.jit(lambda x: layer(x, W) + 1), X)
  assert len(lines) == 1 and "name='jit <lambda>'" in lines[0]  # the outer jit: the inner is in its body
  inner = _call_lines(lambda x: layer(x, W) + 1, X)
  assert len(inner) == 1 and "name='jit layer'" in inner[0]
  printed = str(tgfn.make_jaxpr(lambda x: layer(x, W) + 1)(X))
  assert "tanh" not in printed and "exp2" not in printed  # the body is not inlined into the trace


def test_the_same_nested_call_twice_is_one_node():
  f = lambda x: layer(x, W) + layer(x, W)
  assert len(_call_lines(f, X)) == 1


def test_nested_jit_values_match_eager_and_numpy():
  expected = np.tanh(np.tanh(X.numpy() @ W.numpy()) * 2.0 @ W.numpy()).sum() * 2.0
  assert_close(net(X), expected)
  assert_close(tgfn.jit(net)(X), expected)
  assert_close(tgfn.vmap(net)(XB), [np.tanh(np.tanh(x @ W.numpy()) * 2.0 @ W.numpy()).sum() * 2.0 for x in XB.numpy()])


def test_nested_jit_differentiates_through_its_body():
  check_grads(net, (X,), order=2, modes=("fwd", "rev"))
  check_grads(lambda w: layer(X, w).sum(), (W,), order=1)
  assert_close(tgfn.jit(tgfn.grad(net))(X), tgfn.grad(net)(X))
  loop = np.stack([tgfn.grad(net)(x).numpy() for x in XB])
  assert_close(tgfn.vmap(tgfn.grad(net))(XB), loop)
  assert_close(tgfn.jit(tgfn.vmap(tgfn.grad(net)))(XB), loop)


def test_nested_jit_with_static_arguments_and_python_scalars():
  @tgfn.jit
  def scaled(x, k, power):
    return x ** power * k
  scaled = tgfn.jit(scaled, static_argnums=2)
  f = lambda x: scaled(x, 3.0, 2).sum()
  assert len(_call_lines(f, X)) == 1
  assert_close(tgfn.jit(tgfn.grad(f))(X), 6 * X.numpy())


def test_nested_jit_fuses_with_its_caller():
  """The call keeps its boundary in the IR, but the scheduler inlines it: no extra kernel."""
  inner = tgfn.jit(lambda x: tnp.exp(x) * 3.0)
  x = tnp.asarray(RNG.normal(size=(64,)).astype(np.float32))
  before = Counters.kernels_compiled
  tgfn.jit(lambda x: inner(x) + 1.0)(x)
  nested = Counters.kernels_compiled - before
  before = Counters.kernels_compiled
  tgfn.jit(lambda x: tnp.exp(x) * 3.0 + 2.0)(x)
  assert nested == Counters.kernels_compiled - before == 1


# ------------------------------------------------------------------------------------------- custom_vjp
@tgfn.custom_vjp
def clip_gradient(x, lo, hi):
  return x


def _clip_fwd(x, lo, hi):
  return x, (lo, hi)


def _clip_bwd(res, g):
  lo, hi = res
  return (tnp.clip(g, lo, hi), None, None)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@tgfn.custom_vjp
def sin_with_rule(x, w):
  return tnp.sin(x) * w


def _sin_fwd(x, w):
  return sin_with_rule(x, w), (tnp.cos(x), tnp.sin(x), w)


def _sin_bwd(res, g):
  c, s, w = res
  return (c * w * g, (s * g).sum(0) if g.ndim > w.ndim else s * g)


sin_with_rule.defvjp(_sin_fwd, _sin_bwd)


def test_custom_vjp_is_one_call_node_and_its_rule_is_used():
  f = lambda x: clip_gradient(x * 10.0, -1.0, 1.0).sum() * 5.0
  lines = _call_lines(f, X)
  assert len(lines) == 1 and "kind=customvjp" in lines[0]
  assert_close(tgfn.grad(f)(X), np.full(4, 10.0))  # 5 clipped to 1, times 10
  assert_close(tgfn.jit(tgfn.grad(f))(X), np.full(4, 10.0))
  assert_close(tgfn.vmap(tgfn.grad(f))(XB), np.full((3, 4), 10.0))
  assert_close(tgfn.grad(lambda x: tgfn.vmap(f)(x).sum())(XB), np.full((3, 4), 10.0))
  assert_close(f(X), 50 * X.numpy().sum())


def test_custom_vjp_with_a_correct_rule_matches_finite_differences():
  w = tnp.asarray(RNG.normal(size=(4,)))
  f = lambda x, w: (sin_with_rule(x, w) * x).sum()
  check_grads(f, (X, w), order=1, modes=("rev",))
  check_grads(f, (X, w), order=2, modes=("rev",))  # the backward rule's body is differentiated in turn
  assert_close(tgfn.jit(tgfn.grad(f, argnums=(0, 1)))(X, w)[1], tgfn.grad(f, argnums=1)(X, w))
  # vmap over x with w shared: w's cotangent is summed over the batch
  g = lambda w: tgfn.vmap(lambda x: sin_with_rule(x, w).sum())(XB).sum()
  assert_close(tgfn.grad(g)(w), np.sin(XB.numpy()).sum(0))
  assert_close(tgfn.jit(tgfn.grad(g))(w), np.sin(XB.numpy()).sum(0))


def test_custom_vjp_under_jvp_is_jaxs_error():
  with pytest.raises(TypeError, match="can't apply forward-mode differentiation"):
    tgfn.jvp(lambda x: clip_gradient(x, -1.0, 1.0), (X,), (X,))


def test_custom_vjp_inside_a_nested_jit_and_a_scan():
  inner = tgfn.jit(lambda x: clip_gradient(x * 10.0, -1.0, 1.0) * 5.0)
  f = lambda x: tgfn.lax.scan(lambda c, _: (inner(c), None), x, length=2)[0].sum()
  assert_close(tgfn.grad(f)(X), np.full(4, 10.0))  # each step: the cotangent times 5, clipped to 1, times 10
  assert_close(tgfn.jit(tgfn.grad(f))(X), np.full(4, 10.0))


def test_custom_vjp_rule_errors_name_the_function():
  @tgfn.custom_vjp
  def f(x):
    return x
  f.defvjp(lambda x: (x, None), lambda res, g: g)
  with pytest.raises(TypeError, match="backward rule of f must return a tuple"):
    f(X)
  f.defvjp(lambda x: (x[:2], None), lambda res, g: (g,))
  with pytest.raises(TypeError, match="forward rule of f's output must match"):
    f(X)


# ------------------------------------------------------------------------------------------- custom_jvp
@tgfn.custom_jvp
def softplus(x):
  return tnp.log1p(tnp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  return softplus(x), t / (1 + tnp.exp(-x))


@tgfn.custom_jvp
def doubled_derivative(x):
  return x * x


doubled_derivative.defjvps(lambda t, out, x: 4 * x * t)  # deliberately twice the true derivative


def test_custom_jvp_is_one_call_node_and_its_rule_is_used_everywhere():
  f = lambda x: doubled_derivative(x).sum()
  lines = _call_lines(f, X)
  assert len(lines) == 1 and "kind=customjvp" in lines[0]
  four_x = 4 * X.numpy()
  assert_close(tgfn.grad(f)(X), four_x)
  assert_close(tgfn.jit(tgfn.grad(f))(X), four_x)
  assert_close(tgfn.jvp(f, (X,), (tnp.ones(4),))[1], four_x.sum())
  assert_close(tgfn.jit(lambda x: tgfn.jvp(f, (x,), (tnp.ones(4),))[1])(X), four_x.sum())
  assert_close(tgfn.vmap(tgfn.grad(f))(XB), 4 * XB.numpy())
  assert_close(tgfn.grad(lambda x: tgfn.vmap(f)(x).sum())(XB), 4 * XB.numpy())
  assert_close(tgfn.jacfwd(tgfn.vmap(doubled_derivative))(X[None])[0, :, 0], np.diag(four_x))
  # second order differentiates the rule: d/dx (4 x) = 4
  assert_close(tgfn.grad(lambda x: tgfn.grad(f)(x).sum())(X), np.full(4, 4.0))
  assert_close(tgfn.jit(tgfn.hessian(f))(X), np.eye(4) * 4)


def test_custom_jvp_with_a_correct_rule_matches_finite_differences():
  f = lambda x: (softplus(x) * tnp.sin(x)).sum()
  check_grads(f, (X,), order=2, modes=("fwd", "rev"))
  check_grads(tgfn.jit(f), (X,), order=1, modes=("fwd", "rev"))
  check_grads(lambda x: tgfn.vmap(softplus)(x).sum(), (XB,), order=1, modes=("fwd", "rev"))


def test_custom_jvp_inside_nested_jit():
  inner = tgfn.jit(lambda x: doubled_derivative(x) + 1.0)
  f = lambda x: inner(x).sum()
  assert_close(tgfn.grad(f)(X), 4 * X.numpy())
  assert_close(tgfn.jit(tgfn.grad(tgfn.jit(f)))(X), 4 * X.numpy())


def test_custom_jvp_with_a_non_linear_rule_explains_reverse_mode():
  @tgfn.custom_jvp
  def f(x):
    return x
  f.defjvps(lambda t, out, x: t * t)
  with pytest.raises(TypeError, match="linear in the tangents"):
    tgfn.grad(lambda x: f(x).sum())(X)


def test_custom_functions_run_eagerly_with_concrete_control_flow():
  @tgfn.custom_jvp
  def relu_or_not(x, flag):
    return tnp.maximum(x, 0) if float(flag) > 0 else x
  relu_or_not.defjvps(lambda t, out, x, flag: t, None)
  assert_close(relu_or_not(X, tnp.asarray(1.0)), np.maximum(X.numpy(), 0))
  assert_close(relu_or_not(X, tnp.asarray(-1.0)), X.numpy())


def test_the_call_spec_kinds_are_distinct_bodies():
  out = doubled_derivative(X)
  (spec, _), = {u.arg for u in _calls(out)}
  assert isinstance(spec, body.CustomJVP) and spec.name == "doubled_derivative"
