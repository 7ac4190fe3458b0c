"""Python scalars in eager code reach kernels as arguments (PARAM -> DEFINE_VAR), and a repeated eager
graph reuses its plan: no new kernel per value, no scheduling per call (tgfn/engine/realize.py)."""
from __future__ import annotations

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine import realize
from tgfn.engine.realize import Counters


def _compiles(fn) -> int:
  before = Counters.kernels_compiled
  fn()
  return Counters.kernels_compiled - before


def test_fifty_float_scalars_compile_at_most_one_kernel(device):
  x_np = np.linspace(-2, 2, 16, dtype=np.float32)
  x = tnp.array(x_np)

  def run():
    for s in np.linspace(-3.5, 7.25, 50):
      np.testing.assert_array_equal(np.asarray(x * float(s)), x_np * np.float32(s))
  assert _compiles(run) <= 1


def test_int_scalars_are_arguments_and_int8_stays_int8_and_wraps(device):
  a_np = np.array([-128, -3, 0, 5, 100, 127], np.int8)
  a = tnp.array(a_np)

  def run():
    for k in range(-20, 30, 7):
      out = a * k
      assert out.dtype == tnp.int8
      np.testing.assert_array_equal(np.asarray(out), (a_np.astype(np.int64) * k).astype(np.int8))
  assert _compiles(run) <= 1


def test_float16_times_python_float_stays_float16_rounded_once(device):
  h_np = np.array([0, 1, 3, 7, 1000, 65504, -2.5], np.float16)
  h = tnp.array(h_np)

  def run():
    for s in (0.1, 0.3, 1e-3, 3.14159):
      out = h * s
      assert out.dtype == tnp.float16
      # NumPy rounds the scalar to float16, multiplies in float32 and rounds back: as tgfn's half math
      with np.errstate(over="ignore"): np.testing.assert_array_equal(np.asarray(out), h_np * np.float16(s))
  assert _compiles(run) <= 1


@pytest.mark.parametrize("dtype, values, scalars", [
  ("bfloat16", [0.5, -3.0, 100.0], [0.1, -7.3]),
  ("float64", [0.5, -3.0, 1e300], [0.1, -7.3]),
  ("uint8", [0, 7, 255], [3, 200]),
  ("int64", [-(2 ** 62), 5, 2 ** 40], [3, -(2 ** 20)]),
  ("uint64", [0, 7, 2 ** 63], [3, 2 ** 40]),
  ("bool", [True, False, True], [True, False]),
])
def test_an_argument_gives_what_the_baked_constant_gives(device, dtype, values, scalars):
  """Eager (the scalar is a kernel argument) against jit (the scalar baked into the kernel as a constant)."""
  x = tnp.array(values, dtype)
  eager: dict = {}
  assert _compiles(lambda: eager.update({s: x * s + s for s in scalars}) or [a.realize() for a in eager.values()]) <= 1
  for s in scalars:
    baked = tgfn.jit(lambda x, s=s: x * s + s)(x)
    assert eager[s].dtype == baked.dtype == tnp.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(eager[s]), np.asarray(baked))


def test_a_repeated_eager_expression_is_scheduled_once(monkeypatch):
  calls = []
  schedule = realize.create_schedule
  monkeypatch.setattr(realize, "create_schedule", lambda outs: calls.append(1) or schedule(outs))
  for i in range(10):
    x = tnp.array(np.full(16, i, np.float32))
    np.testing.assert_array_equal(np.asarray(x * (i + 0.5) + 1), np.full(16, i, np.float32) * np.float32(i + 0.5) + 1)
  assert len(calls) <= 1


def test_plans_tell_apart_shared_leaves_and_signed_zero_constants():
  x, y = tnp.array([1.0, 2.0]), tnp.array([3.0, 4.0])
  np.testing.assert_array_equal(np.asarray(x * x), [1.0, 4.0])
  np.testing.assert_array_equal(np.asarray(x * y), [3.0, 8.0])  # not x * x's plan on other buffers
  z = tnp.array([-0.0])
  assert np.signbit(np.asarray(z + tnp.full(1, -0.0))[0])
  assert not np.signbit(np.asarray(z + tnp.full(1, 0.0))[0])


def test_a_threaded_kernel_takes_its_scalar_arguments(monkeypatch):
  monkeypatch.setenv("DEV", "CPU")
  n = 1 << 21  # past the size where the CPU kernel runs on the worker pool
  x_np = np.arange(n, dtype=np.float32)
  x = tnp.array(x_np)
  for s in (1.5, -2.25):
    np.testing.assert_array_equal(np.asarray(x * s + 3.0), x_np * np.float32(s) + np.float32(3.0))
  sources = [k.source for k in realize._compiled.values() if k.name == f"E_{n}"]
  assert any("tg_parallel_for" in src and "var1" in src for src in sources)


def test_a_buffer_met_as_itself_and_as_a_realized_node_is_one_leaf():
  x = tnp.array([1.0, 2.0])
  a = x * 2.0
  c = a + 0.0        # holds a's lazy node
  a.realize()        # a is now its buffer; c still reaches it through the lazy node
  np.testing.assert_array_equal(np.asarray(a * c), [4.0, 16.0])
  p, q = tnp.array([1.0, 2.0]), tnp.array([3.0, 5.0])
  np.testing.assert_array_equal(np.asarray(p * (q + 0.0)), [3.0, 10.0])  # two leaves: not a * c's plan
