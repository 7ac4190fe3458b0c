"""JAX-style configuration: `tgfn.config.update("debug_nans", True)`. Each option is an environment
switch (tgfn/helpers.py), so the two ways of setting it are one."""
from __future__ import annotations

import os
from typing import Any

_OPTIONS = {"debug_nans": "DEBUG_NANS", "log_compiles": "TGFN_LOG_COMPILES"}


def update(name: str, value: Any) -> None:
  """Set option `name` (one of debug_nans, log_compiles) to `value`."""
  if name not in _OPTIONS: raise ValueError(f"unknown tgfn config option {name!r}; known: {sorted(_OPTIONS)}")
  os.environ[_OPTIONS[name]] = "1" if value else "0"
  if name == "debug_nans" and value:  # the check names the user's line: remember lines from now on
    from tgfn.viz.locations import turn_on
    turn_on()


def read(name: str) -> bool:
  """The option's current value."""
  if name not in _OPTIONS: raise ValueError(f"unknown tgfn config option {name!r}; known: {sorted(_OPTIONS)}")
  return os.environ.get(_OPTIONS[name], "0") not in ("", "0")
