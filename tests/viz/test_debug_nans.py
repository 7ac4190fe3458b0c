"""DEBUG_NANS: the first NaN or Inf a kernel writes raises, naming the operation, the user's line and
the pass (tgfn/viz/nans.py)."""
import re

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.transforms.jit import RetraceWarning


@pytest.fixture
def debug_nans(monkeypatch):
  monkeypatch.setenv("DEBUG_NANS", "0")   # restored after the test, whatever config.update sets
  tgfn.config.update("debug_nans", True)
  assert tgfn.config.read("debug_nans")


def _line(marker: str) -> str:
  """'this file:line' of the line holding `marker`."""
  lines = open(__file__).read().splitlines()
  return f"{re.escape(__file__)}:{next(i + 1 for i, ln in enumerate(lines) if marker in ln and '_line(' not in ln and 'next(' not in ln)}"


def test_a_nan_names_the_operation_and_the_line(debug_nans):
  x = tnp.array(np.array([1.0, -1.0, 4.0], np.float32))
  y = tnp.sqrt(x) * 2  # MARK-forward
  with pytest.raises(FloatingPointError, match=rf"NaN in the output of .* forward pass of the operation at {_line('MARK-forward')}"):
    y.numpy()


def test_an_inf_in_the_backward_pass_names_the_forward_line(debug_nans):
  def f(x):
    return tnp.sqrt(x).sum()  # MARK-backward
  x = tnp.array(np.array([0.0, 1.0], np.float32))
  with pytest.raises(FloatingPointError, match=rf"Inf .* backward pass of the operation at {_line('MARK-backward')}"):
    tgfn.grad(f)(x).numpy()


def test_jitted_calls_are_checked_too(debug_nans):
  f = tgfn.jit(lambda x: tnp.log(x) + 1)  # MARK-jit
  with pytest.raises(FloatingPointError, match=rf"NaN .* at {_line('MARK-jit')}"):
    f(tnp.array(np.array([-1.0, 2.0], np.float32)))


def test_off_by_default_and_finite_values_pass(monkeypatch):
  assert not tgfn.config.read("debug_nans")
  assert np.isnan(np.asarray(tnp.sqrt(tnp.array(np.array([-2.0], np.float32))))).all()
  with pytest.raises(ValueError, match="unknown tgfn setting"):
    tgfn.config.update("debug_infs_and_more", True)


def test_shape_errors_name_the_users_line():
  with pytest.raises(ValueError, match=rf"cannot be broadcast together .*\n  at {_line('MARK-shape')}"):
    tnp.ones(3) + tnp.ones(4)  # MARK-shape
  with pytest.raises(ValueError, match=rf"not aligned.*\n  at {_line('MARK-matmul')}"):
    tnp.ones((2, 3)) @ tnp.ones((4, 2))  # MARK-matmul


def test_a_function_that_keeps_compiling_warns_once():
  f = tgfn.jit(lambda x: x + 1)
  with pytest.warns(RetraceWarning,
                    match=r"(?s)retracing because leaf 0: \(\(4,\).*compiled 5 times") as caught:
    for n in range(1, 9): f(tnp.ones(n))
  assert len([w for w in caught if "compiled" in str(w.message)]) == 1


# ---- the operation that made the NaN, not the kernel's output (issue 28, item 8)

def _tanh_of_sqrt(x):
  y = tnp.sqrt(x)  # MARK-sqrt
  return tnp.tanh(y)  # fused with the sqrt: this line's op is the kernel's output


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_fused_nan_names_the_operation_that_made_it(debug_nans, jitted):
  x = tnp.array(np.array([1.0, -1.0, 4.0], np.float32))
  with pytest.raises(FloatingPointError, match=rf"first made by SQRT .* forward pass of the operation at {_line('MARK-sqrt')}$"):
    np.asarray(tgfn.jit(_tanh_of_sqrt)(x) if jitted else _tanh_of_sqrt(x))


def _zero_times_sqrt(x):
  s = tnp.sqrt(x) * 0.  # MARK-cause: finite forward; its VJP divides 0 by 2 * sqrt(0)
  return (tnp.exp(x) + s).sum()  # the backward kernel's output adds the two paths' cotangents


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_backward_nan_names_the_forward_operation_whose_rule_made_it(debug_nans, jitted):
  x = tnp.array(np.array([0.0, 1.0], np.float32))
  assert np.isfinite(float(_zero_times_sqrt(x)))
  grad = tgfn.grad(_zero_times_sqrt)
  with pytest.raises(FloatingPointError, match=rf"NaN .* backward pass of the operation at {_line('MARK-cause')}$"):
    np.asarray(tgfn.jit(grad)(x) if jitted else grad(x))


def test_a_nan_read_from_an_input_says_so(debug_nans):
  x = tnp.array(np.array([np.nan, 1.0], np.float32))
  with pytest.raises(FloatingPointError, match="read from an input that already held one"):
    (tnp.exp(x) * 2).numpy()


def test_a_nan_inside_a_loop_body_is_caught_and_named(debug_nans):
  def f(x):
    return tgfn.lax.scan(lambda c, _: (tnp.tanh(tnp.log(c - 2.)), c), x, None, length=3)  # MARK-loop
  with pytest.raises(FloatingPointError, match=rf"first made by LOG2 .* at {_line('MARK-loop')}$"):
    tgfn.jit(f)(tnp.array(np.ones(3, np.float32)))
