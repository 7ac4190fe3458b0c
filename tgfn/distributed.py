"""Multi-process runs: which process this is and how many there are (one until `initialize` joins a job)."""
from __future__ import annotations

_state = {"index": 0, "count": 1}


def process_index() -> int:
  """This process's rank in the job (0 when not distributed)."""
  return _state["index"]


def process_count() -> int:
  """How many processes the job has (1 when not distributed)."""
  return _state["count"]
