"""`tgfn.scipy.stats.norm`: the normal distribution with location `loc` and scale `scale`, as
`jax.scipy.stats.norm` (arguments broadcast; integers give the default float)."""
from __future__ import annotations

import math
from typing import Any

from tgfn.array import Array, as_array
from tgfn.dtype import result_type
from tgfn.ops.elementwise import exp, log
from tgfn.ops.special import log_ndtr, ndtr, ndtri

__all__ = ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _common_float(*xs: Any) -> list[Array]:
  """The arguments in their common dtype (Python scalars weakly typed, as JAX), promoted to a float one."""
  weak = [x if isinstance(x, (int, float)) and not isinstance(x, bool) else as_array(x).dtype for x in xs]
  dtype = result_type(*weak)
  if not dtype.is_float: dtype = result_type(dtype, 1.0)
  return [as_array(x).astype(dtype) for x in xs]


def _standardize(x: Any, loc: Any, scale: Any) -> tuple[Array, Array]:
  """(x - loc) / scale, and scale, in the arguments' common float dtype."""
  x, loc, scale = _common_float(x, loc, scale)
  return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Array:
  z, scale = _standardize(x, loc, scale)
  return -0.5 * z * z - _LOG_SQRT_2PI - log(scale)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Array:
  return exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Array:
  return ndtr(_standardize(x, loc, scale)[0])


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Array:
  return log_ndtr(_standardize(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Array:
  """1 - cdf, accurate in the upper tail (it is the lower tail's cdf of -z)."""
  return ndtr(-_standardize(x, loc, scale)[0])


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Array:
  return log_ndtr(-_standardize(x, loc, scale)[0])


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Array:
  """The quantile function, the inverse of cdf."""
  q, loc, scale = _common_float(q, loc, scale)
  return loc + scale * ndtri(q)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Array:
  """The inverse of sf."""
  q, loc, scale = _common_float(q, loc, scale)
  return loc - scale * ndtri(q)
