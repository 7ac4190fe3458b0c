"""Every collective, and its derivatives, three ways: shard_map (and pmap) over 1, 2 and 4 devices, vmap
with an axis name, and NumPy on the members' values. The semantics do not depend on the backend: these run
on instances of the PYTHON reference interpreter, which compiles nothing (tests/distributed/test_devices.py
and test_data_parallel.py cover the CPU instances)."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tgfn.sharding import P, make_mesh



@pytest.fixture(autouse=True)
def _four_interpreter_devices(monkeypatch):
  monkeypatch.setenv("DEV", "PYTHON")
  monkeypatch.setenv("TGFN_PYTHON_DEVICES", "4")


# (collective applied to one member's block of shape (4, 8), NumPy reference: members -> per-member outputs)
CASES = {
  "psum": (lambda b: lax.psum(b, "i"), lambda xs: [sum(xs)] * len(xs)),
  "pmean": (lambda b: lax.pmean(b, "i"), lambda xs: [sum(xs) / len(xs)] * len(xs)),
  "pmax": (lambda b: lax.pmax(b, "i"), lambda xs: [np.max(xs, 0)] * len(xs)),
  "pmin": (lambda b: lax.pmin(b, "i"), lambda xs: [np.min(xs, 0)] * len(xs)),
  "all_gather": (lambda b: lax.all_gather(b, "i"), lambda xs: [np.stack(xs)] * len(xs)),
  "all_gather_axis1": (lambda b: lax.all_gather(b, "i", axis=1), lambda xs: [np.stack(xs, 1)] * len(xs)),
  "all_gather_tiled": (lambda b: lax.all_gather(b, "i", axis=1, tiled=True),
                       lambda xs: [np.concatenate(xs, 1)] * len(xs)),
  "psum_scatter_tiled": (lambda b: lax.psum_scatter(b, "i", scatter_dimension=1, tiled=True),
                         lambda xs: np.split(sum(xs), len(xs), axis=1)),
  "all_to_all_tiled": (lambda b: lax.all_to_all(b, "i", 1, 0, tiled=True),
                       lambda xs: [np.concatenate([np.split(x, len(xs), 1)[i] for x in xs], 0) for i in range(len(xs))]),
  "ppermute": (lambda b: lax.ppermute(b, "i", [(j, (j + 1) % lax.axis_size("i")) for j in range(lax.axis_size("i"))]),
               lambda xs: [xs[(i - 1) % len(xs)] for i in range(len(xs))]),
  "ppermute_partial": (lambda b: lax.ppermute(b, "i", [(0, lax.axis_size("i") - 1)]),
                       lambda xs: [np.zeros_like(xs[0])] * (len(xs) - 1) + [xs[0]]),
  "axis_index": (lambda b: b * 0 + lax.axis_index("i"), lambda xs: [np.zeros_like(x) + i for i, x in enumerate(xs)]),
}


def _members(n: int) -> list[np.ndarray]:
  rng = np.random.default_rng(n)
  return [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(n)]


def _shard_mapped(f, n):
  mesh = make_mesh((n,), ("i",))
  # each member's output gets a leading axis of 1, so out_specs P("i") stacks them whatever their shape
  return tgfn.shard_map(lambda b: f(b[0])[None], mesh=mesh, in_specs=P("i"), out_specs=P("i"))


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("name", list(CASES))
def test_collective_shard_map_vmap_and_numpy_agree(name, n):
  f, reference = CASES[name]
  xs = _members(n)
  want = np.stack(reference(xs))
  stacked = tnp.asarray(np.stack(xs))
  np.testing.assert_allclose(tgfn.vmap(f, axis_name="i")(stacked).numpy(), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(_shard_mapped(f, n)(stacked).numpy(), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(tgfn.pmap(f, "i")(stacked).numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2])
@pytest.mark.parametrize("name", [k for k in CASES if k != "axis_index"])
def test_collective_derivatives_shard_map_equal_vmap(name, n):
  f, _ = CASES[name]
  xs = np.stack(_members(n))
  w = tnp.asarray(np.random.default_rng(7).standard_normal(np.stack(CASES[name][1](list(xs))).shape[1:]).astype(np.float32))
  def member_loss_grad(b):  # the per-member gradient, taken inside the map (the collectives' VJP rules)
    return tgfn.grad(lambda v: (f(v) * w).sum())(b)
  def member_tangent(b):  # a forward derivative inside the map (the JVP rules)
    return tgfn.jvp(lambda v: f(v) * w, (b,), (tnp.sin(b),))[1]
  stacked = tnp.asarray(xs)
  for g in (member_loss_grad, member_tangent):
    via_vmap = tgfn.vmap(g, axis_name="i")(stacked).numpy()
    np.testing.assert_allclose(_shard_mapped(g, n)(stacked).numpy(), via_vmap, rtol=1e-5, atol=1e-5)
  # and through the whole map from outside: the per-device graph differentiated as any graph
  outer = tgfn.grad(lambda s: (_shard_mapped(f, n)(s) * w).sum())(stacked).numpy()
  np.testing.assert_allclose(outer, tgfn.grad(lambda s: (tgfn.vmap(f, axis_name="i")(s) * w).sum())(stacked).numpy(),
                             rtol=1e-5, atol=1e-5)


def test_transposes_follow_the_per_device_convention():
  xs = np.stack(_members(2))
  w = np.arange(32, dtype=np.float32).reshape(4, 8)
  def grad_of(f): return tgfn.vmap(lambda b: tgfn.grad(lambda v: (f(v) * w).sum())(b), axis_name="i")(xs).numpy()
  # psum's result is the same on every member: its cotangent reaches each member as it is
  np.testing.assert_allclose(grad_of(lambda v: lax.psum(v, "i")), np.stack([w, w]))
  np.testing.assert_allclose(grad_of(lambda v: lax.pmean(v, "i")), np.stack([w, w]) / 2)
  # all_gather's transpose is psum_scatter: member j gets the sum over members of block j of their cotangent
  wg = np.arange(64, dtype=np.float32).reshape(2, 4, 8)
  got = tgfn.vmap(lambda b: tgfn.grad(lambda v: (lax.all_gather(v, "i") * wg).sum())(b), axis_name="i")(xs).numpy()
  np.testing.assert_allclose(got, 2 * wg)
  # ppermute's transpose sends the cotangent back along the inverse permutation
  got = tgfn.vmap(lambda b: tgfn.grad(lambda v: (lax.ppermute(v, "i", [(0, 1)]) * w).sum())(b), axis_name="i")(xs).numpy()
  np.testing.assert_allclose(got, np.stack([w, np.zeros_like(w)]))


@pytest.mark.parametrize("split, concat", [(0, 0), (1, 1), (0, 1), (1, 0)])
def test_untiled_all_to_all_stacks_what_each_member_receives(split, concat):
  """Member i gets block i of every member's x along split_axis (that axis removed), stacked in member
  order along a new concat_axis. With split_axis == concat_axis that is a transpose of the member axis and
  that axis: JAX 0.10.2's vmap(all_to_all(b, "i", 0, 0)) of arange(64).reshape(4, 4, 4) gives member 1
  [[4, 5, 6, 7], [20, 21, 22, 23], [36, 37, 38, 39], [52, 53, 54, 55]]."""
  xs = np.arange(64, dtype=np.float32).reshape(4, 4, 4)
  want = np.stack([np.stack([np.take(x, i, axis=split) for x in xs], axis=concat) for i in range(4)])
  if split == concat: np.testing.assert_array_equal(want, np.swapaxes(xs, 0, split + 1))
  f = lambda b: lax.all_to_all(b, "i", split, concat)  # noqa: E731
  for label, run in (("vmap", tgfn.vmap(f, axis_name="i")), ("shard_map", _shard_mapped(f, 4)),
                     ("pmap", tgfn.pmap(f, "i"))):
    np.testing.assert_array_equal(run(tnp.asarray(xs)).numpy(), want, err_msg=label)
  got = tgfn.vmap(lambda b: tgfn.grad(lambda v: (f(v) * tnp.asarray(want[0])).sum())(b), axis_name="i")(xs)
  assert got.shape == xs.shape   # the transpose (all_to_all with the axes swapped) inverts the shapes


EXTREMA = {"pmax": lambda v: lax.pmax(v, "i"), "pmin": lambda v: -lax.pmin(-v, "i")}


@pytest.mark.parametrize("name", list(EXTREMA))
def test_tied_members_share_the_derivative_of_pmax_and_pmin(name):
  """Members 0, 2 and 3 hold the maximum: each gets a third of its derivative, as jnp.max over the mapped
  axis would give them (JAX has no derivative rule for pmax), whichever map runs the members."""
  f = EXTREMA[name]
  x = tnp.asarray([[3.0], [1.0], [3.0], [3.0]])
  tangent = tnp.asarray([[1.0], [10.0], [100.0], [1000.0]])
  maps = {"vmap": lambda g: tgfn.vmap(g, axis_name="i"), "shard_map": lambda g: _shard_mapped(g, 4),
          "pmap": lambda g: tgfn.pmap(g, "i")}
  for label, mapped in maps.items():
    inner = mapped(tgfn.grad(lambda v: f(v).sum()))(x)   # the collective's own rule, on each member
    np.testing.assert_allclose(inner.numpy().ravel(), [1 / 3, 0, 1 / 3, 1 / 3], rtol=1e-6, err_msg=label)
    outer = tgfn.grad(lambda s: mapped(f)(s).sum())(x)   # the four members' results, differentiated outside
    np.testing.assert_allclose(outer.numpy().ravel(), [4 / 3, 0, 4 / 3, 4 / 3], rtol=1e-6, err_msg=label)
    forward = tgfn.jvp(mapped(f), (x,), (tangent,))[1]
    np.testing.assert_allclose(forward.numpy().ravel(), [367.0] * 4, rtol=1e-6, err_msg=label)


def test_shard_map_equals_the_function_on_the_full_array():
  mesh = make_mesh((4,), ("i",))
  x = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
  col_sums = tgfn.shard_map(lambda b: lax.psum(b.sum(0), "i"), mesh=mesh, in_specs=P("i"), out_specs=P())
  np.testing.assert_allclose(col_sums(x).numpy(), x.sum(0), rtol=1e-5)
  np.testing.assert_allclose(tgfn.jit(col_sums)(x).numpy(), x.sum(0), rtol=1e-5)  # the unrolled graph, compiled
  softmax = tgfn.shard_map(lambda b: tnp.exp(b) / lax.psum(tnp.exp(b).sum(0), "i"), mesh=mesh, in_specs=P("i"),
                           out_specs=P("i"))
  np.testing.assert_allclose(softmax(x).numpy(), np.exp(x) / np.exp(x).sum(0), rtol=1e-5)


def test_two_dimensional_mesh_collectives_over_one_axis_or_both():
  mesh = make_mesh((2, 2), ("x", "y"))
  x = np.arange(32, dtype=np.float32).reshape(4, 8)
  blocks = [[x[2 * a:2 * a + 2, 4 * b:4 * b + 4] for b in range(2)] for a in range(2)]
  over_x = tgfn.shard_map(lambda v: lax.psum(v, "x"), mesh=mesh, in_specs=P("x", "y"), out_specs=P(None, "y"))
  np.testing.assert_allclose(over_x(x).numpy(), np.concatenate([blocks[0][b] + blocks[1][b] for b in range(2)], 1))
  over_both = tgfn.shard_map(lambda v: lax.psum(v, ("x", "y")), mesh=mesh, in_specs=P("x", "y"), out_specs=P())
  np.testing.assert_allclose(over_both(x).numpy(), sum(b for row in blocks for b in row))
  index = tgfn.shard_map(lambda v: v[:1, :1] * 0 + lax.axis_index(("x", "y")), mesh=mesh, in_specs=P("x", "y"),
                         out_specs=P("x", "y"))
  np.testing.assert_array_equal(index(x).numpy(), [[0, 1], [2, 3]])


def test_vmap_inside_shard_map_leaves_the_outer_axis_to_shard_map():
  mesh = make_mesh((2,), ("i",))
  x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)  # 2 devices x a vmapped axis of 3
  f = tgfn.shard_map(lambda b: tgfn.vmap(lambda r: lax.psum(r, "i") + lax.psum(r, "j"), axis_name="j")(b[0])[None],
                     mesh=mesh, in_specs=P("i"), out_specs=P("i"))
  want = x.sum(0, keepdims=True) + x.sum(1, keepdims=True)
  np.testing.assert_allclose(f(x).numpy(), want)


@pytest.mark.parametrize("call, message", [
  (lambda: lax.psum(tnp.ones(2), "i"), "unbound axis name: 'i'"),
  (lambda: tgfn.vmap(lambda v: lax.psum(v, "k"), axis_name="i")(tnp.ones((2, 2))), "unbound axis name: 'k'"),
  (lambda: tgfn.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 1)]), axis_name="i")(tnp.ones((2, 2))), "twice"),
  (lambda: tgfn.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(tnp.ones((2, 3))), "must equal the axis size"),
])
def test_collective_misuse_is_a_clear_error(call, message):
  with pytest.raises((NameError, ValueError), match=message): call()


def test_mesh_and_pmap_larger_than_the_devices_are_clear_errors():
  with pytest.raises(ValueError, match="needs 8 devices, but only 4"): make_mesh((8,), ("i",))
  with pytest.raises(ValueError, match="needs 5 devices, but only 4"): tgfn.pmap(lambda v: v)(tnp.ones((5, 2)))
  with pytest.raises(ValueError, match="not divisible"):
    tgfn.shard_map(lambda b: b, mesh=make_mesh((4,), ("i",)), in_specs=P("i"), out_specs=P("i"))(tnp.ones(6))


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "uint64", "float16", "bfloat16", "complex64"])
def test_the_cross_process_step_keeps_every_dtype(dtype):
  # in one process the MPI step hands its operand back: it must come back unchanged, in its own dtype
  # (tests/distributed/test_mpi.py checks two processes)
  from tgfn.lax.cross_process import allgather_processes, allreduce_processes
  values = {"bool": [True, False], "int8": [-128, 127], "int64": [2 ** 62 + 1, -(2 ** 62) - 1],
            "uint64": [2 ** 64 - 1, 2 ** 63 + 1], "float16": [65504.0, 2.0 ** -24], "bfloat16": [3.0e38, -1.5],
            "complex64": [complex(1, 2 ** 20), -3j]}[dtype]
  x = tnp.asarray(np.array(values, dtype if dtype != "bfloat16" else "float32")).astype(dtype)
  ops = ("sum",) if dtype == "complex64" else ("sum", "max", "min")  # (complex numbers have no order)
  results = [allgather_processes(x, 0)] + [allreduce_processes(x, op) for op in ops]
  for r in results:
    assert r.dtype == x.dtype
    np.testing.assert_array_equal(r.numpy(), x.numpy())
