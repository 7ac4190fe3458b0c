"""Values and first derivatives of the elementwise functions and activations of tgfn.numpy, tgfn.nn and
tgfn.scipy.special at zero, ties, kinks, poles, domain edges and +-inf, against JAX's, recorded once by
tests/data/gen_kink_grads.py into tests/data/kink_grads.json (no JAX needed here).

Each case is checked in reverse mode (grad) against JAX's grad and in forward mode (jvp) against JAX's
jvp. Where JAX's two modes disagree with each other at a point (they do at some infinities, e.g. the
derivative of hypot(x, 1.) at inf is NaN by grad and 0 by jvp, an artefact of how each mode runs through
its decomposition), either of JAX's answers is accepted in both modes.
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
  jax_results = {what: _decode(values) for what, values in RECORD["cases"][expr].items()}
  modes_agree = _agrees(jax_results["grad"], jax_results["jvp"])
  got = _tgfn_results(expr, points)
  wrong = []
  for what in ("value", "grad", "jvp"):
    ok = _agrees(got[what], jax_results[what])
    if what != "value": ok |= ~modes_agree & _agrees(got[what], jax_results["jvp" if what == "grad" else "grad"])
    wrong += [f"{what} at x={p}: tgfn {g}, JAX {w}" for p, g, w, good in
              zip(points, got[what], jax_results[what], ok) if not good]
  assert not wrong, f"{expr}:\n  " + "\n  ".join(wrong)
