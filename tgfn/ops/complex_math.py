"""Complex numbers on the surface: parts, conjugate, angle, and the complex forms of abs, sign, exp, log,
sqrt, sin, cos and powers, composed from the real and imaginary parts.

Kernels know complex values only as pairs of reals with + - * / == != where, casts and sums
(tgfn/codegen/complex_lower.py). Three compositions reach everything else, exactly:
`real(z)` is the cast to the real dtype (NumPy's and JAX's astype), `imag(z) = real(z * -1j)` and
`complex(re, im) = re + im * 1j`, where the lowering skips the terms a known zero part multiplies.
Derivatives follow from the primitives' rules and match JAX's convention: linear maps are transposed,
never conjugated, so for a real-valued f, `grad(f)(z) = df/dx - i df/dy` (z = x + iy), as jax.grad gives.
"""
from __future__ import annotations

import math
from typing import Any

from tgfn.array import Array, as_array
from tgfn.dtype import complex_dtype, dtypes, real_dtype

__all__ = ["real", "imag", "conj", "conjugate", "angle", "iscomplexobj", "isrealobj", "iscomplex", "isreal",
           "complex64", "complex128"]

complex64, complex128 = dtypes.complex64, dtypes.complex128


def real(x: Any) -> Array:
  """The real part (x itself for real arrays)."""
  x = as_array(x)
  return x.astype(real_dtype(x.dtype)) if x.dtype.is_complex else x


def imag(x: Any) -> Array:
  """The imaginary part (zeros for real arrays)."""
  x = as_array(x)
  if not x.dtype.is_complex: return Array.const(0, x.dtype, x.shape)
  return (x * Array.const(complex(0.0, -1.0), x.dtype)).astype(real_dtype(x.dtype))  # (-1j has real part -0.0)


def make_complex(re: Array, im: Array) -> Array:
  """re + im * 1j for real arrays of one dtype, exact in both parts."""
  dt = complex_dtype(re.dtype)
  return re.astype(dt) + im.astype(dt) * Array.const(1j, dt)


def conj(x: Any) -> Array:
  """The complex conjugate (x itself for real arrays)."""
  x = as_array(x)
  return make_complex(real(x), -imag(x)) if x.dtype.is_complex else x


conjugate = conj


def angle(z: Any, deg: bool = False) -> Array:
  """The argument of z in (-pi, pi] (arctan2(imag, real)); for real input 0 or pi, as NumPy."""
  from tgfn.ops.elementwise import _float
  from tgfn.ops.math_extra import arctan2
  z = as_array(z)
  re, im = (real(z), imag(z)) if z.dtype.is_complex else (_float(z), Array.const(0, _float(z).dtype, z.shape))
  out = arctan2(im, re)
  return out * (180.0 / math.pi) if deg else out


def iscomplexobj(x: Any) -> bool:
  return (x.dtype if isinstance(x, Array) else as_array(x).dtype).is_complex


def isrealobj(x: Any) -> bool: return not iscomplexobj(x)


def iscomplex(x: Any) -> Array:
  """Elementwise: a nonzero imaginary part."""
  x = as_array(x)
  return imag(x) != 0 if x.dtype.is_complex else Array.const(False, dtypes.bool, x.shape)


def isreal(x: Any) -> Array:
  x = as_array(x)
  return imag(x) == 0 if x.dtype.is_complex else Array.const(True, dtypes.bool, x.shape)


# ---- complex forms of elementwise functions (tgfn/ops/elementwise.py dispatches here on complex input)
def complex_abs(z: Array) -> Array:
  """|z| = hypot(re, im), scaled so no square overflows."""
  from tgfn.ops.math_extra import hypot
  return hypot(real(z), imag(z))


def complex_sign(z: Array) -> Array:
  """z / |z|, and 0 at 0, as JAX."""
  from tgfn.ops.elementwise import where
  r = complex_abs(z)
  zero = r == 0
  return where(zero, Array.const(0, z.dtype, z.shape), z / where(zero, 1.0, r).astype(z.dtype))


def complex_exp(z: Array) -> Array:
  from tgfn.ops.elementwise import cos, exp, sin
  re, im = real(z), imag(z)
  e = exp(re)
  return make_complex(e * cos(im), e * sin(im))


def complex_log(z: Array) -> Array:
  """log|z| + i angle(z): the principal branch."""
  from tgfn.ops.elementwise import log
  return make_complex(log(complex_abs(z)), angle(z))


def complex_sqrt(z: Array) -> Array:
  """The principal square root: t = sqrt((|z| + |re|) / 2), then (t, im / 2t) for re >= 0 and
  (|im| / 2t, +-t) otherwise, which never subtracts nearly equal numbers."""
  from tgfn.ops.elementwise import abs, sqrt, where
  re, im = real(z), imag(z)
  t = sqrt((complex_abs(z) + abs(re)) * 0.5)
  safe = where(t == 0, 1.0, t).astype(t.dtype) * 2.0
  upper = re >= 0
  out_re = where(upper, t, abs(im) / safe)
  out_im = where(upper, im / safe, where(im < 0, -t, t))
  return make_complex(out_re, out_im)


def complex_sin(z: Array) -> Array:
  from tgfn.ops.elementwise import cos, cosh, sin, sinh
  re, im = real(z), imag(z)
  return make_complex(sin(re) * cosh(im), cos(re) * sinh(im))


def complex_cos(z: Array) -> Array:
  from tgfn.ops.elementwise import cos, cosh, sin, sinh
  re, im = real(z), imag(z)
  return make_complex(cos(re) * cosh(im), -(sin(re) * sinh(im)))


def complex_power(a: Array, b: Any) -> Array:
  """a ** b: a static integer exponent multiplies (exact for small powers, fine at a = 0); anything else is
  exp(b * log(a)) on the principal branch, with 0 ** b = 0 for b != 0 as NumPy."""
  from tgfn.ops.elementwise import reciprocal, where
  if isinstance(b, int) and not isinstance(b, bool):
    result, base, n = Array.const(1, a.dtype, a.shape), a, abs(b)
    while n:
      if n & 1: result = result * base
      base, n = base * base, n >> 1
    return result if b >= 0 else reciprocal(result)
  b = as_array(b).astype(a.dtype) if not isinstance(b, Array) else b.astype(complex_dtype(b.dtype))
  out = complex_exp(b * complex_log(a))
  return where((a == 0) & (b != 0), Array.const(0, out.dtype, out.shape), out)


def complex_prod(x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
  """The product over `axes` as a pairwise tree of complex multiplications (kernels sum complex values
  but have no complex product accumulator): log2(n) levels of elementwise products."""
  from tgfn.ops.shape import concatenate
  moved = tuple(a for a in range(x.ndim) if a not in axes) + tuple(axes)
  kept = tuple(x.shape[a] for a in range(x.ndim) if a not in axes)
  flat = x._permute(moved)._reshape(kept + (math.prod(x.shape[a] for a in axes),))
  if flat.shape[-1] == 0: flat = Array.const(1, x.dtype, kept + (1,))
  while flat.shape[-1] > 1:
    n, half = flat.shape[-1], flat.shape[-1] // 2
    part = lambda lo, hi: flat[..., lo:hi]  # noqa: E731
    pairs = part(0, half) * part(half, 2 * half)
    flat = concatenate([pairs, part(2 * half, n)], axis=-1) if n % 2 else pairs
  out = flat._reshape(kept)
  if not keepdims: return out
  return out._reshape(tuple(1 if a in axes else d for a, d in enumerate(x.shape)))


def no_complex(name: str, *xs: Array) -> None:
  """Raise for functions that have no meaning on complex numbers (orderings, rounding)."""
  if any(x.dtype.is_complex for x in xs):
    raise TypeError(f"{name} is not defined for complex arrays (got {[x.dtype.name for x in xs]}); "
                    "take tnp.real(z), tnp.imag(z) or tnp.abs(z) first")

