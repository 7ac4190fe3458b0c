"""Programs the fuzzers (and probing of the paths they cover) found wrong, kept as regression tests.
Each is a program of tests/fuzz/programs.py steps, checked as the differential fuzzer checks it."""
from __future__ import annotations

import numpy as np

from tests.fuzz.programs import Program, cast_step, input_step
from tests.fuzz.test_differential import check
from tgfn.dtype import dtypes


def test_int64_and_uint64_to_float32_round_once() -> None:
  """The PYTHON interpreter converted ints through a double: 2**63 + 2**39 + 1 became the float32 tie
  2**63 + 2**39 and rounded to even (2**63), where C (and NumPy) round up to 2**63 + 2**40."""
  big = [2**63 + 2**39 + 1, 2**64 - 1, 2**63 + 2**40 + 2**39, 3]
  for host, dt in ((np.array(big, np.uint64), dtypes.uint64),
                   (np.array([2**62 + 2**38 + 1, -(2**62 + 2**38 + 1), 2**53 + 1], np.int64), dtypes.int64)):
    for target in (dtypes.float32, dtypes.float16, dtypes.float64):
      check(Program([input_step(host, dt), cast_step(0, dt, target)]))
