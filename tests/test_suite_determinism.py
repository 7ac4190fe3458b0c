"""The suite draws the same hypothesis examples on every run and machine, and prints how to replay a failure."""
import os

import pytest
from hypothesis import settings


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "tgfn") != "tgfn", reason="another profile was chosen")
def test_default_hypothesis_profile_is_deterministic_and_prints_reproductions():
  current = settings()
  assert current.derandomize and current.database is None
  assert current.print_blob
