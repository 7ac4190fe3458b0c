"""`tgfn.scipy.linalg`: SciPy's conventions over tnp.linalg's host kernels (upper Cholesky factors by
default, triangular solves). Derivatives come from tnp.linalg's rules."""
from __future__ import annotations

from typing import Any

from tgfn.array import Array, as_array
from tgfn.ops import linalg_decomp as _linalg
from tgfn.ops.linalg_decomp import det, eigh, inv, pinv, qr, svd  # noqa: F401
from tgfn.ops.shape import swapaxes

__all__ = ["cholesky", "solve_triangular", "cho_factor", "cho_solve", "solve", "det", "eigh", "inv", "pinv", "qr",
           "svd"]


def cholesky(a: Any, lower: bool = False) -> Array:
  """The Cholesky factor of a symmetric positive definite matrix: upper (a == U.T @ U) unless lower."""
  return _linalg.cholesky(a, upper=not lower)


def cho_factor(a: Any, lower: bool = False) -> tuple[Array, bool]:
  return cholesky(a, lower), lower


def _triangle(a: Array, lower: bool, unit_diagonal: bool) -> Array:
  t = _linalg._tril(a) if lower else swapaxes(_linalg._tril(swapaxes(a, -1, -2)), -1, -2)
  if not unit_diagonal: return t
  n = a.shape[-1]
  eye = _linalg._eye(n, a.dtype)
  return t * (1 - eye) + eye


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False) -> Array:
  """x with op(T) @ x == b, T the lower or upper triangle of a (its diagonal taken as ones when
  unit_diagonal), op the identity (trans 0 or 'N') or the transpose (1, 'T', 2, 'C': real matrices)."""
  if trans not in (0, 1, 2, "N", "T", "C"):
    raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
  t = _triangle(_linalg._square("solve_triangular", a), lower, unit_diagonal)
  if trans not in (0, "N"): t = swapaxes(t, -1, -2)
  return _linalg.solve(t, as_array(b).astype(t.dtype))


def cho_solve(c_and_lower: tuple[Any, bool], b: Any) -> Array:
  """x with a @ x == b, given (c, lower) = cho_factor(a)."""
  c, lower = c_and_lower
  if lower: return solve_triangular(c, solve_triangular(c, b, lower=True), trans=1, lower=True)
  return solve_triangular(c, solve_triangular(c, b, trans=1), lower=False)


def solve(a: Any, b: Any, lower: bool = False, assume_a: str = "gen") -> Array:
  """x with a @ x == b (assume_a='pos' solves through the Cholesky factor)."""
  if assume_a == "pos": return cho_solve(cho_factor(a, lower), b)
  return _linalg.solve(a, b)
