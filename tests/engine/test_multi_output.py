"""Multi-output kernels: elementwise values of one shape that feed one another, or read the same data,
are one kernel that stores each of them (tgfn/schedule/grouping.py)."""
import numpy as np

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.codegen.opts import OptOps
from tgfn.engine.realize import Counters, compile_kernel
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops


def realized(*shape, seed=0):
  return tnp.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).realize()


def adam_update(p, g, m, v, lr=1e-3, b1=0.9, b2=0.999):
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  return p - lr * m / (tnp.sqrt(v) + 1e-8), m, v


def test_an_optimizer_update_is_one_kernel_with_three_outputs(device):
  p, g, m, v = (realized(64, 32, seed=i) for i in range(4))
  v = v * v
  v = v.realize()
  outs = adam_update(p, g, m, v)
  [item] = create_schedule([o.uop for o in outs])
  assert item.kernel.n_outputs == 3 and len(item.outputs) == 3
  if device == "CPU":  # the heuristic vectorizes a kernel with several stores at one index
    assert any(o.op is OptOps.VECTOR for o in compile_kernel(item.kernel, "CPU").opts)
  P, G, M, V = (np.asarray(a) for a in (p, g, m, v))
  M2 = 0.9 * M + 0.1 * G
  V2 = 0.999 * V + 0.001 * G * G
  launched = Counters.kernels_launched
  tgfn.Array.realize_all(outs)
  tnp_outs = outs
  assert Counters.kernels_launched - launched == 1
  assert_close(tnp_outs[1], M2, rtol=1e-6)
  assert_close(tnp_outs[2], V2, rtol=1e-6)
  assert_close(tnp_outs[0], P - 1e-3 * M2 / (np.sqrt(V2) + 1e-8), rtol=1e-5, atol=1e-7)


def test_a_value_that_is_an_output_and_an_operand_is_computed_once():
  x = realized(1000)
  a = tnp.exp(tnp.sin(x))
  b = a * 2 + 1
  [item] = create_schedule([a.uop, b.uop])
  kernel = compile_kernel(item.kernel, "CPU")
  alone = compile_kernel(create_schedule([(tnp.exp(tnp.sin(x)) * 2 + 1).uop])[0].kernel, "CPU")
  # b reuses a's value in registers: the pair costs the ops of b alone, not a's twice
  assert kernel.flops == alone.flops
  assert_close(b, np.exp(np.sin(np.asarray(x))) * 2 + 1, rtol=1e-5)


def test_an_output_read_through_a_movement_op_keeps_its_own_kernel(device):
  x = realized(8, 8)
  a = x * 3
  b = a.T + x
  items = create_schedule([a.uop, b.uop])
  assert [i.kernel.n_outputs for i in items] == [1, 1]
  xs = np.asarray(x)
  tgfn.Array.realize_all([a, b])
  assert_close(a, xs * 3)
  assert_close(b, (xs * 3).T + xs)


def test_no_kernel_runs_before_the_kernel_it_reads(device):
  # a -> sum(a) -> b: a and b have one shape, but b needs the reduction, which needs a
  x = realized(16, 4)
  a = x * 2
  b = a + a.sum(0, keepdims=True)
  c = b * a
  outs = [a, b, c]
  items = create_schedule([o.uop for o in outs])
  position = {o: k for k, item in enumerate(items) for o in item.outputs}
  for k, item in enumerate(items):
    assert all(position.get(i, -1) < k for i in item.inputs)
  xs = np.asarray(x)
  ra = xs * 2
  rb = ra + ra.sum(0, keepdims=True)
  tgfn.Array.realize_all(outs)
  for g, r in zip(outs, (ra, rb, rb * ra)): assert_close(g, r, rtol=1e-5)


def test_unrelated_values_stay_apart():
  a, b = realized(8), realized(8, seed=1)
  items = create_schedule([(a * 2).uop, (b * 3).uop])
  assert len(items) == 2


def test_jitted_adam_step_is_one_kernel_per_parameter(device):
  params = {"w": realized(16, 8), "b": realized(8, seed=1)}
  state = {k: (tnp.zeros_like(p), tnp.zeros_like(p)) for k, p in params.items()}

  @tgfn.jit
  def step(params, state, grads):
    new_p, new_s = {}, {}
    for k in params:
      new_p[k], m, v = adam_update(params[k], grads[k], *state[k])
      new_s[k] = (m, v)
    return new_p, new_s

  grads = {"w": realized(16, 8, seed=2), "b": realized(8, seed=3)}
  new_p, new_s = step(params, state, grads)
  assert len(step.lower(params, state, grads).kernels) == 2
  for k in params:
    ref_p, ref_m, ref_v = adam_update(params[k], grads[k], *state[k])
    assert_close(new_p[k], np.asarray(ref_p), rtol=1e-5, atol=1e-7)
    assert_close(new_s[k][0], np.asarray(ref_m), rtol=1e-6)
    assert_close(new_s[k][1], np.asarray(ref_v), rtol=1e-6)


def test_donated_inputs_with_a_multi_output_kernel():
  p, g = realized(32), realized(32, seed=1)
  step = tgfn.jit(lambda p, m, g: (p - 0.1 * (0.9 * m + g), 0.9 * m + g), donate_argnums=(0, 1))
  m = tnp.ones(32).realize()
  P, M, G = np.asarray(p), np.asarray(m), np.asarray(g)
  new_p, new_m = step(p, m, g)
  assert_close(new_m, 0.9 * M + G, rtol=1e-6)
  assert_close(new_p, P - 0.1 * (0.9 * M + G), rtol=1e-6)


def test_the_kernel_writes_only_its_outputs():
  x = realized(8)
  [item] = create_schedule([(x * 2).uop, (x * 3).uop])
  stores = [u for u in item.kernel.ast.src if u.op is Ops.STORE]
  assert sorted(s.src[0].arg for s in stores) == [0, 1]
  src = compile_kernel(item.kernel, "CPU").source
  assert "const float* restrict data2" in src and "float* restrict data1" in src
