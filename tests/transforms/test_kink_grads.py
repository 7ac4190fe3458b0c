"""Values and first derivatives of the elementwise functions and activations of tgfn.numpy, tgfn.nn and
tgfn.scipy.special at zero, ties, kinks, poles, domain edges and +-inf, against JAX's, recorded once by
tests/data/gen_kink_grads.py into tests/data/kink_grads.json (no JAX needed here).

Each case is checked in reverse mode (grad) against JAX's grad and in forward mode (jvp) against JAX's
jvp. Where JAX's two modes disagree with each other at a point (they do at some infinities, e.g. the
derivative of hypot(x, 1.) at inf is NaN by grad and 0 by jvp, an artefact of how each mode runs through
its decomposition), either of JAX's answers is accepted in both modes. Where tgfn deliberately differs
from JAX, DELIBERATE says what tgfn gives and why (also in docs/transforms.md).
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

import tgfn
import tgfn.nn
import tgfn.numpy as tnp
import tgfn.scipy.special

_RECORD_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "data", "kink_grads.json")
with open(_RECORD_PATH) as _f: RECORD = json.load(_f)
NAMES = {"np": tnp, "nn": tgfn.nn, "special": tgfn.scipy.special}
INF, NAN = math.inf, math.nan
DERIVATIVE = ("grad", "jvp")

# (case, results concerned, ((point, tgfn's result), ...), why tgfn differs from JAX there)
DELIBERATE = [
  ("np.floor_divide(x, 1.)", ("value",), ((-INF, -INF), (INF, INF)),
   "an infinite dividend takes the array API's floor(x / y) (NumPy and JAX: NaN)"),
  ("special.digamma(x)", ("value",), ((-0.0, -INF), (0.0, -INF)), "digamma(0) is -inf, as SciPy's (JAX: NaN)"),
  ("special.digamma(x)", DERIVATIVE, ((-INF, NAN), (INF, 0.0)),
   "digamma' is trigamma: 0 at +inf, its limit (JAX: NaN); digamma has no limit at -inf, so no slope (JAX: inf)"),
  ("special.gammaln(x)", DERIVATIVE, ((-0.0, -INF), (0.0, -INF)), "gammaln' is digamma, -inf at 0 as SciPy's (JAX: NaN)"),
  ("np.power(x, 0.)", DERIVATIVE, ((-0.0, 0.0), (0.0, 0.0)), "x^0 is the constant 1 (JAX's 0 * 0^-1 is NaN)"),
  ("np.power(x, x)", DERIVATIVE, ((-0.0, -INF), (0.0, -INF)), "the limit from the right of x^x (log x + 1) (JAX: NaN)"),
  ("np.power(x, 0.5)", DERIVATIVE, ((-0.0, -INF),),
   "x ** 0.5 is sqrt(x), whose slope at -0.0 is 1 / (2 sqrt(-0.0)) = -inf, as JAX's sqrt (JAX's pow: +inf)"),
  ("np.logaddexp(x, x)", DERIVATIVE, ((INF, NAN),),
   "at a tie of infinities the slope depends on the direction (1 along x = y, 0 in x along y = inf); JAX's 2 is neither"),
  ("np.logaddexp2(x, x)", DERIVATIVE, ((INF, NAN),), "as logaddexp"),
  ("nn.mish(x)", ("grad",), ((INF, 1.0),), "reverse mode gives the limit of the slope, the saturated tanh passing no "
   "cotangent (JAX: NaN); forward mode's product rule has inf * 0, NaN in both"),
  ("special.ndtri(x)", DERIVATIVE, ((-0.0, INF), (0.0, INF), (1.0, INF)),
   "ndtri'(p) = 1 / phi(ndtri(p)) is +inf at 0 and 1 (JAX: 0)"),
]


def _at(points: np.ndarray, point: float) -> np.ndarray:
  """Where `points` is `point`, telling -0.0 from 0.0."""
  return (points == point) & (np.signbit(points) == np.signbit(point))


def _expected(expr: str, points: np.ndarray) -> dict[str, np.ndarray]:
  """JAX's recorded results for `expr`, with tgfn's deliberate differences in place."""
  expected = {what: _decode(values) for what, values in RECORD["cases"][expr].items()}
  for case, whats, results, _why in DELIBERATE:
    if case != expr: continue
    for what in whats:
      for point, result in results: expected[what][_at(points, point)] = result
  return expected


def _decode(values: list) -> np.ndarray:
  return np.array([float(v) for v in values], np.float32)


def _agrees(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Elementwise: equal NaN-ness, equal infinities, finite values within float32 rounding of each other."""
  both_nan = np.isnan(got) & np.isnan(want)
  with np.errstate(invalid="ignore"):
    close = np.isclose(got, want, rtol=2e-5, atol=1e-6) & (np.isfinite(want) | (got == want))
  return both_nan | close


def _tgfn_results(expr: str, points: np.ndarray) -> dict[str, np.ndarray]:
  f = eval(f"lambda x: {expr}", dict(NAMES))
  x = tnp.asarray(points)
  value = f(x)
  grad = tgfn.grad(lambda x: tnp.sum(f(x)))(x)
  _, jvp = tgfn.jvp(f, (x,), (tnp.ones_like(x),))
  return {"value": np.asarray(value), "grad": np.asarray(grad), "jvp": np.asarray(jvp)}


@pytest.mark.parametrize("expr", list(RECORD["cases"]))
def test_matches_jax_at_kinks_ties_and_edges(expr: str) -> None:
  points = _decode(RECORD["points"])
  expected = _expected(expr, points)
  modes_agree = _agrees(expected["grad"], expected["jvp"])
  got = _tgfn_results(expr, points)
  wrong = []
  for what in ("value", "grad", "jvp"):
    ok = _agrees(got[what], expected[what])
    if what != "value": ok |= ~modes_agree & _agrees(got[what], expected["jvp" if what == "grad" else "grad"])
    wrong += [f"{what} at x={p}: tgfn {g}, expected {w}" for p, g, w, good in
              zip(points, got[what], expected[what], ok) if not good]
  assert not wrong, f"{expr}:\n  " + "\n  ".join(wrong)


@pytest.mark.parametrize("case, whats, results, why", DELIBERATE, ids=[f"{d[0]}-{d[1][0]}" for d in DELIBERATE])
def test_deliberate_differences_still_differ_from_jax(case: str, whats: tuple, results: dict, why: str) -> None:
  """Each entry of DELIBERATE names a real difference from the record (else it is stale)."""
  points = _decode(RECORD["points"])
  for what in whats:
    jax_values = _decode(RECORD["cases"][case][what])
    for point, result in results:
      assert not _agrees(jax_values[_at(points, point)], np.float32(result)).any(), (case, what, point, why)


@pytest.mark.parametrize("f, x, want", [
  (tgfn.nn.softplus, 0.0, 0.25),                                    # sigmoid'(0): the rule's own derivative
  (lambda x: tnp.logaddexp2(x, 0.0), 0.0, math.log(2.0) / 4),
  (lambda x: x ** 3, 0.0, 0.0),                                     # 3 x^2 is a power again: its rule applies
  (lambda x: x ** 3, 2.0, 12.0),
  (lambda x: tnp.power(x, tnp.asarray(2.0)), 0.0, 2.0),
], ids=["softplus", "logaddexp2", "cube-at-0", "cube-at-2", "power-array-exponent"])
def test_second_derivatives_at_kinks_and_ties(f, x: float, want: float) -> None:
  """The derivative rules are themselves differentiable where the math is: forward over reverse, and
  reverse over reverse."""
  assert float(tgfn.hessian(f)(x)) == pytest.approx(want, rel=1e-6)
  assert float(tgfn.grad(tgfn.grad(f))(x)) == pytest.approx(want, rel=1e-6)
