"""Small shared helpers: environment switches, read when asked (tests change them at run time)."""
from __future__ import annotations

import os


def DEBUG() -> int:
  """DEBUG=1 kernel count and time per realize, 2 a line per kernel, 3 kernel plans, 4 source, 5 UOps."""
  return int(os.environ.get("DEBUG", "0") or 0)
