"""Shape, dtype and tracing errors end with the user's line: '  at <this file>:<line>: <code>'
(tgfn/viz/locations.py's at_user_line; the line is the innermost frame outside tgfn)."""
import re

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp


def _at(marker: str) -> str:
  """A pattern for '  at this file:line' of the line holding `marker`."""
  lines = open(__file__).read().splitlines()
  number = next(i + 1 for i, ln in enumerate(lines) if ln.rstrip().endswith(f"# {marker}"))
  return rf"\n  at {re.escape(__file__)}:{number}: "


def test_shape_errors_name_the_line():
  x = tnp.ones((2, 3))
  with pytest.raises(ValueError, match=_at("reshape")):
    x.reshape(4, 2)  # reshape
  with pytest.raises(ValueError, match=_at("axis")):
    x.sum(axis=5)  # axis
  with pytest.raises(ValueError, match=_at("concatenate")):
    tnp.concatenate([x, tnp.ones((3, 3))], axis=1)  # concatenate
  with pytest.raises(ValueError, match=_at("squeeze")):
    tnp.squeeze(x, 0)  # squeeze
  with pytest.raises(IndexError, match=_at("index")):
    x[0, 1, 2]  # index
  with pytest.raises(ValueError, match=_at("broadcast")):
    x + tnp.ones(4)  # broadcast


def test_dtype_errors_name_the_line():
  with pytest.raises(TypeError, match=_at("dtype")):
    tnp.zeros(3, dtype="float31")  # dtype
  with pytest.raises(TypeError, match=_at("bitwise")):
    tnp.bitwise_and(tnp.ones(3), tnp.ones(3))  # bitwise


def test_tracing_errors_name_the_line():
  def f(x):
    return x.reshape(5)  # inside jit
  with pytest.raises(ValueError, match=_at("inside jit")):
    tgfn.jit(f)(tnp.ones(4))
  with pytest.raises(ValueError, match=_at("vmap sizes")):
    tgfn.vmap(lambda a, b: a + b)(tnp.ones((2, 3)), tnp.ones((4, 3)))  # vmap sizes
  with pytest.raises(TypeError, match=_at("grad of a vector")):
    tgfn.grad(lambda x: x * 2)(tnp.ones(3))  # grad of a vector
  with pytest.raises(tgfn.ConcretizationError, match=re.escape(__file__)):
    tgfn.jit(lambda x: 1 if x.sum() > 0 else 0)(tnp.ones(3))
  with pytest.raises(TypeError, match=_at("unhashable static")):
    tgfn.jit(lambda x, n: x * len(n), static_argnums=1)(tnp.ones(3), [1, 2])  # unhashable static
  with pytest.raises(TypeError, match=_at("jit of a class")):
    tgfn.jit(dict)  # jit of a class


def test_the_line_is_the_users_own_not_tgfns():
  """A node built by user code remembers its line even before anything asks (always on)."""
  from tgfn.viz.locations import location
  y = tnp.ones(3) * np.float32(2)  # built here
  where, kind = location(y.uop)
  assert re.fullmatch(_at("built here")[len(r"\n  at "):-2], where) and kind == "forward"


def test_linalg_fft_and_lax_argument_errors_name_the_line():
  from tgfn import lax
  with pytest.raises(ValueError, match=_at("inv")):
    tnp.linalg.inv(tnp.ones((2, 3)))  # inv
  with pytest.raises(ValueError, match=_at("fft")):
    tnp.fft.fft(tnp.ones(4), axis=3)  # fft
  with pytest.raises(ValueError, match=_at("dynamic_slice")):
    lax.dynamic_slice(tnp.ones(4), (1, 2), (1,))  # dynamic_slice
  with pytest.raises(ValueError, match=_at("conv")):
    lax.conv_general_dilated(tnp.ones((1, 2, 4, 4)), tnp.ones((3, 3, 3, 3)), (1, 1), "SAME")  # conv


def test_an_error_raised_by_the_users_loop_body_is_left_as_it_was():
  from tgfn import lax

  def body(carry, x):
    raise ValueError("the user's own message")

  with pytest.raises(ValueError) as info:
    lax.scan(body, tnp.zeros(()), tnp.ones(3))
  assert str(info.value) == "the user's own message"
