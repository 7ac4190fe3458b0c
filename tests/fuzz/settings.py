"""How long the fuzzers run: a bounded, derandomized run in the default suite; `pytest --fuzz[=N]` or
TGFN_FUZZ=N runs N random examples per test (new ones each run, failures printed with a reproducer)."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG = int(os.environ.get("TGFN_FUZZ", "0") or 0)
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
          HealthCheck.filter_too_much]


def fuzz_settings(bounded_examples: int) -> settings:
  """`bounded_examples` fixed examples (same every run, no example database), or TGFN_FUZZ random ones."""
  if LONG: return settings(max_examples=LONG, deadline=None, suppress_health_check=_QUIET, derandomize=False)
  return settings(max_examples=bounded_examples, deadline=None, suppress_health_check=_QUIET, derandomize=True,
                  database=None)
