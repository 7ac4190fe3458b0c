"""Python lists and tuples meeting transforms: arrays built from traced values (`tnp.array([v, -k * x])`, an
ODE's right-hand side) stay in the trace under every transform, and a list where an array belongs is a
TypeError, never a value read off the trace (which would give a zero gradient)."""
import operator
import re

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.test_util import check_grads
from tests.conftest import assert_close

W = np.array([0.5, -1.25, 2.0], np.float32)


def state(xnp, w):
  """Nested lists and tuples mixing traced elements, Python and NumPy scalars, a NumPy array and an Array."""
  rows = xnp.array([[w[0], w[1] * w[2], 2.0], (np.float32(3.0), xnp.sin(w[0]), w[2] ** 2)])
  return xnp.array([rows, [w[:3] * 2, np.ones(3, np.float32)]])


def loss(xnp, w): return (state(xnp, w) ** 2 * np.arange(12).reshape(2, 2, 3)).sum()


# (name, tgfn transform of f, the same transform in JAX); each gives an array for W
TRANSFORMS = [
  ("grad", lambda t, f: t.grad(f)),
  ("jit", lambda t, f: t.jit(f)),
  ("jvp", lambda t, f: lambda w: t.jvp(f, (w,), (np.ones(3, np.float32),))[1]),
  ("vmap", lambda t, f: lambda w: t.vmap(f)(w[None] * np.ones((2, 1), np.float32))),
  ("vmap(grad)", lambda t, f: lambda w: t.vmap(t.grad(f))(w[None] * np.ones((2, 1), np.float32))),
  ("jit(vmap)", lambda t, f: lambda w: t.jit(t.vmap(f))(w[None] * np.ones((2, 1), np.float32))),
  ("grad(jit)", lambda t, f: t.grad(t.jit(f))),
  ("jit(grad)", lambda t, f: t.jit(t.grad(f))),
]


CASES = [(name, transform, pick) for name, transform in TRANSFORMS for pick in (loss, state)
         if pick is loss or "grad" not in name]  # (grad needs a scalar output)


@pytest.mark.parametrize("name, transform, pick", CASES, ids=[f"{c[0]}-{c[2].__name__}" for c in CASES])
def test_arrays_built_from_traced_values_match_jax(name, transform, pick) -> None:
  jax = pytest.importorskip("jax")
  jnp = pytest.importorskip("jax.numpy")
  got = transform(tgfn, lambda w: pick(tnp, w))(tnp.asarray(W))
  want = np.asarray(transform(jax, lambda w: pick(jnp, w))(jnp.asarray(W)))
  assert got.dtype == tnp.float32 and got.shape == want.shape
  assert_close(got, want, rtol=2e-6, atol=1e-5)


def test_arrays_built_from_traced_values_match_finite_differences() -> None:
  check_grads(lambda w: loss(tnp, w), (tnp.asarray(W.astype(np.float64)),), order=2)


def test_the_issue_examples() -> None:
  assert float(tgfn.grad(lambda k: tnp.array([k, 2 * k]).sum())(3.0)) == 3.0
  ode_rhs = lambda y, k: tnp.array([y[1], -k * y[0]])  # noqa: E731  (x'' = -k x as a first-order system)
  step = tgfn.jit(lambda y, k: y + 0.1 * ode_rhs(y, k))
  assert_close(step(tnp.array([1.0, 0.0]), 4.0), np.float32([1.0, -0.4]))
  assert_close(tgfn.grad(lambda k: step(tnp.array([1.0, 0.5]), k)[1])(4.0), np.float32(-0.1))
  batched = tgfn.vmap(lambda k: tnp.array([k, 2 * k]))(tnp.arange(3.0))
  assert_close(batched, np.float32([[0, 0], [1, 2], [2, 4]]))


def test_dtype_is_applied_to_traced_elements() -> None:
  f = lambda k: tnp.array([k, 2 * k, 3], dtype=tnp.float16)  # noqa: E731
  out = tgfn.jit(f)(1.5)
  assert out.dtype == tnp.float16
  assert_close(out, np.array([1.5, 3.0, 3.0], np.float16))
  assert float(tgfn.grad(lambda k: f(k).astype(tnp.float32).sum())(1.5)) == 3.0
  assert tgfn.jit(lambda n: tnp.array([n, 2 * n], dtype=tnp.int8))(3).tolist() == [3, 6]


def test_numpy_functions_take_lists_of_traced_values() -> None:
  # JAX refuses lists in jnp.sum and friends; tgfn converts them as tnp.asarray would, inside the trace
  assert float(tgfn.grad(lambda k: tnp.sum([k, 3 * k]))(1.0)) == 4.0
  assert float(tgfn.jit(lambda k: tnp.dot([k, 1.0], (2.0, k)))(3.0)) == 9.0
  assert float(tgfn.grad(lambda k: tnp.stack([k, k * k]).sum())(3.0)) == 7.0
  mask = tnp.array([True, False])
  assert tgfn.jit(lambda k: tnp.where(mask, [k, 1.0], 0.0))(3.0).tolist() == [3.0, 0.0]
  assert tgfn.jit(lambda k: tnp.maximum([k, -k], 0.0))(3.0).tolist() == [3.0, 0.0]
  assert float(tgfn.grad(lambda k: tnp.full((2, 2), [k, 2 * k]).sum())(3.0)) == 6.0
  x = tnp.arange(5.0)
  assert tgfn.jit(lambda i: x[[i, 2]])(4).tolist() == [4.0, 2.0]
  assert tgfn.vmap(lambda i: x[[i, 0]])(tnp.arange(3)).tolist() == [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]


def test_grad_of_a_list_argument_is_a_list_of_gradients() -> None:
  jax = pytest.importorskip("jax")
  jnp = pytest.importorskip("jax.numpy")
  f = lambda xnp: lambda w: (xnp.asarray(w) ** 2).sum() + w[0] * xnp.sin(w[2])  # noqa: E731
  got = tgfn.grad(f(tnp))([1.0, 2.0, 3.0])
  want = jax.grad(f(jnp))([1.0, 2.0, 3.0])
  assert isinstance(got, list) and len(got) == 3
  assert_close(tnp.stack(got), np.asarray(want), rtol=1e-6)
  assert all(float(g) != 0 for g in got)
  out, tangent = tgfn.jvp(lambda w: tnp.asarray(w).prod(), ([1.0, 2.0, 3.0],), ([1.0, 0.0, 0.0],))
  assert (float(out), float(tangent)) == (6.0, 6.0)


BINARY = [("+", operator.add), ("-", operator.sub), ("*", operator.mul), ("/", operator.truediv),
          ("//", operator.floordiv), ("%", operator.mod), ("**", operator.pow), ("@", operator.matmul),
          ("&", operator.and_), ("|", operator.or_), ("^", operator.xor), ("<<", operator.lshift),
          (">>", operator.rshift), ("<", operator.lt), ("<=", operator.le), (">", operator.gt),
          (">=", operator.ge), ("==", operator.eq), ("!=", operator.ne)]
REFLECTED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}  # Python swaps comparisons


@pytest.mark.parametrize("symbol, op", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("sequence", [list, tuple])
def test_an_operator_with_a_list_or_tuple_is_a_type_error(symbol, op, sequence) -> None:
  x = tnp.arange(3) if symbol in ("&", "|", "^", "<<", ">>") else tnp.arange(3.0)
  seq = sequence([1, 2, 3])
  kind = sequence.__name__
  message = rf"(?s)for {re.escape(symbol)}: 'Array' and '{kind}'.*tnp\.asarray.*test_traced_sequences"
  with pytest.raises(TypeError, match=message):
    op(x, seq)
  # in the other order Python asks the Array's reflected method, or the swapped comparison
  left_right = f"'{kind}' and 'Array'" if symbol not in REFLECTED else f"'Array' and '{kind}'"
  with pytest.raises(TypeError, match=rf"for {re.escape(REFLECTED.get(symbol, symbol))}: {left_right}"):
    op(seq, x)


def test_a_list_where_an_array_belongs_inside_grad_is_a_type_error() -> None:
  x = tnp.arange(3.0)
  with pytest.raises(TypeError, match=r"for \*: 'Array' and 'list'.*\n.*test_traced_sequences.py:\d+: .*x \* w"):
    tgfn.grad(lambda w: tnp.sum((x * w) ** 2))([1.0, 2.0, 3.0])
  # the conversion spelled out works, and gives the gradient; NumPy functions still take concrete lists
  grads = tgfn.grad(lambda w: tnp.sum((x * tnp.asarray(w)) ** 2))([1.0, 2.0, 3.0])
  assert [float(g) for g in grads] == [0.0, 4.0, 24.0]
  assert tnp.multiply(x, [1.0, 2.0, 3.0]).tolist() == [0.0, 2.0, 6.0]
  assert float(tnp.sum([1.0, 2.0])) == 3.0 and float(tnp.dot([1.0, 2.0], [3.0, 4.0])) == 11.0
