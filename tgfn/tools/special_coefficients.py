"""Regenerate the Chebyshev coefficients of `tgfn/ops/special.py` (`python -m tgfn.tools.special_coefficients`).

erfcx(x) = exp(x^2) erfc(x) is fitted on [1, 2], [2, 4] and [4, 8] by least squares at Chebyshev nodes,
against mpmath at 40 digits. Needs mpmath (a dependency of the test tools, not of tgfn).
"""
from __future__ import annotations

import numpy as np

PIECES = ((1, 2, 16), (2, 4, 22), (4, 8, 22))


def fit(lo: float, hi: float, degree: int) -> np.ndarray:
  import mpmath as mp
  mp.mp.dps = 40
  nodes = np.cos(np.pi * (np.arange(4 * degree) + 0.5) / (4 * degree))
  xs = [mp.mpf(lo) + (mp.mpf(hi) - lo) * (mp.mpf(float(u)) + 1) / 2 for u in nodes]
  ys = np.array([float(mp.erfc(x) * mp.exp(x * x)) for x in xs])
  return np.polynomial.chebyshev.chebfit(nodes, ys, degree)


if __name__ == "__main__":
  import textwrap
  for lo, hi, degree in PIECES:
    coefficients = ", ".join(repr(float(c)) for c in fit(lo, hi, degree))
    print(f"  ({float(lo)}, {float(hi)}, (")
    print(textwrap.indent(textwrap.fill(coefficients, 110, break_on_hyphens=False), "    "))
    print("  )),")
