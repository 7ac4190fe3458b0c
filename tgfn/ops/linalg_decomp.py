"""`tnp.linalg`: decompositions and solvers, as `jax.numpy.linalg`.

The factorizations (`inv solve det slogdet cholesky qr svd eigh`) run LAPACK through NumPy as host
kernels (tgfn/ops/host.py), on the CPU whatever the device, with JAX's derivative rules written over
the IR; everything else (`norm pinv lstsq matrix_rank matrix_power eigvalsh cross ...`) is composed
from them and ordinary ops, so grad, jvp, vmap and jit need nothing more. Inputs are promoted to a
float dtype; float16 and bfloat16 are computed in float32 and rounded back. As in JAX, a matrix the
factorization fails on (singular for inv/solve, not positive definite for cholesky) gives NaNs, not
an exception.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.ops.creation import arange, eye
from tgfn.ops.elementwise import abs as _abs, power, sqrt, where
from tgfn.ops.host import HostFunction, host_call, register
from tgfn.ops.linalg import diagonal as _np_diagonal, matmul, outer as _np_outer, tensordot, trace as _np_trace
from tgfn.ops.reduction import max as _max, min as _min, sum as _sum
from tgfn.ops.shape import broadcast_to, expand_dims, moveaxis, reshape, stack, swapaxes

__all__ = ["norm", "vector_norm", "matrix_norm", "inv", "solve", "det", "slogdet", "cholesky", "qr", "svd", "svdvals",
           "eigh", "eigvalsh", "pinv", "matrix_power", "lstsq", "matrix_rank", "trace", "diagonal", "outer", "cross",
           "matmul", "tensordot", "matrix_transpose", "vecdot"]


class SlogdetResult(NamedTuple):
  sign: Array
  logabsdet: Array


class EighResult(NamedTuple):
  eigenvalues: Array
  eigenvectors: Array


class QRResult(NamedTuple):
  Q: Array
  R: Array


class SVDResult(NamedTuple):
  U: Array
  S: Array
  Vh: Array


# ---- helpers over the IR
def _mT(x: Array) -> Array: return swapaxes(x, -1, -2)


def _tril(x: Array, k: int = 0) -> Array:
  """The lower triangle of the last two axes (on and below diagonal k), zeros elsewhere."""
  rows, cols = x.shape[-2:]
  keep = arange(rows)[:, None] + k >= arange(cols)[None, :]
  return where(keep, x, 0).astype(x.dtype)


def _eye(n: int, dtype: Any) -> Array: return eye(n, dtype=dtype)


def _diag(v: Array) -> Array:
  """A batch of diagonal matrices from a batch of vectors (last axis)."""
  return v[..., :, None] * _eye(v.shape[-1], v.dtype)


def _float_input(name: str, x: Any, min_ndim: int = 2) -> Array:
  """`x` as a float32 or float64 array (integers promote to the default float; float16 and bfloat16 are
  computed in float32), with at least `min_ndim` axes."""
  x = as_array(x)
  if x.ndim < min_ndim:
    raise ValueError(f"linalg.{name}: needs an array of at least {min_ndim} dimensions, got shape {x.shape}")
  if x.dtype in (dtypes.float32, dtypes.float64): return x
  if x.dtype.is_complex: raise NotImplementedError(f"linalg.{name} of complex arrays is not supported yet")
  return x.astype(dtypes.float32 if x.dtype.is_float else dtypes.default_float)


def _square(name: str, x: Any) -> Array:
  a = _float_input(name, x)
  if a.shape[-1] != a.shape[-2]:
    raise ValueError(f"linalg.{name}: needs square matrices in the last two axes, got shape {a.shape}")
  return a


def _back(x: Array, like: Any) -> Array:
  """Round a float32 result back to float16/bfloat16 when that was the input's dtype."""
  dt = as_array(like).dtype
  return x.astype(dt) if dt in (dtypes.float16, dtypes.bfloat16) else x


def _symmetrize(a: Array) -> Array: return (a + _mT(a)) * 0.5


# ---- NumPy implementations: a matrix LAPACK rejects gives NaNs, as in JAX
def _each_matrix(fn, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
  """`fn` over the batch; where LAPACK fails on a matrix, that matrix's outputs are NaN."""
  try:
    out = fn(*arrays)
    return out if isinstance(out, tuple) else (out,)
  except np.linalg.LinAlgError:
    batch = arrays[0].shape[:-2]
    results = []
    for idx in np.ndindex(*batch):
      try:
        out = fn(*[a[idx] for a in arrays])
        out = out if isinstance(out, tuple) else (out,)
      except np.linalg.LinAlgError:
        ref = fn(*[np.eye(a.shape[-2], a.shape[-1], dtype=a.dtype) for a in arrays])
        ref = ref if isinstance(ref, tuple) else (ref,)
        out = tuple(np.full_like(np.asarray(r), np.nan) for r in ref)
      results.append(out)
    return tuple(np.stack([r[i] for r in results]).reshape(batch + np.shape(results[0][i]))
                 for i in range(len(results[0])))


def _solve_impl(a: np.ndarray, b: np.ndarray) -> np.ndarray: return np.linalg.solve(a, b)


def _slogdet_impl(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  sign_, logabs = np.linalg.slogdet(a)
  return sign_, logabs


def _qr_impl(a: np.ndarray, complete: bool) -> tuple[np.ndarray, np.ndarray]:
  return tuple(np.linalg.qr(a, mode="complete" if complete else "reduced"))


def _svd_impl(a: np.ndarray, full_matrices: bool) -> tuple[np.ndarray, ...]:
  u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
  return u, s, vh


# ---- derivative rules (JAX's), linear in the tangents; host calls only on primal values
def _inv_jvp(primals, outs, tangents):
  (ta,), (x,) = tangents, outs
  return [None if ta is None else -(x @ ta @ x)]


def _solve_jvp(primals, outs, tangents):
  (a, _), (x,), (ta, tb) = primals, outs, tangents
  rhs = tb if ta is None else (-(ta @ x) if tb is None else tb - ta @ x)
  return [inv(a) @ rhs]


def _det_jvp(primals, outs, tangents):
  (a,), (d,), (ta,) = primals, outs, tangents
  return [d * _sum(_mT(inv(a)) * ta, axis=(-2, -1))]


def _slogdet_jvp(primals, outs, tangents):
  (a,), (ta,) = primals, tangents
  return [None, _sum(_mT(inv(a)) * ta, axis=(-2, -1))]


def _cholesky_jvp(primals, outs, tangents):
  (l,), (ta,) = outs, tangents
  l_inv = inv(l)
  inner = l_inv @ ta @ _mT(l_inv)
  phi = _tril(inner, -1) + _diag(_np_diagonal(inner, 0, -2, -1) * 0.5)
  return [l @ phi]


def _qr_jvp(primals, outs, tangents, complete: bool):
  (a,), (q, r), (ta,) = primals, outs, tangents
  m, n = a.shape[-2:]
  if m < n or (complete and m != n):
    raise NotImplementedError(f"linalg.qr: the derivative needs m >= n and mode='reduced' (or square input), "
                              f"got shape {a.shape} with mode={'complete' if complete else 'reduced'!r}")
  dx_rinv = ta @ inv(r)
  qt_dx_rinv = _mT(q) @ dx_rinv
  lower = _tril(qt_dx_rinv, -1)
  skew = lower - _mT(lower)
  return [q @ (skew - qt_dx_rinv) + dx_rinv, (qt_dx_rinv - skew) @ r]


def _eigh_jvp(primals, outs, tangents):
  (w, v), (ta,) = outs, tangents
  n = w.shape[-1]
  identity = _eye(n, w.dtype)
  # F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it
  f = 1.0 / (identity + w[..., None, :] - w[..., :, None]) - identity
  vt_ta_v = _mT(v) @ ta @ v
  return [_np_diagonal(vt_ta_v, 0, -2, -1), v @ (f * vt_ta_v)]


def _svd_jvp(primals, outs, tangents, full_matrices: bool):
  (a,), (u, s, vh), (ta,) = primals, outs, tangents
  m, n = a.shape[-2:]
  if full_matrices and m != n:
    raise NotImplementedError(f"linalg.svd: the derivative with full_matrices=True needs a square input, "
                              f"got shape {a.shape}; use full_matrices=False")
  v = _mT(vh)
  s_row = s[..., None, :]
  ds_mat = _mT(u) @ ta @ v
  ds = _np_diagonal(ds_mat, 0, -2, -1)
  identity = _eye(s.shape[-1], s.dtype)
  s_diffs = (s_row + _mT(s_row)) * (s_row - _mT(s_row))
  f = 1.0 / (s_diffs + identity) - identity
  dss = s_row * ds_mat
  sds = _mT(s_row) * ds_mat
  du = u @ (f * (dss + _mT(dss)))
  dv = v @ (f * (sds + _mT(sds)))
  if m > n:
    dav = ta @ v
    du = du + (dav - u @ (_mT(u) @ dav)) / s_row
  if n > m:
    dau = _mT(ta) @ u
    dv = dv + (dau - v @ (vh @ dau)) / s_row
  return [du, ds, _mT(dv)]


def _same(shapes, **_): return [shapes[0]]


register(HostFunction("inv", (2,), lambda a: _each_matrix(np.linalg.inv, a), _same, _inv_jvp))
register(HostFunction("solve", (2, 2), lambda a, b: _each_matrix(_solve_impl, a, b), lambda s: [s[1]], _solve_jvp))
register(HostFunction("det", (2,), lambda a: (np.linalg.det(a),), lambda s: [()], _det_jvp))
register(HostFunction("slogdet", (2,), _slogdet_impl, lambda s: [(), ()], _slogdet_jvp))
register(HostFunction("cholesky", (2,), lambda a: _each_matrix(np.linalg.cholesky, a), _same, _cholesky_jvp))
register(HostFunction(
  "qr", (2,), _qr_impl,
  lambda s, complete: [(s[0][0], s[0][0] if complete else min(s[0])), (s[0][0] if complete else min(s[0]), s[0][1])],
  _qr_jvp))
register(HostFunction("eigh", (2,), lambda a: tuple(np.linalg.eigh(a)), lambda s: [s[0][-1:], s[0]], _eigh_jvp))
register(HostFunction(
  "svd", (2,), _svd_impl,
  lambda s, full_matrices: [(s[0][0], s[0][0] if full_matrices else min(s[0])), (min(s[0]),),
                            (s[0][1] if full_matrices else min(s[0]), s[0][1])],
  _svd_jvp))


# ---- the public functions
def inv(a: Any) -> Array:
  """The inverse of each square matrix in the last two axes."""
  x = _square("inv", a)
  return _back(host_call("inv", [x])[0], a)


def solve(a: Any, b: Any) -> Array:
  """x with a @ x == b. b is a vector (..., n) when it has one axis fewer than a, as in NumPy 2, or when
  it is 1-D; otherwise a stack of matrices (..., n, k). Batch axes broadcast."""
  x = _square("solve", a)
  rhs = as_array(b).astype(x.dtype)
  vector = rhs.ndim == 1 or rhs.ndim == x.ndim - 1
  if vector: rhs = rhs[..., None]
  if rhs.shape[-2] != x.shape[-1]:
    raise ValueError(f"linalg.solve: a has shape {x.shape} but b has shape {as_array(b).shape}: "
                     f"b's {'last' if vector else 'second-to-last'} axis must be {x.shape[-1]}")
  batch = np.broadcast_shapes(x.shape[:-2], rhs.shape[:-2])
  x = broadcast_to(x, batch + x.shape[-2:])
  rhs = broadcast_to(rhs, batch + rhs.shape[-2:])
  out = host_call("solve", [x, rhs])[0]
  return _back(out[..., 0] if vector else out, a)


def det(a: Any) -> Array:
  """The determinant of each square matrix in the last two axes."""
  return _back(host_call("det", [_square("det", a)])[0], a)


def slogdet(a: Any) -> SlogdetResult:
  """(sign, log|det|) of each square matrix, as NumPy; the sign carries no derivative."""
  sign_, logabs = host_call("slogdet", [_square("slogdet", a)])
  return SlogdetResult(_back(sign_, a), _back(logabs, a))


def cholesky(a: Any, *, upper: bool = False) -> Array:
  """The lower Cholesky factor L (a == L @ L.T) of each symmetric positive definite matrix. As JAX, the
  input is symmetrized, (a + a.T) / 2, so the result and its derivative depend on both triangles."""
  l = host_call("cholesky", [_symmetrize(_square("cholesky", a))])[0]
  return _back(_mT(l) if upper else l, a)


def qr(a: Any, mode: str = "reduced") -> Union[QRResult, Array]:
  """QR decomposition of each matrix: mode 'reduced' (q: m x k, r: k x n, k = min(m, n)), 'complete'
  (q: m x m, r: m x n) or 'r' (r of the reduced mode only)."""
  if mode not in ("reduced", "complete", "r"):
    raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
  x = _float_input("qr", a)
  q, r = host_call("qr", [x], complete=mode == "complete")
  if mode == "r": return _back(r, a)
  return QRResult(_back(q, a), _back(r, a))


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> Union[SVDResult, Array]:
  """Singular value decomposition a == U @ diag(S) @ Vh, singular values descending. With
  compute_uv=False, only S. The derivative of U and Vh needs full_matrices=False unless a is square."""
  x = _float_input("svd", a)
  if not compute_uv: return _back(host_call("svd", [x], full_matrices=False)[1], a)
  u, s, vh = host_call("svd", [x], full_matrices=bool(full_matrices))
  return SVDResult(_back(u, a), _back(s, a), _back(vh, a))


def svdvals(a: Any) -> Array:
  return svd(a, compute_uv=False)


def eigh(a: Any, UPLO: Optional[str] = None, symmetrize_input: bool = True) -> EighResult:
  """Eigenvalues (ascending) and eigenvectors of each symmetric matrix. As JAX, the input is
  symmetrized first, (a + a.T) / 2 (pass symmetrize_input=False to use the lower triangle only)."""
  x = _square("eigh", a)
  if UPLO not in (None, "L", "U"): raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
  if symmetrize_input: x = _symmetrize(x)
  else:  # one triangle only, mirrored
    lower = _tril(_mT(x) if UPLO == "U" else x)
    x = lower + _mT(_tril(lower, -1))
  w, v = host_call("eigh", [x])
  return EighResult(_back(w, a), _back(v, a))


def eigvalsh(a: Any, UPLO: Optional[str] = None) -> Array:
  return eigh(a, UPLO).eigenvalues


def _default_rtol(x: Array) -> float: return max(x.shape[-2:]) * float(np.finfo(x.dtype.np).eps)


def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Array:
  """Moore-Penrose pseudo-inverse through the SVD: singular values at or below rtol * (largest) count as
  zero. The default rtol is max(m, n) * eps (NumPy's)."""
  x = _float_input("pinv", a)
  tol = rtol if rtol is not None else rcond
  u, s, vh = svd(x, full_matrices=False)
  relative = _default_rtol(x) if tol is None else as_array(tol).astype(x.dtype)[..., None]
  cutoff = relative * _max(s, axis=-1, keepdims=True)
  keep = s > cutoff
  s_inv = where(keep, 1.0 / where(keep, s, 1.0), 0.0).astype(x.dtype)
  return _back((_mT(vh) * s_inv[..., None, :]) @ _mT(u), a)


def matrix_rank(M: Any, rtol: Any = None, *, tol: Any = None) -> Array:
  """The number of singular values above tol (absolute) or rtol * (largest), default rtol max(m, n) * eps."""
  x = _float_input("matrix_rank", M)
  s = svd(x, compute_uv=False)
  if tol is not None: cutoff = as_array(tol).astype(x.dtype)[..., None]
  else:
    r = _default_rtol(x) if rtol is None else as_array(rtol).astype(x.dtype)[..., None]
    cutoff = r * _max(s, axis=-1, keepdims=True)
  return _sum(s > cutoff, axis=-1)


def lstsq(a: Any, b: Any, rcond: Optional[float] = None) -> tuple[Array, Array, Array, Array]:
  """Least squares, as `jax.numpy.linalg.lstsq`: (x, residuals, rank, s) for a 2-D a. Unlike NumPy, the
  residuals ||b - a x||^2 (per column) are always returned when m > n, even when rank < n."""
  x = _float_input("lstsq", a)
  if x.ndim != 2: raise ValueError(f"linalg.lstsq: a must be 2-D, got shape {x.shape}")
  rhs = as_array(b).astype(x.dtype)
  vector = rhs.ndim == 1
  if vector: rhs = rhs[:, None]
  if rhs.ndim != 2 or rhs.shape[0] != x.shape[0]:
    raise ValueError(f"linalg.lstsq: b must have {x.shape[0]} rows (a has shape {x.shape}), "
                     f"got shape {as_array(b).shape}")
  m, n = x.shape
  eps = float(np.finfo(x.dtype.np).eps)
  r = eps * max(m, n) if rcond is None or rcond < 0 else rcond
  u, s, vh = svd(x, full_matrices=False)
  keep = s >= r * s[0] if s.shape[0] else s > 0
  s_inv = where(keep, 1.0 / where(keep, s, 1.0), 0.0).astype(x.dtype)
  sol = _mT(vh) @ (s_inv[:, None] * (_mT(u) @ rhs))
  rank = _sum(keep, axis=-1)
  resid = _sum((rhs - x @ sol) ** 2, axis=0) if m > n else Array.const(0, x.dtype, (0,))
  if vector: sol = sol[:, 0]
  return _back(sol, a), _back(resid, a), rank, _back(s, a)


def matrix_power(a: Any, n: int) -> Array:
  """a multiplied by itself n times (n an int; 0 gives the identity, a negative n powers the inverse)."""
  if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
    raise TypeError(f"linalg.matrix_power: the exponent must be an int, got {type(n).__name__}")
  x = as_array(a)
  if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
    raise ValueError(f"linalg.matrix_power: needs square matrices in the last two axes, got shape {x.shape}")
  n = int(n)
  if n == 0: return broadcast_to(_eye(x.shape[-1], x.dtype), x.shape)
  if n < 0: x, n = inv(x), -n
  result: Optional[Array] = None
  while n:  # binary exponentiation: about 2 log2(n) products
    if n & 1: result = x if result is None else result @ x
    n >>= 1
    if n: x = x @ x
  return result


# ---- norms
def _vector_norm(x: Array, ord: Any, axis: tuple[int, ...], keepdims: bool) -> Array:
  if ord is None or ord == 2: return sqrt(_sum(x * x, axis=axis, keepdims=keepdims))
  if ord == math.inf: return _max(_abs(x), axis=axis, keepdims=keepdims)
  if ord == -math.inf: return _min(_abs(x), axis=axis, keepdims=keepdims)
  if ord == 0: return _sum(x != 0, axis=axis, keepdims=keepdims).astype(x.dtype)
  if ord == 1: return _sum(_abs(x), axis=axis, keepdims=keepdims)
  if isinstance(ord, str): raise ValueError(f"linalg.norm: invalid norm order {ord!r} for vectors")
  p = float(ord)
  return power(_sum(power(_abs(x), p), axis=axis, keepdims=keepdims), 1.0 / p)


def _matrix_norm(x: Array, ord: Any, axes: tuple[int, int], keepdims: bool) -> Array:
  r, c = axes
  if ord is None or ord == "fro": out = sqrt(_sum(x * x, axis=axes, keepdims=True))
  elif ord in (1, -1):
    sums = _sum(_abs(x), axis=r, keepdims=True)
    out = _max(sums, axis=c, keepdims=True) if ord == 1 else _min(sums, axis=c, keepdims=True)
  elif ord in (math.inf, -math.inf):
    sums = _sum(_abs(x), axis=c, keepdims=True)
    out = _max(sums, axis=r, keepdims=True) if ord == math.inf else _min(sums, axis=r, keepdims=True)
  elif ord in (2, -2, "nuc"):
    s = svd(moveaxis(x, (r, c), (-2, -1)), compute_uv=False)
    out = _max(s, axis=-1) if ord == 2 else _min(s, axis=-1) if ord == -2 else _sum(s, axis=-1)
    out = expand_dims(out, tuple(sorted(axes)))
  else: raise ValueError(f"linalg.norm: invalid norm order {ord!r} for matrices")
  return out if keepdims else out._reshape(tuple(n for i, n in enumerate(out.shape) if i not in axes))


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Array:
  """Vector or matrix norm, as NumPy: with axis=None, the 2-norm of the flattened array when ord is None,
  else a vector norm of a 1-D or a matrix norm of a 2-D x; an int axis gives vector norms (ord: None,
  inf, -inf, 0, 1, 2, any p) and a pair of axes matrix norms (None, 'fro', 'nuc', inf, -inf, 1, -1, 2, -2)."""
  a = _float_input("norm", x, 0)
  if axis is None:
    if ord is None:
      out = sqrt(_sum(a * a))
      return out._reshape((1,) * a.ndim) if keepdims else out
    if a.ndim not in (1, 2):
      raise ValueError(f"linalg.norm: ord={ord!r} with axis=None needs a 1-D or 2-D array, got shape {a.shape}")
    axis = tuple(range(a.ndim))
  axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
  axes = tuple(int(ax) % a.ndim if -a.ndim <= int(ax) < a.ndim else _bad_axis(ax, a) for ax in axes)
  if len(axes) == 1: return _back(_vector_norm(a, ord, axes, keepdims), x)
  if len(axes) == 2 and axes[0] != axes[1]: return _back(_matrix_norm(a, ord, axes, keepdims), x)
  raise ValueError(f"linalg.norm: axis must be an int or a pair of distinct axes, got {axis!r}")


def _bad_axis(axis: Any, a: Array) -> int:
  raise ValueError(f"linalg.norm: axis {axis} is out of bounds for an array of shape {a.shape}")


def vector_norm(x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Array:
  a = as_array(x)
  if axis is None:
    out = norm(reshape(a, (-1,)), ord, 0)
    return out._reshape((1,) * a.ndim) if keepdims else out
  return norm(a, ord, axis, keepdims)


def matrix_norm(x: Any, ord: Any = "fro", keepdims: bool = False) -> Array:
  return norm(x, ord, (-2, -1), keepdims)


# ---- the array-API names of existing products
def trace(x: Any, offset: int = 0, dtype: Any = None) -> Array:
  """The trace of each matrix in the last two axes (numpy.linalg.trace)."""
  return _np_trace(x, offset, -2, -1, dtype)


def diagonal(x: Any, offset: int = 0) -> Array:
  """The diagonal of each matrix in the last two axes (numpy.linalg.diagonal)."""
  return _np_diagonal(x, offset, -2, -1)


def outer(a: Any, b: Any) -> Array:
  a, b = as_array(a), as_array(b)
  if a.ndim != 1 or b.ndim != 1: raise ValueError(f"linalg.outer: needs 1-D inputs, got shapes {a.shape} and {b.shape}")
  return _np_outer(a, b)


def matrix_transpose(x: Any) -> Array:
  x = as_array(x)
  if x.ndim < 2: raise ValueError(f"linalg.matrix_transpose: needs at least 2 dimensions, got shape {x.shape}")
  return _mT(x)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Array:
  """The dot product of x1 and x2 along `axis`, which must have the same length in both (the other axes
  broadcast); a complex x1 is conjugated. The result has the inputs' promoted dtype (uint8 stays uint8,
  where sum would widen it)."""
  x1, x2 = as_array(x1), as_array(x2)
  ndim = max(x1.ndim, x2.ndim)
  if not -ndim <= axis < ndim: raise ValueError(f"vecdot: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
  axis = axis - ndim if axis >= 0 else axis   # counted from the end of the broadcast shape
  if axis < -min(x1.ndim, x2.ndim) or x1.shape[axis] != x2.shape[axis]:
    raise ValueError(f"vecdot: x1 and x2 need the same length along axis {axis}, got shapes {x1.shape} and {x2.shape}")
  if x1.dtype.is_complex:
    from tgfn.ops.complex_math import conj
    x1 = conj(x1)
  product = x1 * x2
  return _sum(product, axis=axis, dtype=product.dtype)


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Optional[int] = None) -> Array:
  """The cross product of 3-vectors along the given axes (batch axes broadcast), as NumPy."""
  if axis is not None: axisa = axisb = axisc = axis
  a, b = moveaxis(as_array(a), axisa, -1), moveaxis(as_array(b), axisb, -1)
  if a.shape[-1] != 3 or b.shape[-1] != 3:
    raise ValueError(f"cross: needs vectors of length 3 along the axis, got shapes {a.shape} and {b.shape}")
  a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
  b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
  out = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
  return moveaxis(out, -1, axisc)


from tgfn.viz.locations import name_the_user_line_in  # noqa: E402  (last: wraps what is defined above)
name_the_user_line_in(globals())
