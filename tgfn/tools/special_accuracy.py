"""Measure tgfn.scipy.special against mpmath (`python -m tgfn.tools.special_accuracy [--samples N]`).

For each function and range: the largest relative error of the float64 result (absolute where the
true value is near a root, marked 'abs'), and the largest error of the float32 result in float32 ulps
of the true value. Inputs are fixed seeded samples, so every run prints the same table. Needs mpmath.
"""
from __future__ import annotations

import argparse

import numpy as np

# (name, mpmath function, ranges (lo, hi, spacing: 'lin' or 'log'), error kind)
CASES = (
  ("erf", "erf", ((-1, 1, "lin"), (-6, 6, "lin"), (1e-300, 1e-3, "log")), "rel"),
  ("erfc", "erfc", ((-6, 6, "lin"), (6, 26.5, "lin")), "rel"),  # (erfc(26.6) is subnormal)
  ("erfinv", "erfinv", ((-0.999, 0.999, "lin"), (1e-300, 1e-3, "log")), "rel"),
  ("ndtr", "ncdf", ((-37.5, -1, "lin"), (-1, 8, "lin")), "rel"),
  ("log_ndtr", "log_ncdf", ((-1e3, -1, "lin"), (-1, 30, "lin")), "rel"),
  ("ndtri", "ndtri", ((1e-300, 1e-3, "log"), (1e-3, 1 - 1e-3, "lin")), "rel"),
  ("gammaln", "loggamma", ((0.01, 0.9, "lin"), (2.5, 30, "lin"), (30, 1e10, "log"), (-20.9, -0.1, "lin")), "rel"),
  ("gammaln", "loggamma", ((0.9, 2.5, "lin"),), "abs"),
  ("digamma", "digamma", ((0.01, 1.3, "lin"), (1.7, 1e10, "log"), (-20.9, -0.1, "lin")), "rel"),
  ("digamma", "digamma", ((1.3, 1.7, "lin"),), "abs"),
)


def _mp_function(name: str):
  import mpmath as mp
  if name == "ncdf": return lambda x: mp.ncdf(x)
  if name == "log_ncdf": return lambda x: mp.log(mp.ncdf(x)) if x < 0 else mp.log1p(-mp.ncdf(-x))
  if name == "ndtri": return _ndtri
  if name == "loggamma": return lambda x: mp.log(abs(mp.gamma(x)))
  return getattr(mp, name)


def _ndtri(p):
  import mpmath as mp
  with mp.workdps(int(-mp.log10(p)) + 50):  # enough digits that 1 - 2p keeps p's
    return -mp.sqrt(2) * mp.erfinv(1 - 2 * p)


def _samples(lo: float, hi: float, spacing: str, n: int, rng: np.random.Generator) -> np.ndarray:
  if spacing == "log": return np.exp(rng.uniform(np.log(lo), np.log(hi), n))
  return rng.uniform(lo, hi, n)


def measure(samples: int) -> list[tuple[str, str, str, float, float]]:
  import mpmath as mp
  import tgfn.scipy.special as special
  mp.mp.dps = 50
  rng = np.random.default_rng(0)
  rows = []
  for name, mp_name, ranges, kind in CASES:
    f, ref_f = getattr(special, name), _mp_function(mp_name)
    for lo, hi, spacing in ranges:
      x = _samples(lo, hi, spacing, samples, rng)
      ref = np.array([ref_f(mp.mpf(float(v))) for v in x])
      ref64 = ref.astype(np.float64)
      got = f(x).numpy()
      err = np.abs(got - ref64) if kind == "abs" else np.abs(got - ref64) / np.maximum(np.abs(ref64), 1e-300)
      x32 = x.astype(np.float32)
      x32 = x32[(x32 != 0) & np.isfinite(x32)]  # float32 inputs that exist (1e-300 does not)
      ref32 = np.array([ref_f(mp.mpf(float(v))) for v in x32]).astype(np.float64)
      ulp = np.spacing(np.abs(ref32).astype(np.float32)).astype(np.float64)
      ulps = np.abs(f(x32).numpy().astype(np.float64) - ref32) / ulp
      rows.append((name, f"[{lo:g}, {hi:g}]", kind, float(np.max(err)), float(np.max(ulps))))
  return rows


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--samples", type=int, default=1000)
  args = parser.parse_args()
  print("| function | range | float64 max error | float32 max ulps |")
  print("|---|---|---|---|")
  for name, rng_text, kind, err, ulps in measure(args.samples):
    print(f"| {name} | {rng_text} | {err:.2g}{' (abs)' if kind == 'abs' else ''} | {ulps:.2f} |")
