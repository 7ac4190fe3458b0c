"""Kernel counts for representative programs: fusion is a contract, not an accident."""
import numpy as np

import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.engine.realize import Counters, with_realized
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops


def realized(*shape, seed=0):
  return tnp.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).realize()


def n_kernels(x) -> int: return len(create_schedule([x.uop]))


def test_elementwise_chain_with_reduction_is_one_kernel():
  a, b, c = realized(4, 5), realized(4, 5, seed=1), realized(4, 5, seed=2)
  assert n_kernels(((a * b) + c).sum(1)) == 1


def test_reduction_with_elementwise_consumer_is_one_kernel():
  a = realized(4, 5)
  assert n_kernels(tnp.sqrt(a.sum(1) * 2 + 1)) == 1


def test_stable_softmax_is_at_most_three_kernels(device):
  a = realized(3, 6)
  e = tnp.exp(a - a.max(-1, keepdims=True))
  out = e / e.sum(-1, keepdims=True)
  assert n_kernels(out) <= 3
  x = np.asarray(a)
  ref = np.exp(x - x.max(-1, keepdims=True))
  assert_close(out, ref / ref.sum(-1, keepdims=True), rtol=1e-5)


def test_movement_ops_make_no_kernel():
  a = realized(4, 6)
  moved = a.reshape(6, 4).T[1:3, ::-1].reshape(-1)
  assert n_kernels(moved) == 1  # the single kernel is the copy that materializes the result
  assert n_kernels(moved * 2 + 1) == 1
  assert n_kernels(moved * 2 + a.sum()) == 2  # a broadcast reduction gets a kernel of its own


def test_a_reshape_that_adds_or_drops_unit_axes_reads_the_same_loop_variables():
  """(4, 1, 6) -> (4, 6) moves no element: the lowered kernel indexes the source with the output's own loops,
  not a linear index split again by // and % (index arithmetic simplification would only remove again)."""
  from tgfn.schedule.kernelize import find_realize_points, lower_kernel
  a = realized(4, 1, 6)
  out = (a.reshape(4, 6) * 2).uop
  kernel = lower_kernel([out], find_realize_points([out]))
  ops = {u.op for u in kernel.ast.toposort()}
  assert Ops.IDIV not in ops and Ops.MOD not in ops, ops
  assert_close((a.reshape(4, 6) * 2).numpy(), np.asarray(a).reshape(4, 6) * 2)


def test_broadcast_reduction_is_computed_once_not_per_element():
  a = realized(8, 8)
  centered = a - a.mean(1, keepdims=True)
  assert n_kernels(centered) == 2


def test_realized_values_are_reused_not_recomputed(device):
  a = realized(4, 4)
  s = (a * 3).sum(0)
  later = s + 1           # built on the lazy s
  s.realize()
  graph = with_realized(later.uop)
  assert [u for u in graph.toposort() if u.op is Ops.REDUCE_AXIS] == []  # s is loaded, not recomputed
  before = Counters.kernels_launched
  assert_close(later, (np.asarray(a) * 3).sum(0) + 1, rtol=1e-6)
  assert Counters.kernels_launched - before == 1


def _loads_per_kernel(*outs) -> list[int]:
  return [sum(1 for u in item.kernel.ast.toposort() if u.op is Ops.LOAD) for item in create_schedule([o.uop for o in outs])]


def test_a_costly_value_that_several_kernels_read_is_computed_once():
  """The sum of 16 buffers read by two reductions (a transformer's residual stream read by its layer norms):
  computed once into a buffer that each reduction loads, not recomputed from 16 loads in each."""
  xs = [realized(16, 16, seed=i) for i in range(16)]
  stream = xs[0]
  for x in xs[1:]: stream = stream + x
  assert _loads_per_kernel(stream.sum(0), stream.max(1)) == [16, 1, 1]
  want = np.sum([np.asarray(x) for x in xs], axis=0)
  assert_close(stream.sum(0), want.sum(0), rtol=1e-5, atol=1e-5)
  assert_close(stream.max(1), want.max(1), rtol=1e-6)


def test_a_cheap_value_that_several_kernels_read_stays_inlined():
  """A short chain (a bias and an activation) is recomputed where it is read: cheaper than a store and a load."""
  a, b = realized(16, 16), realized(16, seed=1)
  h = tnp.maximum(a + b, 0.0)
  assert _loads_per_kernel(h.sum(0), h.max(1)) == [2, 2]


def test_a_normal_sample_is_drawn_once_for_the_value_and_its_gradient():
  """The reparameterization trick: z = mu + exp(s) * eps with eps a normal draw (~1000 ops of threefry and
  erfinv) feeds a decoder's matmul, and the gradient of s needs eps again: it is drawn once, not in both
  kernels (a VAE's step drew it twice)."""
  import tgfn
  key = tgfn.random.PRNGKey(0)
  w = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
  def loss(mu, s):
    z = mu + tnp.exp(s) * tgfn.random.normal(key, mu.shape)
    return tnp.tanh(z @ w).sum()
  mu, s = tnp.zeros((64, 16)), tnp.zeros((64, 16))
  kernels = tgfn.jit(tgfn.grad(loss, argnums=(0, 1))).lower(mu, s).kernels
  drawing = [k.name for k in kernels if "^" in k.source]  # threefry's xors
  assert len(drawing) == 1, drawing
  eps = np.asarray(tgfn.random.normal(key, (64, 16)), np.float64)
  g_mu, g_s = tgfn.jit(tgfn.grad(loss, argnums=(0, 1)))(mu, s)
  want_g_mu = (1 - np.tanh(eps @ w) ** 2) @ w.T
  np.testing.assert_allclose(np.asarray(g_mu), want_g_mu, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.asarray(g_s), want_g_mu * eps, rtol=1e-4, atol=1e-5)


def test_long_elementwise_chains_fuse_without_hitting_the_recursion_limit():
  x = tnp.array([1.0])
  for _ in range(3000): x = x * 1.0001 + 0.1
  want = np.float32(1.0)
  for _ in range(3000): want = np.float32(want * np.float32(1.0001) + np.float32(0.1))
  assert_close(x, np.array([want]), rtol=1e-5)


def _jit_flops(fn, *args) -> list[tuple[str, int]]:
  import tgfn
  return [(k.name, k.flops) for k in tgfn.jit(fn).lower(*args).kernels]


def test_random_draw_is_not_recomputed_inside_a_matmul():
  import tgfn
  n = 64
  kernels = _jit_flops(lambda key, y: tgfn.random.normal(key, (n, n)) @ y.T, tgfn.random.PRNGKey(0), tnp.ones((n, n)))
  # the draw is computed once into a buffer (then y is packed into panels) before the contraction,
  # which does a matmul's work: fused into it, the draw was recomputed per multiply-add (370x the work)
  assert len(kernels) >= 2 and kernels[0][0].startswith("E_")
  assert kernels[-1][1] < 1.2 * 2 * n ** 3


def test_activation_derivative_is_not_recomputed_inside_weight_gradients(monkeypatch):
  import tgfn
  monkeypatch.setenv("TRANSCENDENTAL", "1")  # tanh's exp as one libm call: the flops counted are the contractions'
  rng = np.random.default_rng(0)
  w1, w2, x = (tnp.array(rng.standard_normal(s).astype(np.float32)) for s in ((32, 64), (64, 16), (128, 32)))
  loss = lambda w1, w2, x: tnp.tanh(x @ w1).dot(w2).sum()  # noqa: E731
  kernels = _jit_flops(tgfn.grad(loss, argnums=(0, 1)), w1, w2, x)
  matmul_flops = 2 * 128 * 32 * 64 * 2 + 2 * 128 * 64 * 16 * 2  # forward and weight-gradient contractions
  assert sum(f for _, f in kernels) < 1.5 * matmul_flops, kernels  # it was 10x


def test_cheap_operand_of_a_contraction_is_materialized_once():
  a, b = realized(16, 16), realized(16, 16, seed=1)
  assert n_kernels((a * 2) @ b) == 2
  assert n_kernels(a @ b) == 1


def test_a_scalar_broadcast_into_a_contraction_gets_no_kernel_of_its_own():
  """The gradient of a mean broadcasts -1/n into the weight gradient's contraction: a scalar depends on no
  loop, so codegen computes it once ahead of them; a kernel and a buffer of its own would only cost."""
  import tgfn
  x, w = realized(64, 32), realized(32, 16, seed=1)
  grad = tgfn.jit(tgfn.grad(lambda w, x: -(x @ w).mean()))
  assert [k.name for k in grad.lower(w, x).kernels] == ["r_32_16"]
  want = (-np.asarray(x, np.float64).sum(0)[:, None].repeat(16, 1) / (64 * 16)).astype(np.float32)
  assert_close(grad(w, x), want, rtol=1e-5, atol=1e-7)
