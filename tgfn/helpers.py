"""Small shared helpers: environment switches read once, and formatting."""
from __future__ import annotations

import functools
import os
from typing import Any, Iterable


@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  return type(default)(os.environ.get(key, default))


def DEBUG() -> int:
  """DEBUG=1 kernel count and time per realize, 2 a line per kernel, 3 kernel plans, 4 source, 5 UOps."""
  return int(os.environ.get("DEBUG", "0") or 0)


def prod(xs: Iterable[int]) -> int:
  out = 1
  for x in xs: out *= x
  return out
