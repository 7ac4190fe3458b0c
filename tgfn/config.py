"""JAX-style configuration: `tgfn.config.update("debug_nans", True)` or `tgfn.config.update("DEBUG", 2)`.
Each option is a setting of `tgfn.settings` (tgfn/helpers.py): this sets it for the rest of the process."""
from __future__ import annotations

from typing import Any

from tgfn.helpers import known, settings

_ALIASES = {"debug_nans": "DEBUG_NANS", "log_compiles": "TGFN_LOG_COMPILES"}  # JAX's names


def update(name: str, value: Any) -> None:
  """Set option `name` (a setting's name, e.g. DEBUG or BEAM, or debug_nans, log_compiles) to `value`."""
  settings.update(_ALIASES.get(name, name), value)


def read(name: str) -> Any:
  """The option's current value."""
  return getattr(settings, known(_ALIASES.get(name, name)).name)
