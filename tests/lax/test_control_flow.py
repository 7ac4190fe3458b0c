"""tgfn.lax control flow against unrolled Python loops, eagerly and under jit, on every device."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tests.conftest import assert_close

RNG = np.random.default_rng(0)
W = RNG.normal(size=(3, 3)).astype(np.float32) * 0.5
XS = RNG.normal(size=(6, 3)).astype(np.float32)


def rnn_step(carry, x):
  h, total = carry
  h = tnp.tanh(h @ tnp.asarray(W) + x["a"] * 2.0 - x["b"])
  return (h, total + h.sum()), {"h": h, "sq": h * h}


def scan_by_hand(f, init, xs, n, reverse=False):
  carry, ys = init, [None] * n
  for i in (range(n - 1, -1, -1) if reverse else range(n)):
    carry, ys[i] = f(carry, tgfn.tree.map(lambda x: x[i], xs))
  return carry, tgfn.tree.map(lambda *y: tnp.stack(y), *ys)


def assert_trees_close(a, b, **kw):
  la, ta = tgfn.tree.flatten(a)
  lb, tb = tgfn.tree.flatten(b)
  assert ta == tb
  for x, y in zip(la, lb): assert_close(x, np.asarray(y), **kw)


@pytest.mark.parametrize("reverse,unroll", [(False, 1), (True, 1), (True, 2)])
def test_scan_matches_a_python_loop(reverse, unroll):
  xs = {"a": tnp.asarray(XS), "b": tnp.asarray(XS[::-1].copy())}
  init = (tnp.zeros(3), tnp.asarray(0.0))
  got = lax.scan(rnn_step, init, xs, reverse=reverse, unroll=unroll)
  want = scan_by_hand(rnn_step, init, xs, 6, reverse)
  assert_trees_close(got, want, rtol=1e-5, atol=1e-6)
  jitted = tgfn.jit(lambda init, xs: lax.scan(rnn_step, init, xs, reverse=reverse, unroll=unroll))(init, xs)
  assert_trees_close(jitted, want, rtol=1e-5, atol=1e-6)


def test_scan_with_length_and_no_xs_and_no_ys():
  carry, ys = lax.scan(lambda c, _: (c * 2, None), tnp.asarray(1.0), None, length=5)
  assert float(carry) == 32.0 and ys is None
  carry, ys = lax.scan(lambda c, x: (c, ()), tnp.asarray(1.0), tnp.zeros((0, 2)))
  assert float(carry) == 1.0 and ys == ()


def test_scan_zero_length_returns_the_init_and_empty_ys():
  carry, ys = tgfn.jit(lambda c, xs: lax.scan(lambda c, x: (c + x.sum(), c), c, xs))(tnp.asarray(3.0), tnp.zeros((0, 2)))
  assert float(carry) == 3.0 and ys.shape == (0,)


def test_scan_captures_outer_values_as_inputs():
  w = tnp.asarray(W)
  scale = tnp.asarray(2.0) * 3.0  # lazy work outside the body is computed once, not per step
  f = lambda h, x: (tnp.tanh(h @ w) * scale + x, h.sum())
  got = lax.scan(f, tnp.zeros(3), tnp.asarray(XS))
  assert_trees_close(got, scan_by_hand(f, tnp.zeros(3), tnp.asarray(XS), 6), rtol=1e-5)


def test_nested_scan():
  def outer(c, row):
    inner, ys = lax.scan(lambda a, v: (a * 0.5 + v, a), c, row)
    return inner, ys.sum()
  xs = tnp.asarray(RNG.normal(size=(4, 5)).astype(np.float32))
  got = tgfn.jit(lambda xs: lax.scan(outer, tnp.asarray(1.0), xs))(xs)
  c, want_ys = 1.0, []
  for row in np.asarray(xs):
    acc = []
    for v in row: acc.append(c); c = c * 0.5 + v  # noqa: E702
    want_ys.append(sum(acc))
  assert_close(got[0], np.float32(c), rtol=1e-5)
  assert_close(got[1], np.array(want_ys, np.float32), rtol=1e-5)


def test_eager_outputs_of_one_call_are_computed_together():
  from tgfn.engine.realize import Counters
  carry, ys = lax.scan(lambda c, x: (c + x, c), tnp.asarray([0.0, 0.0]), tnp.asarray(XS[:, :2]) * 2.0)
  before = Counters.kernels_launched
  carry.realize()
  assert Counters.kernels_launched - before >= 6  # the loop ran: a kernel per step at least
  before = Counters.kernels_launched
  ys.realize()
  assert Counters.kernels_launched == before  # its sibling output came with it
  assert_close(ys[-1], (XS[:5, :2] * 2).sum(0), rtol=1e-6)


def test_map():
  xs = tnp.asarray(XS)
  assert_close(lax.map(lambda x: (x * x).sum(), xs), (XS * XS).sum(1), rtol=1e-6)


def test_on_every_device(device):
  xs = tnp.asarray(XS)
  carry, ys = lax.scan(lambda c, x: (c * 0.5 + x, c.sum()), tnp.zeros(3), xs, reverse=True)
  want_c, want_ys = np.zeros(3, np.float32), np.zeros(6, np.float32)
  for i in range(5, -1, -1): want_ys[i], want_c = want_c.sum(), want_c * np.float32(0.5) + XS[i]
  assert_close(carry, want_c, rtol=1e-6)
  assert_close(ys, want_ys, rtol=1e-6)
  assert int(lax.while_loop(lambda c: c < 100, lambda c: c * 3, 1)) == 243
  assert_close(tgfn.jit(lambda p, x: lax.cond(p, tnp.sin, tnp.cos, x))(False, xs), np.cos(XS), rtol=1e-6)


def test_scan_slices_staged_through_copies_where_handles_are_not_addresses(monkeypatch):
  """On a device without buffer views (OpenCL, WebGPU) each step's slices are copied in and out of scratch
  buffers by the allocator's copy_region; forced on the test device, the values are the zero-copy path's."""
  device = tgfn.Device[tgfn.Device.DEFAULT]
  xs = {"a": tnp.asarray(XS), "b": tnp.asarray(XS[::-1].copy())}
  init = (tnp.zeros(3), tnp.asarray(0.0))
  want = [np.asarray(v) for v in tgfn.tree.leaves(lax.scan(rnn_step, init, xs, reverse=True))]
  monkeypatch.setattr(device, "address_handles", False)
  if isinstance(device.allocator, tgfn.device.HostAllocator):  # PYTHON's host arrays are views anyway
    pytest.skip("the device's buffers are host arrays")
  got = [np.asarray(v) for v in tgfn.tree.leaves(lax.scan(rnn_step, init, xs, reverse=True))]
  for g, w in zip(got, want, strict=True): np.testing.assert_array_equal(g, w)


def test_while_and_fori_loops():
  assert int(lax.while_loop(lambda c: c < 100, lambda c: c * 3, 1)) == 243
  got = lax.fori_loop(0, 5, lambda i, v: v * 2.0 + i, tnp.ones(2))
  want = np.ones(2, np.float32)
  for i in range(5): want = want * 2 + i
  assert_close(got, want)
  # traced bounds: a while loop inside jit
  f = tgfn.jit(lambda lo, hi, v: lax.fori_loop(lo, hi, lambda i, v: v * 2.0 + i, v))
  assert_close(f(0, 5, tnp.ones(2)), want)
  assert_close(f(3, 3, tnp.ones(2)), np.ones(2, np.float32))
  assert f.trace_count == 1


def test_while_loop_with_a_pytree_carry_under_jit():
  def collatz(n):
    return lax.while_loop(lambda c: c[0] != 1, lambda c: (tnp.where(c[0] % 2 == 0, c[0] // 2, 3 * c[0] + 1), c[1] + 1), (n, 0))
  f = tgfn.jit(collatz)
  assert [int(f(tnp.asarray(n))[1]) for n in (1, 6, 27)] == [0, 8, 111]


def test_cond_and_switch():
  x = tnp.asarray(XS[0])
  for pred in (True, False):
    assert_close(lax.cond(pred, tnp.sin, tnp.cos, x), np.sin(XS[0]) if pred else np.cos(XS[0]), rtol=1e-6)
    f = tgfn.jit(lambda p, x: lax.cond(p, lambda a, b: a * b, lambda a, b: a - b, x, 2.0))
    assert_close(f(pred, x), XS[0] * 2 if pred else XS[0] - 2)
  branches = [lambda x: x + 1, lambda x: x * 10, lambda x: -x]
  g = tgfn.jit(lambda i, x: lax.switch(i, branches, x))
  for i, want in [(-3, XS[0] + 1), (0, XS[0] + 1), (1, XS[0] * 10), (2, -XS[0]), (7, -XS[0])]:  # clamped
    assert_close(lax.switch(i, branches, x), want)
    assert_close(g(tnp.asarray(i), x), want)
  assert g.trace_count == 1


@pytest.mark.parametrize("n,reverse", [(1, False), (2, True), (5, False), (8, True), (13, False)])
def test_associative_scan(n, reverse):
  x = RNG.normal(size=(n, 2)).astype(np.float32)
  got = lax.associative_scan(tnp.add, tnp.asarray(x), reverse=reverse)
  want = np.cumsum(x[::-1], 0)[::-1] if reverse else np.cumsum(x, 0)
  assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_associative_scan_on_pytrees_and_another_axis():
  # a linear recurrence h_t = a_t h_{t-1} + b_t as pairs (a, b), along axis 1
  a = RNG.uniform(0.5, 1.0, size=(2, 7)).astype(np.float32)
  b = RNG.normal(size=(2, 7)).astype(np.float32)
  combine = lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1])
  _, h = lax.associative_scan(combine, (tnp.asarray(a), tnp.asarray(b)), axis=1)
  want = np.zeros_like(b)
  acc = np.zeros(2, np.float32)
  for t in range(7): acc = a[:, t] * acc + b[:, t]; want[:, t] = acc  # noqa: E702
  assert_close(h, want, rtol=1e-5, atol=1e-5)


def test_a_1000_step_scan_compiles_what_a_10_step_one_does_and_never_retraces():
  from tgfn.engine import call, realize
  counts = []
  for n in (10, 1000):
    realize._compiled.clear()  # every kernel counts, even one another test compiled
    call._bodies.clear()
    before = realize.Counters.kernels_compiled
    f = tgfn.jit(lambda w, xs: lax.scan(lambda h, x: (tnp.tanh(h @ w + x), h.sum()), tnp.zeros(3), xs))
    xs = tnp.ones((n, 3))
    h, ys = f(tnp.asarray(W), xs)
    f(tnp.asarray(W), xs * 2)
    counts.append(realize.Counters.kernels_compiled - before)
    assert f.trace_count == 1 and ys.shape == (n,)
  assert counts[0] == counts[1] > 0


def test_a_body_traced_twice_is_one_body():
  init, xs = tnp.asarray(0.0), tnp.ones(4)
  a = lax.scan(lambda c, x: (c * 2.0 + x, c), init, xs)[0].uop
  b = lax.scan(lambda c, x: (c * 2.0 + x, c), init, xs)[0].uop
  assert a.arg[0] == b.arg[0] and hash(a.arg[0]) == hash(b.arg[0])
  assert a is b  # structural hashing: the same call node, computed once


def test_a_scan_rnn_trains():
  rng = np.random.default_rng(1)
  xs = tnp.asarray(rng.normal(size=(12, 4, 2)).astype(np.float32))
  target = tnp.asarray(np.cumsum(np.asarray(xs)[..., 0], axis=0)[-1] * 0.3)
  params = {"wh": tnp.asarray(rng.normal(size=(8, 8)).astype(np.float32) * 0.1),
            "wx": tnp.asarray(rng.normal(size=(2, 8)).astype(np.float32) * 0.3),
            "wo": tnp.asarray(rng.normal(size=(8,)).astype(np.float32) * 0.3)}

  def loss(p):
    h, _ = lax.scan(lambda h, x: (tnp.tanh(h @ p["wh"] + x @ p["wx"]), None), tnp.zeros((4, 8)), xs)
    return ((h @ p["wo"] - target) ** 2).mean()

  step = tgfn.jit(lambda p: tgfn.tree.map(lambda w, g: w - 0.5 * g, p, tgfn.grad(loss)(p)))
  losses = [float(loss(params))]
  for _ in range(8):
    params = step(params)
    losses.append(float(loss(params)))
  assert losses[-1] < 0.7 * losses[0]
  assert step.trace_count == 1
