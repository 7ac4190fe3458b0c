"""jit: the cache key, what retraces and what does not, side effects, lowering, and jit == eager."""
import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.engine.realize import Counters


def counted(fn):
  calls = []

  def wrapper(*args, **kwargs):
    calls.append(1)
    return fn(*args, **kwargs)
  wrapper.calls = calls
  return wrapper


def test_second_call_does_not_trace_or_compile(device):
  f = counted(lambda x, y: tnp.tanh(x) * y + x.sum())
  jf = tgfn.jit(f)
  x = tnp.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
  first = jf(x, 2.0)
  other = tnp.array(np.asarray(x))
  compiled = Counters.kernels_compiled
  second = jf(other, 2.0)
  assert len(f.calls) == 1 and Counters.kernels_compiled == compiled
  assert_close(first, f(x, 2.0), rtol=1e-6)
  assert_close(second, first)


def test_changed_shape_dtype_or_static_value_retraces():
  f = counted(lambda x, n: x * n)
  jf = tgfn.jit(f, static_argnums=1)
  jf(tnp.ones(3), 2)
  jf(tnp.ones(3), 2)
  assert len(f.calls) == 1
  jf(tnp.ones(4), 2)
  assert len(f.calls) == 2
  jf(tnp.ones(4, dtype=tnp.float64), 2)
  assert len(f.calls) == 3
  jf(tnp.ones(4, dtype=tnp.float64), 3)
  assert len(f.calls) == 4
  assert jf._cache_size() == 4


def test_a_changed_python_scalar_does_not_retrace_when_traced():
  f = counted(lambda x, s: x * s)
  jf = tgfn.jit(f)
  assert_close(jf(tnp.ones(2), 2.0), np.full(2, 2.0, np.float32))
  assert_close(jf(tnp.ones(2), 5.0), np.full(2, 5.0, np.float32))
  assert len(f.calls) == 1


def test_static_argnames_and_unhashable_static_values():
  jf = tgfn.jit(lambda x, *, mode: x * 2 if mode == "double" else x, static_argnames="mode")
  assert_close(jf(tnp.ones(2), mode="double"), np.full(2, 2.0, np.float32))
  with pytest.raises(TypeError, match="static argument 1 .* must be hashable.*list"):
    tgfn.jit(lambda x, shape: x, static_argnums=1)(tnp.ones(2), [1, 2])


def test_side_effects_happen_once_per_trace():
  log = []

  @tgfn.jit
  def f(x):
    log.append("traced")
    return x + 1

  for _ in range(3): f(tnp.ones(2))
  assert log == ["traced"]


def test_retraces_are_explained(monkeypatch, capsys):
  monkeypatch.setenv("TGFN_LOG_COMPILES", "1")
  jf = tgfn.jit(lambda x: x * 2)
  jf(tnp.ones(3))
  jf(tnp.ones(5))
  err = capsys.readouterr().err
  assert "compiling <lambda>" in err
  assert "retracing because leaf 0: ((3,), 'float32'" in err and "((5,), 'float32'" in err


def test_lower_shows_kernels_without_running():
  launched = Counters.kernels_launched
  lowered = tgfn.jit(lambda x: (x * 3).sum(0)).lower(tnp.ones((4, 2)))
  assert Counters.kernels_launched == launched
  assert len(lowered.kernels) == 1
  assert "r_2" in lowered.as_text()  # the kernel's name, in whatever language the device renders


def test_outputs_can_be_inputs_constants_and_pytrees():
  captured = tnp.array([10.0, 20.0])
  jf = tgfn.jit(lambda x: {"same": x, "const": captured, "sum": x + captured, "zeros": tnp.zeros(2)})
  out = jf(tnp.array([1.0, 2.0]))
  assert_close(out["same"], np.array([1.0, 2.0], np.float32))
  assert_close(out["const"], np.array([10.0, 20.0], np.float32))
  assert_close(out["sum"], np.array([11.0, 22.0], np.float32))
  assert_close(out["zeros"], np.zeros(2, np.float32))


def test_results_are_fresh_buffers_each_call():
  jf = tgfn.jit(lambda x: x * 2)
  a = jf(tnp.array([1.0]))
  b = jf(tnp.array([3.0]))
  assert float(a[0]) == 2.0 and float(b[0]) == 6.0


def test_intermediates_share_memory_when_lifetimes_do_not_overlap():
  w = tnp.array(np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32) / 3)

  def chain(x):
    for _ in range(5): x = tnp.tanh(x @ w)  # each layer's product is read only by the next layer
    return x
  graph = tgfn.jit(chain).lower(tnp.ones((4, 8))).graph
  intermediate = {id(b) for s, b in graph.fixed.items() if s not in graph.output_slots}
  planned = [s for s in graph.fixed if s not in graph.output_slots]
  assert len(planned) > len(intermediate) >= 1
  x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
  assert_close(tgfn.jit(chain)(tnp.array(x)), chain(tnp.array(x)), rtol=1e-5, atol=1e-5)


def test_nested_jit_inlines():
  inner = counted(lambda x: x * 2)
  jinner = tgfn.jit(inner)
  outer = tgfn.jit(lambda x: jinner(x) + jinner(x + 1))
  assert_close(outer(tnp.array([1.0])), np.array([6.0], np.float32))
  assert jinner._cache_size() == 0 and len(inner.calls) == 2


def test_donated_arguments_give_their_memory_to_the_result():
  step = tgfn.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
  w = tnp.array([1.0, 2.0, 3.0])
  g = tnp.array([2.0, 2.0, 2.0])
  old_memory = w.uop.buffer.arg
  new_w = step(w, g)
  assert_close(new_w, np.array([0.0, 1.0, 2.0], np.float32))
  assert new_w.uop.buffer.arg == old_memory          # updated in place
  with pytest.raises(RuntimeError, match="donated"):
    w.numpy()
  assert_close(g, np.full(3, 2.0, np.float32))       # not donated: untouched


def test_donation_is_skipped_when_it_would_be_unsafe():
  reverse = tgfn.jit(lambda w: w[::-1] * 1.0, donate_argnums=0)  # reads other elements than it writes
  w = tnp.array([1.0, 2.0, 3.0])
  assert_close(reverse(w), np.array([3.0, 2.0, 1.0], np.float32))
  assert_close(w, np.array([1.0, 2.0, 3.0], np.float32))  # still usable
  same_twice = tgfn.jit(lambda a, b: a + b, donate_argnums=(0,))
  x = tnp.array([1.0, 2.0])
  assert_close(same_twice(x, x), np.array([2.0, 4.0], np.float32))
  assert_close(x, np.array([1.0, 2.0], np.float32))


def test_a_dropped_result_is_recycled_but_a_held_one_never_changes():
  double = tgfn.jit(lambda v: v * 2)
  one, two = tnp.array([1.0, 1.0]), tnp.array([2.0, 2.0])
  held = double(one)
  lazy = double(one) * 10          # the Array is dropped, but a lazy graph still reads its buffer
  other = double(two)
  assert_close(held, np.full(2, 2.0, np.float32))
  assert_close(lazy, np.full(2, 20.0, np.float32))
  assert_close(other, np.full(2, 4.0, np.float32))
  first_id = id(double(one))       # dropped at once: the next call may recycle it
  recycled = double(two)
  assert id(recycled) == first_id
  assert_close(recycled, np.full(2, 4.0, np.float32))


def test_functions_that_allocate_nothing_and_weakly_held_results():
  x = tnp.array([1.0, 2.0])
  assert tgfn.jit(lambda v: v)(x) is x
  pair = tgfn.jit(lambda v: (v, v))(x)
  assert pair[0] is x and pair[1] is x
  import weakref
  double = tgfn.jit(lambda v: v * 2)
  watched = weakref.ref(double(x))
  again = double(tnp.array([5.0, 5.0]))
  # a weakly watched result is not recycled into the next one (that would change it under the watcher):
  # the call allocates afresh, and the cache lets go of the old result, which then dies
  assert watched() is None
  assert_close(again, np.array([10.0, 10.0], np.float32))


def test_a_function_without_array_arguments_runs_on_the_default_device_in_effect():
  # its compiled graph is placed by DEV=, so a cached one must not be replayed under another default
  from tgfn.device import Device
  default = Device.DEFAULT  # CPU, or the TGFN_TEST_DEVICE
  make = tgfn.jit(lambda: tnp.ones(3) * 3)
  assert make().device == default
  with tgfn.Context(DEV="PYTHON"):
    out = make()
    assert out.device == "PYTHON"
    np.testing.assert_array_equal(np.asarray(out), [3.0, 3.0, 3.0])
  assert make().device == default and make._cache_size() == 2


def test_tracing_and_compiling_run_no_garbage_collection(monkeypatch):
  """The cyclic collector is off while a jitted function is traced and compiled (its collections walked
  every object of the process: 25-35 ms of the MLP step's first call), and as it was afterwards."""
  import gc
  from tgfn.transforms import jit as jit_module
  enabled = []
  real = jit_module.CompiledGraph

  def compiled_graph(*args, **kwargs):
    enabled.append(("compile", gc.isenabled()))
    return real(*args, **kwargs)
  monkeypatch.setattr(jit_module, "CompiledGraph", compiled_graph)

  def fn(x):
    enabled.append(("trace", gc.isenabled()))
    return tnp.tanh(x @ x.T).sum(0) * 3.0 + 1.0
  out = tgfn.jit(fn)(tnp.ones((8, 8)))
  assert enabled == [("trace", False), ("compile", False)] and gc.isenabled()
  np.testing.assert_allclose(np.asarray(out), np.tanh(np.full((8, 8), 8.0)).sum(0) * 3 + 1, rtol=1e-6)
  gc.disable()
  try:
    tgfn.jit(lambda x: x * 5.0)(tnp.ones(3))
    assert not gc.isenabled()  # a collector the program turned off stays off
  finally:
    gc.enable()
