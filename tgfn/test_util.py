"""`check_grads`: compare tgfn's derivatives with finite differences, as jax.test_util does.

Forward mode: the JVP along a random tangent must match the central difference
(f(x + eps t) - f(x - eps t)) / (2 eps). Reverse mode: for a random output cotangent u, the VJP
must satisfy <vjp(u), t> == <u, central difference along t>. Higher orders recurse on the JVP and
VJP functions themselves, so order=2 checks the derivatives of the derivatives.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.transforms.api import jvp, vjp
from tgfn.tree import flatten, unflatten

_DEFAULT_EPS = {dtypes.float64: 1e-6, dtypes.float32: 1e-3, dtypes.float16: 1e-1, dtypes.bfloat16: 1e-1}
_DEFAULT_TOL = {dtypes.float64: 1e-5, dtypes.float32: 2e-2, dtypes.float16: 1e-1, dtypes.bfloat16: 1e-1}


def _leaves(tree: Any) -> list[Array]: return [as_array(x) for x in flatten(tree)[0]]


def _random_like(tree: Any, rng: np.random.Generator) -> Any:
  leaves, treedef = flatten(tree)
  out = []
  for leaf in leaves:
    x = as_array(leaf)
    out.append(Array.from_data(rng.standard_normal(x.shape).astype(np.float64), x.dtype, x.device))
  return unflatten(treedef, out)


def _axpy(a: float, xs: Any, ys: Any) -> Any:
  """ys + a * xs, leaf-wise, computed on the host: f then runs on plain inputs, so the +eps and -eps
  evaluations share f's compiled kernels instead of each baking its own constant into one."""
  x_leaves, treedef = flatten(xs)
  out = []
  for x, y in zip(x_leaves, flatten(ys)[0]):
    y = as_array(y)
    out.append(Array.from_data(np.asarray(y) + a * np.asarray(x).astype(np.asarray(y).dtype), y.dtype, y.device))
  return unflatten(treedef, out)


def _vdot(xs: Any, ys: Any) -> float:
  return float(sum(np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64))
                   for x, y in zip(_leaves(xs), _leaves(ys))))


def _numerical_jvp(f: Callable, args: tuple, tangents: tuple, eps: float) -> list[np.ndarray]:
  plus = _leaves(f(*_axpy(eps, tangents, args)))
  minus = _leaves(f(*_axpy(-eps, tangents, args)))
  return [(np.asarray(p, np.float64) - np.asarray(m, np.float64)) / (2 * eps) for p, m in zip(plus, minus)]


def _tolerance(args: tuple, atol: Optional[float], rtol: Optional[float], eps: Optional[float]) -> tuple:
  worst = max((x.dtype for x in _leaves(args) if x.dtype.is_float), key=lambda d: _DEFAULT_TOL[d],
              default=dtypes.float64)
  return (atol if atol is not None else _DEFAULT_TOL[worst], rtol if rtol is not None else _DEFAULT_TOL[worst],
          eps if eps is not None else _DEFAULT_EPS[worst])


def check_jvp(f: Callable, args: tuple, atol: float, rtol: float, eps: float, rng: np.random.Generator) -> None:
  tangents = _random_like(args, rng)
  _, tangent_out = jvp(f, args, tangents)
  for got, want in zip(_leaves(tangent_out), _numerical_jvp(f, args, tangents, eps)):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=atol, rtol=rtol,
                               err_msg="JVP does not match finite differences")


def check_vjp(f: Callable, args: tuple, atol: float, rtol: float, eps: float, rng: np.random.Generator) -> None:
  out, pullback = vjp(f, *args)
  cotangent = _random_like(out, rng)
  tangents = _random_like(args, rng)
  lhs = _vdot(pullback(cotangent), tangents)
  rhs = float(sum(np.vdot(np.asarray(u, np.float64), d)
                  for u, d in zip(_leaves(cotangent), _numerical_jvp(f, args, tangents, eps))))
  np.testing.assert_allclose(lhs, rhs, atol=atol, rtol=rtol, err_msg="VJP does not match finite differences")


def check_grads(f: Callable, args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: Optional[float] = None, rtol: Optional[float] = None, eps: Optional[float] = None,
                seed: int = 0) -> None:
  """Raise AssertionError unless f's derivatives up to `order` match finite differences in `modes`.
  Use float64 arguments for tight checks; float32 gets loose default tolerances."""
  args = tuple(args)
  atol, rtol, eps = _tolerance(args, atol, rtol, eps)
  rng = np.random.default_rng(seed)
  for mode in modes:
    if mode not in ("fwd", "rev"): raise ValueError(f"check_grads modes must be 'fwd' or 'rev', got {mode!r}")

  def check(fn: Callable, fn_args: tuple, remaining: int) -> None:
    if "fwd" in modes:
      check_jvp(fn, fn_args, atol, rtol, eps, rng)
      if remaining > 1:
        n = len(fn_args)
        check(lambda *a: jvp(fn, a[:n], a[n:])[1], fn_args + _random_like(fn_args, rng), remaining - 1)
    if "rev" in modes:
      check_vjp(fn, fn_args, atol, rtol, eps, rng)
      if remaining > 1:
        def pullback_of_output(*a: Any) -> Any:
          out, pullback = vjp(fn, *a)
          return pullback(out)
        check(pullback_of_output, fn_args, remaining - 1)

  check(f, args, order)
