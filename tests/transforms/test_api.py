"""The transform API: pytrees, argnums, aux, errors, concrete vs abstract tracing, custom rules."""
import collections
import dataclasses
import math

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.test_util import check_grads
from tgfn.uop.ops import Ops


def test_grad_of_tanh_matches_the_closed_form():
  assert_close(tgfn.grad(tnp.tanh)(1.0), np.float32(1 - np.tanh(1.0) ** 2))
  assert_close(tgfn.grad(tgfn.grad(tnp.tanh))(1.0), np.float32(-2 * np.tanh(1.0) * (1 - np.tanh(1.0) ** 2)), rtol=1e-5)


def test_python_control_flow_on_concrete_values_works_under_grad():
  def f(x):
    if x < 3: return x * x
    return -x
  assert float(tgfn.grad(f)(2.0)) == 4.0
  assert float(tgfn.grad(f)(5.0)) == -1.0


@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_python_control_flow_on_traced_values_is_a_clear_error(transform):
  def f(x):
    if x.sum() > 0:  # the offending line
      return x
    return -x
  wrapped = tgfn.jit(f) if transform == "jit" else tgfn.vmap(f)
  with pytest.raises(tgfn.ConcretizationError, match=r"(?s)bool.*test_api.py:\d+.*if x.sum\(\) > 0.*tnp.where"):
    wrapped(tnp.ones((2, 3)))
  assert issubclass(tgfn.ConcretizationError, TypeError)


@pytest.mark.parametrize("observe", [lambda x: int(x.sum()), lambda x: x.sum().item(), lambda x: np.asarray(x)])
def test_conversions_of_traced_values_raise(observe):
  with pytest.raises(tgfn.ConcretizationError):
    tgfn.jit(lambda x: observe(x) + x)(tnp.ones(3))


def test_pytrees_in_and_out():
  Point = collections.namedtuple("Point", "x y")

  @dataclasses.dataclass
  class Params:
    w: object
    b: object

  tgfn.tree.register_dataclass(Params)

  def loss(p, pt, extra):
    return (p.w * pt.x).sum() + p.b * pt.y + extra["s"] * 2.0 + (0.0 if extra["none"] is None else 1.0)

  p = Params(tnp.array([1.0, 2.0]), tnp.array(3.0))
  g = tgfn.grad(loss)(p, Point(tnp.array([4.0, 5.0]), tnp.array(6.0)), {"s": tnp.array(1.0), "none": None})
  assert isinstance(g, Params)
  assert_close(g.w, np.array([4.0, 5.0], np.float32))
  assert_close(g.b, np.float32(6.0))
  gs = tgfn.grad(loss, argnums=(1, 2))(p, Point(tnp.array([4.0, 5.0]), tnp.array(6.0)), {"s": tnp.array(1.0), "none": None})
  assert isinstance(gs[0], Point) and gs[1]["none"] is None
  assert_close(gs[1]["s"], np.float32(2.0))


def test_tree_utilities_follow_jax_conventions():
  tree = {"b": (1, [2, 3]), "a": None, "c": 4}
  leaves, treedef = tgfn.tree.flatten(tree)
  assert leaves == [1, 2, 3, 4]  # sorted keys, None is an empty node
  assert tgfn.tree.unflatten(treedef, [x * 10 for x in leaves]) == {"b": (10, [20, 30]), "a": None, "c": 40}
  assert tgfn.tree.map(lambda x, y: x + y, (1, 2), (10, 20)) == (11, 22)
  assert tgfn.tree.leaves([1, (2, None)]) == [1, 2]
  assert tgfn.tree.structure((1, 2)) == tgfn.tree.structure((5, 6))


def test_value_and_grad_and_has_aux():
  def f(x):
    y = (x ** 2).sum()
    return y, {"y": y, "double": x * 2}
  (value, aux), grad = tgfn.value_and_grad(f, has_aux=True)(tnp.array([1.0, 2.0]))
  assert float(value) == 5.0 and float(aux["y"]) == 5.0
  assert_close(aux["double"], np.array([2.0, 4.0], np.float32))
  assert_close(grad, np.array([2.0, 4.0], np.float32))
  g, aux2 = tgfn.grad(f, has_aux=True)(tnp.array([1.0, 2.0]))
  assert_close(g, np.array([2.0, 4.0], np.float32))


def test_grad_errors_are_clear():
  with pytest.raises(TypeError, match="float scalar.*shape \\(2,\\)"):
    tgfn.grad(lambda x: x * 2)(tnp.array([1.0, 2.0]))
  with pytest.raises(TypeError, match="requires float inputs.*int32"):
    tgfn.grad(lambda x: (x * 2).sum())(tnp.array([1, 2]))
  with pytest.raises(TypeError, match="has_aux=True.*pair"):
    tgfn.grad(lambda x: x, has_aux=True)(1.0)


def test_vjp_with_integer_inputs_gives_zero_cotangents():
  out, pullback = tgfn.vjp(lambda x, n: x * n.astype(tnp.float32), tnp.array([1.0, 2.0]), tnp.array([3, 4]))
  gx, gn = pullback(tnp.ones(2))
  assert_close(gx, np.array([3.0, 4.0], np.float32))
  assert_close(gn, np.array([0, 0], np.int32))


def test_gradient_of_an_unused_input_is_a_constant_not_a_computation():
  g = tgfn.grad(lambda x, y: (x * 2).sum(), argnums=1)(tnp.ones(3), tnp.ones((2, 2)))
  assert {u.op for u in g.uop.toposort()} <= {Ops.CONST, Ops.RESHAPE, Ops.EXPAND}
  assert_close(g, np.zeros((2, 2), np.float32))


def test_common_subexpressions_are_shared_in_gradient_graphs():
  x = tnp.array([0.5, 1.5])
  g = tgfn.grad(lambda v: (tnp.sin(v) * tnp.sin(v)).sum())(x)
  sins = [u for u in g.uop.toposort() if u.op is Ops.SIN]
  assert len(sins) <= 2  # sin(x) and the shifted sin that builds cos(x), each built once


def test_stop_gradient():
  f = lambda x: (x * tgfn.stop_gradient(x)).sum()
  assert_close(tgfn.grad(f)(tnp.array([3.0])), np.array([3.0], np.float32))
  assert_close(tgfn.jvp(f, (tnp.array([3.0]),), (tnp.array([1.0]),))[1], np.float32(3.0))


def test_custom_vjp_gives_a_stable_gradient_where_autodiff_gives_nan():
  @tgfn.custom_vjp
  def log1pexp(x):
    return tnp.log1p(tnp.exp(x))

  def fwd(x): return log1pexp(x), x
  def bwd(x, g): return (g * (1.0 - 1.0 / (1.0 + tnp.exp(x))),)
  log1pexp.defvjp(fwd, bwd)

  naive = tgfn.grad(lambda x: tnp.log1p(tnp.exp(x)))(100.0)
  assert math.isnan(float(naive))
  assert float(tgfn.grad(log1pexp)(100.0)) == 1.0
  xs = tnp.array([0.0, 1.0, 100.0])
  expected = np.array([0.5, 1 / (1 + np.exp(-1.0)), 1.0], np.float32)
  assert_close(tgfn.vmap(tgfn.grad(log1pexp))(xs), expected, rtol=1e-6)
  assert_close(tgfn.grad(lambda v: tgfn.vmap(log1pexp)(v).sum())(xs), expected, rtol=1e-6)
  with pytest.raises(TypeError, match="forward-mode"):
    tgfn.jvp(log1pexp, (1.0,), (1.0,))


def test_custom_jvp_safe_norm_has_no_nan_at_zero():
  @tgfn.custom_jvp
  def safe_norm(x):
    return tnp.sqrt((x * x).sum())

  @safe_norm.defjvp
  def safe_norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = safe_norm(x)
    return n, tnp.where(n == 0, 0.0, (x * t).sum() / tnp.where(n == 0, 1.0, n))

  zero = tnp.zeros(3)
  assert np.isnan(np.asarray(tgfn.grad(lambda x: tnp.sqrt((x * x).sum()))(zero))).all()
  assert_close(tgfn.grad(safe_norm)(zero), np.zeros(3, np.float32))
  assert_close(tgfn.grad(safe_norm)(tnp.array([3.0, 4.0, 0.0])), np.array([0.6, 0.8, 0.0], np.float32))
  assert_close(tgfn.jvp(safe_norm, (zero,), (tnp.ones(3),))[1], np.float32(0.0))
  assert_close(tgfn.vmap(tgfn.grad(safe_norm))(tnp.array([[0.0, 0.0], [3.0, 4.0]])),
               np.array([[0.0, 0.0], [0.6, 0.8]], np.float32))


def test_check_grads_catches_a_wrong_rule(monkeypatch):
  from tgfn.transforms import grad as grad_module
  x = tnp.array(np.random.default_rng(0).standard_normal(4))
  check_grads(tnp.sin, (x,), order=2)
  monkeypatch.setitem(grad_module.VJP_RULES, Ops.SIN, lambda ct, y: (ct * 1.5,))
  with pytest.raises(AssertionError):
    check_grads(tnp.sin, (x,), order=1, modes=("rev",))


def test_jvp_checks_shapes_and_structure():
  with pytest.raises(ValueError, match="tangent shape"):
    tgfn.jvp(tnp.sin, (tnp.ones(3),), (tnp.ones(2),))
  with pytest.raises(ValueError, match="same pytree structure"):
    tgfn.jvp(lambda a, b: a, (1.0, 2.0), (1.0,))


def test_linearize_matches_jvp():
  x = tnp.array([0.3, 0.7])
  out, f_jvp = tgfn.linearize(lambda v: tnp.sin(v) * v, x)
  assert_close(f_jvp(tnp.ones(2)), tgfn.jvp(lambda v: tnp.sin(v) * v, (x,), (tnp.ones(2),))[1])


def test_second_order_derivatives_through_custom_rules():
  @tgfn.custom_jvp
  def f(x): return tnp.sin(x)

  @f.defjvp
  def f_jvp(primals, tangents): return f(primals[0]), tangents[0] * tnp.cos(primals[0])

  @tgfn.custom_vjp
  def h(x): return tnp.sin(x)
  h.defvjp(lambda x: (h(x), x), lambda x, ct: (ct * tnp.cos(x),))

  x = tnp.array(np.array([0.3, 1.2]))
  want = 2 * np.cos([0.3, 1.2]) - np.array([0.3, 1.2]) * np.sin([0.3, 1.2])  # d2/dx2 of x sin x
  for fn in (f, h):
    got = tgfn.grad(lambda v: tgfn.grad(lambda u: (u * fn(u)).sum())(v).sum())(x)
    assert_close(got, want, rtol=1e-12)
  check_grads(lambda v: v * f(v), (x,), order=2)
  check_grads(lambda v: v * h(v), (x,), order=2, modes=("rev",))
