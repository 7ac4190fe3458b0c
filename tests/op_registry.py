"""The op table: every elementwise function and reduction of tgfn, described once, as JAX's op_record
tables describe jax.numpy. Value tests (tests/ops/), and later grad, vmap and jit tests, are all driven
from `ELEMENTWISE` and `REDUCTIONS`.

A record says what tgfn calls (`fn`), what NumPy computes for it (`ref`), on which dtypes and inputs,
how the result dtype follows from the inputs, and how close the result must be. The reference contract:
the operands are first promoted with tgfn's (JAX's) rules and cast to `compute(promoted dtype)`; then
`ref` runs on them in float64 when that dtype is a float (so it rounds only once, at the end, to the
result dtype) and in that exact dtype when it is an integer or bool (so wrapping matches bit for bit).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

import tgfn.numpy as tnp
from tgfn.dtype import DType, dtypes, float_dtype, sum_dtype

BOOL = (dtypes.bool,)
SIGNED = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UNSIGNED = (dtypes.uint8, dtypes.uint32)
INTS = SIGNED + UNSIGNED
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
NUMERIC = INTS + FLOATS
ALL = BOOL + NUMERIC
HALVES = (dtypes.float16, dtypes.bfloat16)  # computed in float32, rounded to 8 or 11 bits


@dataclass(frozen=True)
class Domain:
  """The values drawn for one argument. Floats: [lo, hi] (None: unbounded) within the dtype's finite
  range, plus NaN, +-inf and -0.0 when `specials`; `min_abs` moves nonzero draws at least that far from
  zero (so quotients stay bounded). Ints: `ints` if given (None ends: the dtype's range), else [lo, hi];
  always within the dtype's range. Bools: both values."""
  lo: Optional[float] = None
  hi: Optional[float] = None
  specials: bool = True
  min_abs: float = 0.0
  ints: Optional[tuple[Optional[int], Optional[int]]] = None


FULL = Domain()
POSITIVE = Domain(0.0, None)
BOUNDED = Domain(-20.0, 20.0)
ANGLE = Domain(-10.0, 10.0)
SMALL = Domain(-8.0, 8.0, specials=False)
DIVIDEND = Domain(-1000.0, 1000.0, ints=(None, None))
DIVISOR = Domain(-1000.0, 1000.0, min_abs=0.01, ints=(None, None))
SHIFT = Domain(ints=(-2, 70))


@dataclass(frozen=True)
class Tol:
  """|actual - expected| <= atol + rtol * |expected|, as np.testing.assert_allclose."""
  rtol: float
  atol: float


# per result dtype: correctly rounded arithmetic may differ by an ulp at most; transcendentals by a few
EXACT = {dtypes.float16: Tol(1e-3, 0.0), dtypes.bfloat16: Tol(8e-3, 0.0), dtypes.float32: Tol(1.2e-7, 0.0),
         dtypes.float64: Tol(2.3e-16, 0.0)}
TRANSCENDENTAL = {dtypes.float16: Tol(2e-3, 1e-3), dtypes.bfloat16: Tol(1.6e-2, 8e-3),
                  dtypes.float32: Tol(4e-6, 1e-6), dtypes.float64: Tol(1e-13, 1e-14)}
POWER = {**TRANSCENDENTAL, dtypes.float32: Tol(1e-5, 1e-6)}
# reductions add one rounding per element on top of this: tests scale atol by count * eps * max|x|
REDUCE = {dtypes.float16: Tol(2e-3, 1e-3), dtypes.bfloat16: Tol(1.6e-2, 8e-3),
          dtypes.float32: Tol(1e-6, 1e-6), dtypes.float64: Tol(1e-14, 1e-14)}


def same(dt: DType) -> DType: return dt
def to_bool(dt: DType) -> DType: return dtypes.bool
def to_int32(dt: DType) -> DType: return dtypes.int32
def numeric(dt: DType) -> DType: return dtypes.int32 if dt.is_bool else dt


@dataclass(frozen=True)
class OpRecord:
  """One op. `fn(*arrays, **kwargs)` is the tgfn call; `ref(*operands, **kwargs)` the NumPy reference
  (see the module docstring for the operands it gets). `compute` maps the promoted input dtype to the
  dtype the op computes in, `out` maps that to the result dtype. `domains` has one Domain per argument
  (or one for all). `differentiable`: a float derivative exists almost everywhere (for grad tests)."""
  name: str
  fn: Callable[..., Any]
  ref: Callable[..., Any]
  nargs: int
  dtypes: tuple[DType, ...]
  domains: tuple[Domain, ...] = (FULL,)
  arg_dtypes: Optional[tuple[tuple[DType, ...], ...]] = None  # per argument, overriding `dtypes`
  tol: dict = field(default_factory=lambda: EXACT)
  compute: Callable[[DType], DType] = same
  out: Callable[[DType], DType] = same
  kwargs: dict = field(default_factory=dict)
  differentiable: bool = False
  # ref gets float operands in the compute dtype itself (half types: float32), not float64, because the
  # op's meaning includes its intermediate roundings (round with decimals scales in the dtype)
  ref_in_dtype: bool = False
  kind: str = "elementwise"
  # a composite of binary records, applied left to right (clip is maximum(x, lo), then minimum(., hi), as
  # in JAX): each step promotes only its own two operands, so `ref` is unused and the reference is the fold
  fold: tuple[str, ...] = ()
  # reductions only: reduce over several axes at once (else one int or None); takes keepdims; raises
  # on a zero-size reduction (no identity); a float result's rounding error grows like
  # count * eps * max|x| ** scale_power (ref signature: ref(x, axis, [keepdims,] **kwargs))
  multi_axis: bool = True
  keepdims: bool = True
  needs_nonempty: bool = False
  scale_power: int = 1

  def domain(self, i: int) -> Domain: return self.domains[i] if len(self.domains) > 1 else self.domains[0]
  def dtypes_of(self, i: int) -> tuple[DType, ...]:
    return self.arg_dtypes[i] if self.arg_dtypes else self.dtypes
  def result_dtype(self, promoted: DType) -> DType: return self.out(self.compute(promoted))
  def __repr__(self) -> str: return self.name
  def _repr_pretty_(self, p: Any, cycle: bool) -> None: p.text(self.name)  # short in hypothesis reports


def _unary(name: str, ref: Callable, dts: tuple[DType, ...] = ALL, domain: Domain = FULL,
           **kw: Any) -> OpRecord:
  return OpRecord(name, getattr(tnp, name), ref, 1, dts, (domain,), **kw)


def _binary(name: str, ref: Callable, dts: tuple[DType, ...] = ALL, domains: tuple[Domain, ...] = (FULL,),
            **kw: Any) -> OpRecord:
  return OpRecord(name, getattr(tnp, name), ref, 2, dts, domains, **kw)


def _float_unary(name: str, ref: Callable, domain: Domain = FULL) -> OpRecord:
  return _unary(name, ref, ALL, domain, tol=TRANSCENDENTAL, compute=float_dtype, differentiable=True)


# ---- references for the ops whose NumPy spelling differs from tgfn's (JAX's) meaning
def _floor_divide_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  # float x // +-0 is +-inf (NaN for 0 // 0) in NumPy, JAX and the array API; integer x // 0 is 0 in
  # NumPy and tgfn (JAX: -1)
  # NumPy and tgfn (JAX: -1). An infinite dividend follows the array API, floor(a / b): inf // 2 is inf
  # (NumPy: NaN)
  with np.errstate(divide="ignore", invalid="ignore"):
    out = np.floor_divide(a, b)
    if out.dtype.kind == "f":
      out = np.where(np.isinf(a), np.floor(np.true_divide(a, b)).astype(out.dtype), out)
    return out


def _power_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """np.power; for integers (wrapping) with tgfn's choice for negative exponents, where NumPy raises and
  JAX is implementation-defined: 0, except 1 ** n = 1 and (-1) ** n = +-1."""
  if a.dtype.kind == "f": return np.power(a, b)
  negative = b < 0
  out = np.power(a, np.where(negative, 0, b).astype(b.dtype))
  if not negative.any(): return out
  odd = (b % 2) != 0
  special = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
  return np.where(negative, special, out)


def _identity(x: np.ndarray) -> np.ndarray: return x
def _rsqrt_ref(x: np.ndarray) -> np.ndarray: return 1.0 / np.sqrt(x)


def _round_ref(x: np.ndarray, decimals: int = 0) -> np.ndarray:
  """JAX's round: rint(x * 10**d) / 10**d, each step rounded in the compute dtype (NumPy's too, d >= 0)."""
  return np.round(x, decimals)


def _where_ref(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray: return np.where(c != 0, x, y)


ELEMENTWISE: tuple[OpRecord, ...] = (
  # arithmetic
  _binary("add", np.add, differentiable=True),
  _binary("subtract", np.subtract, NUMERIC, differentiable=True),
  _binary("multiply", np.multiply, differentiable=True),
  _binary("divide", np.divide, compute=float_dtype, differentiable=True),
  _binary("floor_divide", _floor_divide_ref, domains=(DIVIDEND, DIVISOR), compute=numeric),
  _binary("mod", np.mod, domains=(DIVIDEND, DIVISOR), compute=numeric, differentiable=True),
  _binary("power", _power_ref, domains=(Domain(-10.0, 10.0), Domain(-5.0, 5.0)), tol=POWER,
          compute=numeric, differentiable=True),
  OpRecord("power[int]", tnp.power, _power_ref, 2, BOOL + INTS, (FULL, Domain(ints=(-5, 70))),
           compute=numeric),
  _unary("negative", np.negative, NUMERIC, differentiable=True),
  _unary("positive", _identity, ALL, differentiable=True),
  _unary("abs", np.abs, ALL, differentiable=True),
  _unary("sign", np.sign, NUMERIC),
  _unary("square", np.square, ALL, compute=numeric, differentiable=True),
  _unary("reciprocal", np.reciprocal, ALL, compute=float_dtype, differentiable=True),
  _binary("maximum", np.maximum, differentiable=True),
  _binary("minimum", np.minimum, differentiable=True),
  # clip(bfloat16 -258, int16 -257, float16 0) is -256: -257 becomes bfloat16 (-256) before the maximum
  OpRecord("clip", tnp.clip, None, 3, ALL, differentiable=True, fold=("maximum", "minimum")),
  # the condition is bool, the bottom of the lattice: promoting all three is promoting x and y
  OpRecord("where", tnp.where, _where_ref, 3, ALL, arg_dtypes=(BOOL, ALL, ALL), differentiable=True),
  # exponentials, logarithms, roots
  _float_unary("exp", np.exp, BOUNDED),
  _float_unary("exp2", np.exp2, Domain(-30.0, 30.0)),
  _float_unary("expm1", np.expm1, BOUNDED),
  _float_unary("log", np.log, POSITIVE),
  _float_unary("log2", np.log2, POSITIVE),
  _float_unary("log10", np.log10, POSITIVE),
  _float_unary("log1p", np.log1p, Domain(-1.0, None)),
  _float_unary("sqrt", np.sqrt, POSITIVE),
  _float_unary("rsqrt", _rsqrt_ref, POSITIVE),
  _float_unary("cbrt", np.cbrt, Domain(-1e4, 1e4)),
  # trigonometric, hyperbolic
  _float_unary("sin", np.sin, ANGLE),
  _float_unary("cos", np.cos, ANGLE),
  _float_unary("tan", np.tan, Domain(-1.4, 1.4)),
  _float_unary("arctan", np.arctan, FULL),
  _float_unary("tanh", np.tanh, FULL),
  _float_unary("sinh", np.sinh, BOUNDED),
  _float_unary("cosh", np.cosh, BOUNDED),
  # inverse trigonometric and hyperbolic, and friends (tgfn/ops/math_extra.py)
  _float_unary("arcsin", np.arcsin, Domain(-1.0, 1.0)),
  _float_unary("arccos", np.arccos, Domain(-1.0, 1.0)),
  _float_unary("arcsinh", np.arcsinh, FULL),
  _float_unary("arccosh", np.arccosh, Domain(1.0, None)),
  _float_unary("arctanh", np.arctanh, Domain(-1.0, 1.0)),
  _float_unary("sinc", np.sinc, FULL),
  _binary("arctan2", np.arctan2, tol=TRANSCENDENTAL, compute=float_dtype, differentiable=True),
  _binary("logaddexp", np.logaddexp, tol=TRANSCENDENTAL, compute=float_dtype, differentiable=True),
  _binary("logaddexp2", np.logaddexp2, tol=TRANSCENDENTAL, compute=float_dtype, differentiable=True),
  _binary("hypot", np.hypot, tol=TRANSCENDENTAL, compute=float_dtype, differentiable=True),
  # closeness is a threshold: operands the reference would round differently could flip it, so only
  # dtypes whose differences tgfn and NumPy round alike
  _binary("isclose", np.isclose, (dtypes.float32, dtypes.float64), out=to_bool),
  # rounding
  _unary("floor", np.floor, NUMERIC),
  _unary("ceil", np.ceil, NUMERIC),
  _unary("trunc", np.trunc, NUMERIC),
  _unary("round", _round_ref, NUMERIC),
  OpRecord("round[decimals=2]", tnp.round, _round_ref, 1, (dtypes.float16, dtypes.float32, dtypes.float64),
           (Domain(-1e4, 1e4),), kwargs={"decimals": 2}, ref_in_dtype=True),
  _unary("rint", np.rint, NUMERIC, compute=float_dtype),
  # predicates and logic
  _unary("isnan", np.isnan, ALL, out=to_bool),
  _unary("isinf", np.isinf, ALL, out=to_bool),
  _unary("isfinite", np.isfinite, ALL, out=to_bool),
  _binary("logical_and", np.logical_and, out=to_bool),
  _binary("logical_or", np.logical_or, out=to_bool),
  _binary("logical_xor", np.logical_xor, out=to_bool),
  _unary("logical_not", np.logical_not, ALL, out=to_bool),
  _binary("less", np.less, out=to_bool),
  _binary("less_equal", np.less_equal, out=to_bool),
  _binary("greater", np.greater, out=to_bool),
  _binary("greater_equal", np.greater_equal, out=to_bool),
  _binary("equal", np.equal, out=to_bool),
  _binary("not_equal", np.not_equal, out=to_bool),
  # bitwise
  _binary("bitwise_and", np.bitwise_and, BOOL + INTS),
  _binary("bitwise_or", np.bitwise_or, BOOL + INTS),
  _binary("bitwise_xor", np.bitwise_xor, BOOL + INTS),
  _unary("invert", np.invert, BOOL + INTS),
  _binary("left_shift", np.left_shift, BOOL + INTS, (FULL, SHIFT), compute=numeric),
  _binary("right_shift", np.right_shift, BOOL + INTS, (FULL, SHIFT), compute=numeric),
)


# ---- reductions: `ref(x, axis, keepdims, **kwargs)` on operands of the compute dtype (float64 for floats)
def _arg_ref(fn: Callable) -> Callable:
  def ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    return fn(x, axis=axis, keepdims=keepdims).astype(np.int32)
  return ref


def _cumsum_ref(x: np.ndarray, axis: Any) -> np.ndarray: return np.cumsum(x, axis=axis, dtype=x.dtype)


def _reduction(name: str, ref: Callable, dts: tuple[DType, ...] = ALL, domain: Domain = FULL,
               **kw: Any) -> OpRecord:
  return OpRecord(name, getattr(tnp, name.split("[")[0]), ref, 1, dts, (domain,), kind="reduction",
                  tol=kw.pop("tol", REDUCE), **kw)


def _sum_like(fn: Callable) -> Callable:
  def ref(x: np.ndarray, axis: Any, keepdims: bool, **kw: Any) -> np.ndarray:
    return fn(x, axis=axis, keepdims=keepdims, dtype=x.dtype, **kw)
  return ref


def _plain(fn: Callable) -> Callable:
  def ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray: return fn(x, axis=axis, keepdims=keepdims)
  return ref


REDUCTIONS: tuple[OpRecord, ...] = (
  _reduction("sum", _sum_like(np.sum), domain=SMALL, compute=sum_dtype, differentiable=True),
  _reduction("prod", _sum_like(np.prod), domain=Domain(0.5, 2.0, specials=False), compute=sum_dtype,
             differentiable=True),
  _reduction("max", _plain(np.max), needs_nonempty=True, differentiable=True),
  _reduction("min", _plain(np.min), needs_nonempty=True, differentiable=True),
  _reduction("mean", _sum_like(np.mean), domain=SMALL, compute=float_dtype, differentiable=True),
  _reduction("var", _sum_like(np.var), domain=SMALL, compute=float_dtype, scale_power=2, differentiable=True),
  _reduction("var[ddof=1]", _sum_like(np.var), domain=SMALL, compute=float_dtype, scale_power=2,
             kwargs={"ddof": 1}, differentiable=True),
  _reduction("std", _sum_like(np.std), domain=SMALL, compute=float_dtype, differentiable=True),
  # argmax/argmin: int32 as JAX without x64 (NumPy: int64)
  _reduction("argmax", _arg_ref(np.argmax), out=to_int32, multi_axis=False, needs_nonempty=True),
  _reduction("argmin", _arg_ref(np.argmin), out=to_int32, multi_axis=False, needs_nonempty=True),
  _reduction("any", _plain(np.any), out=to_bool),
  _reduction("all", _plain(np.all), out=to_bool),
  _reduction("cumsum", _cumsum_ref, domain=SMALL, compute=sum_dtype, multi_axis=False, keepdims=False,
             differentiable=True),
)

# ---- sorting, NaN-ignoring reductions and scans (tgfn/ops/sorting.py, reduction_extra.py)
def _flat_or(fn: Callable) -> Callable:
  """Apply a ufunc's accumulate (which has no axis=None) to the flattened array when axis is None."""
  def ref(x: np.ndarray, axis: Any) -> np.ndarray: return fn(x.reshape(-1), 0) if axis is None else fn(x, axis)
  return ref


def _argsort_ref(x: np.ndarray, axis: Any) -> np.ndarray:
  """Stable, in IEEE total order as JAX's sort (-0.0 before 0.0; NaN last)."""
  if axis is None: x, axis = x.reshape(-1), 0
  return np.lexsort((~np.signbit(x), x), axis=axis).astype(np.int32)


def _nanarg_ref(fn: Callable) -> Callable:
  def ref(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    """JAX: -1 for an all-NaN slice (NumPy raises there)."""
    if x.dtype.kind != "f": return fn(x, axis=axis, keepdims=keepdims).astype(np.int32)
    none = np.all(np.isnan(x), axis=axis, keepdims=keepdims)
    safe = np.where(np.all(np.isnan(x), axis=axis, keepdims=True), 0, x)
    return np.where(none, -1, fn(safe, axis=axis, keepdims=keepdims)).astype(np.int32)
  return ref


def _cumprod_ref(x: np.ndarray, axis: Any) -> np.ndarray: return np.cumprod(x, axis=axis, dtype=x.dtype)


SORTING_AND_NAN: tuple[OpRecord, ...] = (
  _reduction("sort", lambda x, axis: np.sort(x, axis=axis), multi_axis=False, keepdims=False, differentiable=True),
  _reduction("argsort", _argsort_ref, out=to_int32, multi_axis=False, keepdims=False),
  _reduction("median", _plain(np.median), domain=SMALL, compute=float_dtype, needs_nonempty=True,
             differentiable=True),
  _reduction("cumprod", _cumprod_ref, domain=Domain(0.5, 2.0, specials=False), compute=sum_dtype,
             multi_axis=False, keepdims=False, differentiable=True),
  _reduction("cummax", _flat_or(np.maximum.accumulate), multi_axis=False, keepdims=False, differentiable=True),
  _reduction("cummin", _flat_or(np.minimum.accumulate), multi_axis=False, keepdims=False, differentiable=True),
  _reduction("nansum", _sum_like(np.nansum), domain=SMALL, compute=sum_dtype, differentiable=True),
  _reduction("nanprod", _sum_like(np.nanprod), domain=Domain(0.5, 2.0), compute=sum_dtype, differentiable=True),
  _reduction("nanmax", _plain(np.nanmax), needs_nonempty=True, differentiable=True),
  _reduction("nanmin", _plain(np.nanmin), needs_nonempty=True, differentiable=True),
  _reduction("nanmean", _sum_like(np.nanmean), domain=SMALL, compute=float_dtype, differentiable=True),
  _reduction("nanvar", _sum_like(np.nanvar), domain=SMALL, compute=float_dtype, scale_power=2, differentiable=True),
  _reduction("nanstd", _sum_like(np.nanstd), domain=SMALL, compute=float_dtype, differentiable=True),
  _reduction("nanargmax", _nanarg_ref(np.nanargmax), out=to_int32, multi_axis=False, needs_nonempty=True),
  _reduction("nanargmin", _nanarg_ref(np.nanargmin), out=to_int32, multi_axis=False, needs_nonempty=True),
)
REDUCTIONS = REDUCTIONS + SORTING_AND_NAN

ALL_RECORDS: tuple[OpRecord, ...] = ELEMENTWISE + REDUCTIONS
BY_NAME: dict[str, OpRecord] = {r.name: r for r in ALL_RECORDS}
assert len(BY_NAME) == len(ALL_RECORDS), "record names must be unique"
