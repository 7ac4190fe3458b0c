"""Ulp error of every transcendental, per input range, per path, next to NumPy's own float32 error.

  python -m tgfn.tools.ulp_table [--samples N] [--python-samples N] [--dtype float32|float64|all]

Paths: `C` is the CPU device with the C library's functions (the default), `decomposed` the CPU device
with TRANSCENDENTAL=2 (tgfn/codegen/decompositions.py, what a renderer without exp2/log2/sin/cos gets),
`PYTHON` the reference interpreter (tgfn/uop/alu.py). The reference is NumPy in long double (the C
library's long double functions, 11 more bits than float64 and no SIMD path), rounded to nothing: the
error of a result y is |y - ref| / ulp(ref), ulp being the spacing of the dtype at |ref|. Inputs are
fixed grids of seeded random samples, so the table is the same on every run and machine (up to the
C library). tests/codegen/test_ulp_bounds.py asserts `BOUNDS` on a smaller sample; docs/numpy.md holds
the printed table.
"""
from __future__ import annotations

import argparse
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Range:
  """Inputs |x| log-uniform in [lo, hi) (or uniform, when `linear`), with random signs when `signed`."""
  lo: float
  hi: float
  signed: bool = True
  linear: bool = False

  def sample(self, n: int, dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if self.linear: x = rng.uniform(self.lo, self.hi, n)
    else: x = np.exp(rng.uniform(np.log(self.lo), np.log(self.hi), n))
    if self.signed: x = x * rng.choice([-1.0, 1.0], n)
    return x.astype(dtype)

  def __str__(self) -> str:
    body = f"[{self.lo:g}, {self.hi:g})"
    return ("+-" if self.signed else "") + body


TRIG = (Range(0.0, 1.0, linear=True), Range(1, 1e2), Range(1e2, 1e4), Range(1e4, 1e8), Range(1e8, 1e30))
POSITIVE_ALL = (Range(1e-38, 1e-30, signed=False), Range(1e-30, 0.5, signed=False),
                Range(0.5, 2.0, signed=False, linear=True), Range(2.0, 3e38, signed=False))
# name -> (input ranges for float32, for float64; None: the float32 ones)
FUNCTIONS: dict[str, tuple[tuple[Range, ...], tuple[Range, ...] | None]] = {
  "sin": (TRIG, TRIG + (Range(1e30, 1e300),)),
  "cos": (TRIG, TRIG + (Range(1e30, 1e300),)),
  "tan": (TRIG, TRIG + (Range(1e30, 1e300),)),
  "exp": ((Range(0, 1, linear=True), Range(1, 88.7, signed=False), Range(1, 103, signed=False, linear=True)),
          (Range(0, 1, linear=True), Range(1, 709, signed=False), Range(1, 744, signed=False, linear=True))),
  "exp2": ((Range(0, 1, linear=True), Range(1, 127.9, signed=False), Range(1, 149, signed=False, linear=True)),
           (Range(0, 1, linear=True), Range(1, 1023.9, signed=False), Range(1, 1074, signed=False, linear=True))),
  "expm1": ((Range(1e-30, 1), Range(1, 88.7, signed=False), Range(1, 100, signed=False, linear=True)), None),
  "log": (POSITIVE_ALL, None),
  "log2": (POSITIVE_ALL, None),
  "log10": (POSITIVE_ALL, None),
  "log1p": ((Range(1e-30, 0.999), Range(1, 3e38, signed=False)), None),
  "sqrt": (POSITIVE_ALL, None),
  "tanh": ((Range(1e-30, 0.5), Range(0.5, 10)), None),
  "sinh": ((Range(1e-30, 1), Range(1, 88)), None),
  "cosh": ((Range(0, 1, linear=True), Range(1, 88)), None),
  "arctan": ((Range(1e-30, 1), Range(1, 1e30)), None),
}
NEGATED_RANGE_FUNCTIONS = {"exp", "exp2", "expm1"}  # their second and third ranges are also run on -x

# the largest ulp error tgfn promises per function, on every path and range above, float32 and float64
# (tests/codegen/test_ulp_bounds.py asserts them; docs/numpy.md shows the measured table)
BOUNDS = {"sin": 2.5, "cos": 2.5, "tan": 3.5, "exp": 2.0, "exp2": 1.5, "expm1": 4.0, "log": 3.5, "log2": 3.0,
          "log10": 4.5, "log1p": 4.0, "sqrt": 0.51, "tanh": 5.0, "sinh": 4.0, "cosh": 2.0, "arctan": 3.0}

PATHS = ("C", "decomposed", "PYTHON")
# "default": the CPU as it runs unless TRANSCENDENTAL is set (exp2 and log2 decomposed, sin and cos from the
# C library): per function the same code as one of the two columns, so not a column of its own
_PATH_ENV = {"C": {"DEV": "CPU", "TRANSCENDENTAL": "1"}, "decomposed": {"DEV": "CPU", "TRANSCENDENTAL": "2"},
             "PYTHON": {"DEV": "PYTHON", "TRANSCENDENTAL": "1"}, "default": {"DEV": "CPU", "TRANSCENDENTAL": ""}}


def cases(dtype: type) -> list[tuple[str, Range, bool]]:
  """(function, range, negate) rows for a dtype, in table order."""
  out = []
  for name, (r32, r64) in FUNCTIONS.items():
    ranges = r32 if dtype is np.float32 or r64 is None else r64
    for i, r in enumerate(ranges):
      out.append((name, r, False))
      if name in NEGATED_RANGE_FUNCTIONS and i > 0: out.append((name, r, True))
  return out


def inputs(name: str, r: Range, negate: bool, dtype: type, n: int) -> np.ndarray:
  seed = zlib.crc32(f"{name} {r} {negate} {np.dtype(dtype).name}".encode())
  x = r.sample(n, dtype, seed)
  return -x if negate else x


def reference(name: str, x: np.ndarray) -> np.ndarray:
  with np.errstate(all="ignore"): return getattr(np, name)(x.astype(np.longdouble))


def ulp_errors(got: np.ndarray, ref: np.ndarray, dtype: type) -> np.ndarray:
  """|got - ref| in ulps of the dtype at ref; equal infinities and NaNs count 0, other mismatches inf."""
  with np.errstate(all="ignore"):
    rounded = ref.astype(dtype)
    spacing = np.spacing(np.abs(rounded)).astype(np.longdouble)
    err = np.abs(got.astype(np.longdouble) - ref) / spacing
  special = ~np.isfinite(rounded) | ~np.isfinite(got)
  same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
  return np.where(special, np.where(same, 0.0, np.inf), err).astype(np.float64)


def tgfn_values(name: str, x: np.ndarray, path: str) -> np.ndarray:
  import tgfn
  import tgfn.numpy as tnp
  with tgfn.Context(**_PATH_ENV[path]): return np.asarray(getattr(tnp, name)(tnp.array(x)))


def measure(name: str, x: np.ndarray, path: str) -> tuple[float, float]:
  """(max, p99) ulp error of `path` ("numpy" for NumPy's own function in the dtype) on inputs x."""
  if path == "numpy":
    with np.errstate(all="ignore"): got = getattr(np, name)(x)
  else: got = tgfn_values(name, x, path)
  err = ulp_errors(got, reference(name, x), x.dtype.type)
  return float(err.max()), float(np.percentile(err, 99))


def table(dtype: type, n: int, n_python: int, paths: tuple[str, ...] = PATHS) -> list[str]:
  cols = list(paths) + ["numpy"] if dtype is np.float32 else list(paths)
  rows = [f"| function | range ({np.dtype(dtype).name}) | " + " | ".join(f"{c} max / p99" for c in cols) + " |",
          "|---|---|" + "---|" * len(cols)]
  for name, r, negate in cases(dtype):
    cells = []
    for path in cols:
      x = inputs(name, r, negate, dtype, n_python if path == "PYTHON" else n)
      worst, p99 = measure(name, x, path)
      cells.append(f"{worst:.2f} / {p99:.2f}")
    rows.append(f"| {name} | {'-' if negate else ''}{r} | " + " | ".join(cells) + " |")
  return rows


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--samples", type=int, default=100_000, help="inputs per range (C, decomposed, NumPy)")
  parser.add_argument("--python-samples", type=int, default=1000, help="inputs per range on PYTHON")
  parser.add_argument("--dtype", choices=["float32", "float64", "all"], default="all")
  args = parser.parse_args(argv)
  dts = [np.float32, np.float64] if args.dtype == "all" else [getattr(np, args.dtype)]
  for dt in dts:
    print("\n".join(table(dt, args.samples, args.python_samples)), end="\n\n", flush=True)


if __name__ == "__main__":
  main()
