"""grad, jvp and vmap of tgfn.lax control flow: against finite differences, eager against jit (where
predicates are abstract and the call rules run), and vmap against a Python loop."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tgfn.test_util import check_grads
from tests.conftest import assert_close

RNG = np.random.default_rng(2)
W = tnp.asarray(RNG.normal(size=(3, 3)) * 0.5)
XS = tnp.asarray(RNG.normal(size=(5, 3)))
H0 = tnp.asarray(RNG.normal(size=3))


def scan_loss(w, h0, xs):
  def step(h, x):
    h = tnp.tanh(h @ w + x)
    return h, (h * h).sum()
  h, ys = lax.scan(step, h0, xs)
  return h.sum() + (ys * tnp.arange(5.0, dtype=tnp.float64)).sum()


def test_scan_grads_match_finite_differences():
  check_grads(scan_loss, (W, H0, XS), order=1, modes=("fwd", "rev"))
  check_grads(lambda xs: lax.scan(lambda c, x: (c * tnp.sin(x), c), H0, xs, reverse=True)[1], (XS,), order=1)


def test_scan_grad_equals_the_unrolled_loop_and_jit():
  def unrolled(w, h0, xs):
    h, total = h0, 0.0
    for i in range(5):
      h = tnp.tanh(h @ w + xs[i])
      total = total + (h * h).sum() * i
    return h.sum() + total
  want = tgfn.grad(unrolled, argnums=(0, 1, 2))(W, H0, XS)
  for got in (tgfn.grad(scan_loss, argnums=(0, 1, 2))(W, H0, XS),
              tgfn.jit(tgfn.grad(scan_loss, argnums=(0, 1, 2)))(W, H0, XS)):
    for g, r in zip(got, want): assert_close(g, np.asarray(r), rtol=1e-10, atol=1e-12)


def test_scan_with_an_integer_carry_and_second_order():
  def f(x):
    (_, v), _ = lax.scan(lambda c, _: ((c[0] + 1, c[1] * tnp.sin(c[1]) + c[0]), None), (0, x), None, length=3)
    return v
  check_grads(f, (XS,), order=2)


def test_fori_loop_grads():
  f = lambda x: lax.fori_loop(0, 4, lambda i, v: v * tnp.sin(v) + i, x)
  check_grads(f, (XS,), order=1, modes=("fwd", "rev"))


def cond_fn(x):
  return lax.cond(x.sum() > 0, lambda x: tnp.sin(x) * x, lambda x: tnp.cos(x) + x, x)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_grads(sign):
  x = abs(XS) * sign
  check_grads(cond_fn, (x,), order=1, modes=("fwd", "rev"))
  # under jit the predicate is abstract: the Cond call's own VJP and JVP rules run
  loss = lambda x: (cond_fn(x) ** 2).sum()
  assert_close(tgfn.jit(tgfn.grad(loss))(x), np.asarray(tgfn.grad(loss)(x)), rtol=1e-12)
  t = tnp.ones_like(x)
  assert_close(tgfn.jit(lambda x, t: tgfn.jvp(cond_fn, (x,), (t,))[1])(x, t),
               np.asarray(tgfn.jvp(cond_fn, (x,), (t,))[1]), rtol=1e-12)


def test_switch_grad_under_jit():
  branches = [lambda x, y: x * y, lambda x, y: x + tnp.sin(y), lambda x, y: x / (1 + y * y)]
  loss = lambda i, x, y: lax.switch(i, branches, x, y).sum()
  for i in range(3):
    got = tgfn.jit(tgfn.grad(loss, argnums=(1, 2)))(i, XS, XS * 2)
    want = tgfn.grad(lambda x, y: branches[i](x, y).sum(), argnums=(0, 1))(XS, XS * 2)
    for g, r in zip(got, want): assert_close(g, np.asarray(r), rtol=1e-12)


def test_while_loop_jvp_and_its_reverse_mode_error():
  f = lambda x: lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * tnp.sin(c[1])), (0, x))[1]
  check_grads(f, (XS,), order=1, modes=("fwd",))
  with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop.*lax.scan"):
    tgfn.grad(lambda x: f(x).sum())(XS)


def test_while_loop_jvp_carries_the_tangent_of_a_value_the_body_closes_over():
  f = lambda w: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * w), (0, 1.0))[1]
  for run in (tgfn.jvp, tgfn.jit(tgfn.jvp, static_argnums=0)):
    value, tangent = run(f, (2.0,), (1.0,))
    assert (float(value), float(tangent)) == (8.0, 12.0)   # w**3 and 3 * w**2


def _loop(f, *args):
  """vmap by hand: f on each member, stacked."""
  outs = [f(*[a[i] for a in args]) for i in range(args[0].shape[0])]
  return tgfn.tree.map(lambda *xs: tnp.stack(xs), *outs)


def _assert_trees(a, b, **kw):
  for x, y in zip(tgfn.tree.flatten(a)[0], tgfn.tree.flatten(b)[0]): assert_close(x, np.asarray(y), **kw)


def test_vmap_scan_over_batched_xs_init_and_consts():
  B = tnp.asarray(RNG.normal(size=(2, 5, 3)))
  Ws = tnp.asarray(RNG.normal(size=(2, 3, 3)) * 0.5)
  f = lambda w, h0, xs: lax.scan(lambda h, x: (tnp.tanh(h @ w + x), h.sum()), h0, xs)
  h0s = tnp.stack([H0, -H0])
  _assert_trees(tgfn.vmap(f, in_axes=(None, None, 0))(W, H0, B), _loop(lambda xs: f(W, H0, xs), B), rtol=1e-12)
  _assert_trees(tgfn.vmap(f, in_axes=(None, 0, None))(W, h0s, XS), _loop(lambda h: f(W, h, XS), h0s), rtol=1e-12)
  _assert_trees(tgfn.vmap(f, in_axes=(0, None, None))(Ws, H0, XS), _loop(lambda w: f(w, H0, XS), Ws), rtol=1e-12)
  _assert_trees(tgfn.jit(tgfn.vmap(f))(Ws, h0s, B), _loop(f, Ws, h0s, B), rtol=1e-12)


def test_vmap_cond_with_a_batched_predicate_runs_both_branches():
  xs = tnp.concatenate([abs(XS), -abs(XS)])
  _assert_trees(tgfn.vmap(cond_fn)(xs), _loop(cond_fn, xs), rtol=1e-12)
  # an unbatched predicate with batched operands keeps the call
  g = lambda p, x: lax.cond(p, tnp.sin, tnp.cos, x)
  assert_close(tgfn.vmap(g, in_axes=(None, 0))(True, XS), np.sin(np.asarray(XS)), rtol=1e-12)
  sw = lambda i, x: lax.switch(i, [lambda x: x + 1, lambda x: x * 10, lambda x: -x], x)
  idx = tnp.asarray([0, 1, 2, 7, -1])
  _assert_trees(tgfn.vmap(sw)(idx, XS), _loop(sw, idx, XS))


def test_vmap_while_with_a_batched_predicate_masks_finished_members():
  f = lambda x: lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))
  v = tnp.asarray([1.0, 3.0, 0.5, 20.0])
  got = tgfn.vmap(f)(v)
  assert got[0].tolist() == [4, 2, 5, 0] and got[1].tolist() == [16.0, 12.0, 16.0, 20.0]
  _assert_trees(tgfn.jit(tgfn.vmap(f))(v), got)
  # a batched body with an unbatched predicate: the carry becomes batched
  g = lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, 1.0))[1]
  assert_close(tgfn.vmap(g)(v), np.asarray(v) ** 3)


def test_vmap_of_grad_and_grad_of_vmap():
  B = tnp.asarray(RNG.normal(size=(2, 5, 3)))
  per_example = tgfn.vmap(tgfn.grad(scan_loss), in_axes=(None, None, 0))(W, H0, B)
  _assert_trees(per_example, _loop(lambda xs: tgfn.grad(scan_loss)(W, H0, xs), B), rtol=1e-10)
  summed = tgfn.grad(lambda w: tgfn.vmap(scan_loss, in_axes=(None, None, 0))(w, H0, B).sum())(W)
  assert_close(summed, np.asarray(per_example).sum(0), rtol=1e-10)


# ---- errors name both sides
def test_scan_carry_mismatch_names_both_sides():
  with pytest.raises(TypeError, match=r"(?s)carry input \(init\) is .*float32\[3\].*carry output of .* is .*float32\[2\]"):
    lax.scan(lambda c, x: (c[:2], x), tnp.zeros(3), tnp.ones((4, 2)))
  with pytest.raises(TypeError, match=r"(?s)carry input \(init\) is .*int32\[\].*float32\[\]"):
    lax.scan(lambda c, x: (c * 1.5, x), tnp.asarray(1), tnp.ones(4))
  with pytest.raises(TypeError, match=r"(?s)tree structure.*PyTreeSpec\(\(\*, \*\)\).*PyTreeSpec\(\*\)"):
    lax.scan(lambda c, x: (c[0], x), (tnp.zeros(()), tnp.zeros(())), tnp.ones(4))
  with pytest.raises(TypeError, match="must return a pair"):
    lax.scan(lambda c, x: c, tnp.zeros(()), tnp.ones(4))
  with pytest.raises(ValueError, match="different leading sizes"):
    lax.scan(lambda c, x: (c, x), 0.0, (tnp.ones(3), tnp.ones(4)))


def test_branches_that_differ_are_named():
  with pytest.raises(TypeError, match=r"cond: true_fun \(<lambda>\) output and false_fun \(<lambda>\) output .*\n"
                                     r".*true_fun \(<lambda>\) output is .*float32\[3\]\n.*false_fun .* is .*float32\[2\]"):
    lax.cond(True, lambda x: x, lambda x: x[:2], tnp.zeros(3))
  with pytest.raises(TypeError, match=r"(?s)branch 0 \(<lambda>\) output is .*float32\[3\].*branch 1 .* is .*int32\[3\]"):
    lax.switch(0, [lambda x: x, lambda x: x.astype(tnp.int32)], tnp.zeros(3))


def test_while_loop_errors():
  with pytest.raises(TypeError, match=r"(?s)loop carry \(init_val\) is .*float32\[3\].*body_fun's output is .*float32\[1\]"):
    lax.while_loop(lambda c: c.sum() < 3, lambda c: c[:1], tnp.zeros(3))
  with pytest.raises(TypeError, match="boolean scalar, got float32"):
    lax.while_loop(lambda c: c.sum(), lambda c: c, tnp.zeros(3))


def test_weakly_typed_init_takes_the_loops_dtype():
  x = tnp.ones(3, dtype=tnp.float64)
  assert lax.fori_loop(0, 3, lambda i, v: v + x.sum(), 0.0).dtype == tnp.float64
  assert lax.while_loop(lambda v: v < 10, lambda v: v + x.sum(), 0.0).dtype == tnp.float64


def test_concretization_error_points_at_lax():
  with pytest.raises(tgfn.ConcretizationError, match=r"tgfn\.lax\.cond"):
    tgfn.jit(lambda x: x + 1 if x > 0 else x)(1.0)
