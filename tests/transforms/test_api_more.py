"""Jacobians on pytrees and argnums tuples, has_aux; custom_jvp's nondiff_argnums and defjvps;
eval_shape, ShapeDtypeStruct, block_until_ready and make_jaxpr."""
import functools

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp


def _f(d, y):
  return {"o": d["a"] * y, "p": (d["b"] ** 2).sum() * y}


D = {"a": np.array([1.0, 2.0], np.float32), "b": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)}
Y = np.float32(3.0)
# the Jacobian of _f by hand, laid out as JAX does: output tree, then a tuple over argnums (0, 1)
WANT = {"o": ({"a": np.diag([3.0, 3.0]), "b": np.zeros((2, 2, 2))}, np.array([1.0, 2.0])),
        "p": ({"a": np.zeros(2), "b": 2 * Y * D["b"]}, np.array((D["b"] ** 2).sum()))}


@pytest.mark.parametrize("jac", [tgfn.jacfwd, tgfn.jacrev])
def test_jacobian_of_pytrees_with_argnums_tuple(jac):
  got = jac(_f, argnums=(0, 1))({k: tnp.array(v) for k, v in D.items()}, tnp.array(Y))
  assert tgfn.tree.structure(got) == tgfn.tree.structure(WANT)
  for g, w in zip(tgfn.tree.leaves(got), tgfn.tree.leaves(WANT)):
    assert g.shape == np.shape(w)
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)


@pytest.mark.parametrize("jac", [tgfn.jacfwd, tgfn.jacrev])
def test_jacobian_int_argnums_on_a_dict_and_has_aux(jac):
  got = jac(_f, argnums=0)({k: tnp.array(v) for k, v in D.items()}, tnp.array(Y))
  assert set(got["o"]) == {"a", "b"} and got["o"]["b"].shape == (2, 2, 2)
  J, aux = jac(lambda v: (tnp.sin(v), {"n": v.sum()}), has_aux=True)(tnp.array([0.5, 1.0]))
  np.testing.assert_allclose(np.asarray(J), np.diag(np.cos([0.5, 1.0])), rtol=1e-6)
  assert float(aux["n"]) == 1.5


def test_hessian_of_two_arguments_and_aux():
  f = lambda x, y: ((x ** 2) * y).sum()
  H = tgfn.hessian(f, argnums=(0, 1))(tnp.array([1.0, 2.0]), tnp.array(3.0))
  np.testing.assert_allclose(np.asarray(H[0][0]), np.diag([6.0, 6.0]))
  np.testing.assert_allclose(np.asarray(H[0][1]), [2.0, 4.0])
  np.testing.assert_allclose(np.asarray(H[1][0]), [2.0, 4.0])
  assert float(H[1][1]) == 0.0
  H2, aux = tgfn.hessian(lambda x: ((x ** 3).sum(), x[0]), has_aux=True)(tnp.array([1.0, 2.0]))
  np.testing.assert_allclose(np.asarray(H2), np.diag([6.0, 12.0])) and float(aux) == 1.0


def test_custom_jvp_nondiff_argnums():
  @functools.partial(tgfn.custom_jvp, nondiff_argnums=(0,))
  def apply(fn, x):
    return fn(x)

  @apply.defjvp
  def apply_jvp(fn, primals, tangents):
    (x,), (t,) = primals, tangents
    return fn(x), 10.0 * t

  assert float(tgfn.grad(lambda x: apply(tnp.sin, x))(1.0)) == 10.0
  out, t = tgfn.jvp(lambda x: apply(tnp.cos, x), (tnp.array(0.0),), (tnp.array(2.0),))
  assert (float(out), float(t)) == (1.0, 20.0)
  np.testing.assert_array_equal(np.asarray(tgfn.vmap(tgfn.grad(lambda x: apply(tnp.sin, x)))(tnp.ones(3))), 10.0)


def test_custom_jvp_defjvps():
  @tgfn.custom_jvp
  def f(x, y):
    return tnp.sin(x) * y

  f.defjvps(lambda g, ans, x, y: tnp.cos(x) * g * y * 2.0,    # twice the true derivative: the rule is used
            lambda g, ans, x, y: tnp.sin(x) * g)
  gx, gy = tgfn.grad(f, argnums=(0, 1))(tnp.array(0.5), tnp.array(3.0))
  np.testing.assert_allclose([float(gx), float(gy)], [2 * 3 * np.cos(0.5), np.sin(0.5)], rtol=1e-6)

  @tgfn.custom_jvp
  def g(x, y):
    return x * y

  g.defjvps(None, lambda t, ans, x, y: x * t)
  assert float(tgfn.grad(g)(tnp.array(2.0), tnp.array(5.0))) == 0.0


def test_eval_shape_runs_no_kernel(monkeypatch):
  import tgfn.array
  monkeypatch.setattr(tgfn.array, "realize", lambda *a, **k: pytest.fail("eval_shape ran a kernel"))
  out = tgfn.eval_shape(lambda a, b: {"m": a @ b, "s": tnp.exp(a).sum().astype(tnp.float16)},
                        tgfn.ShapeDtypeStruct((2, 3), tnp.float32), np.ones((3, 4), np.float32))
  assert out == {"m": tgfn.ShapeDtypeStruct((2, 4), tnp.float32), "s": tgfn.ShapeDtypeStruct((), "float16")}
  assert out["m"].ndim == 2 and out["m"].size == 8


def test_block_until_ready_on_a_pytree():
  tree = {"a": tnp.arange(3) + 1, "b": [tnp.ones(2) * 2, "label"]}
  out = tgfn.block_until_ready(tree)
  assert out["b"][1] == "label"
  assert all(x.uop.op.name == "BUFFER" for x in (out["a"], out["b"][0]))


def test_make_jaxpr_prints_let_bound_primitives():
  w = tnp.array([1.0, 2.0, 3.0])
  jaxpr = tgfn.make_jaxpr(lambda a, b: ((a * b + w).sum() * 2.0,))(tnp.ones(3), tnp.ones(3, tnp.int32))
  assert str(jaxpr) == "\n".join([
    "{ lambda a:f32[3]; b:f32[3] c:i32[3]. let",
    "    d:f32[3] = cast c",
    "    e:f32[3] = mul b d",
    "    f:f32[3] = add e a",
    "    g:f32[1] = reduce_axis[axes=(0,) op=add] f",
    "    h:f32[] = reshape[shape=()] g",
    "    i:f32[] = mul h 2.0:f32[]",
    "  in (i,) }"])
  assert len(jaxpr.eqns) == 6 and jaxpr.invars == ("b:f32[3]", "c:i32[3]")
  static = tgfn.make_jaxpr(lambda x, n: x * n, static_argnums=1)(tnp.ones(2), 3)
  assert static.invars == ("a:f32[2]",) and "3.0:f32[]" in str(static) and static.eqns[-1].primitive == "mul"


def test_block_until_ready_waits_on_asynchronous_devices_and_skips_the_lookup_on_synchronous_ones(monkeypatch):
  """A device whose launches finish before they return has nothing to wait for: after the first look, its
  arrays' block_until_ready does not look the device up again. One with a synchronize calls it every time."""
  import tgfn.array as array_module
  calls, lookups = [], []

  class FakeDevices:
    def __init__(self, synchronize): self.synchronize = synchronize
    def __getitem__(self, name):
      lookups.append(name)
      return self

  x = tnp.ones(3).block_until_ready()
  monkeypatch.setattr(array_module, "_SYNCHRONOUS_DEVICES", set())
  monkeypatch.setattr(array_module, "Device", FakeDevices(lambda: calls.append(1)))
  x.block_until_ready(), x.block_until_ready()
  assert len(calls) == 2 and len(lookups) == 2
  monkeypatch.setattr(array_module, "Device", FakeDevices(None))
  x.block_until_ready(), x.block_until_ready()
  assert len(lookups) == 3
