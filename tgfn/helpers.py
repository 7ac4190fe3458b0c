"""Settings: every environment switch tgfn reads, in one place.

The environment is the store (tests change it at run time with monkeypatch.setenv, and child
processes inherit it), `getenv` is the one reader, `settings()` is a snapshot of every switch (what a
VIZ capture records), and `Context(DEBUG=2)` overrides switches for a block of code:

  with tgfn.Context(DEBUG=2, NOOPT=1): f(x)
"""
from __future__ import annotations

import os
from typing import Any, Optional

# name -> (default, what it does). docs/observability.md lists them.
SWITCHES: dict[str, tuple[str, str]] = {
  "DEBUG": ("0", "1 a line per realize or jit call, 2 a line per kernel launch, 3 what each kernel fuses and "
                 "why each buffer exists, 4 the source, 5 the linear program with operands"),
  "VIZ": ("0", "1: serve a page of every realize, jit compile, pass and kernel on 127.0.0.1"),
  "VIZ_PORT": ("0", "the VIZ server's port (0: any free port)"),
  "VIZ_FILE": ("", "with VIZ=1, also write the page as a static HTML file at exit"),
  "BEAM": ("0", "choose kernel opts by a timed search of this width"),
  "NOOPT": ("0", "1: no kernel opts (plain loops)"),
  "TRANSCENDENTAL": ("", "1: C library exp2/log2/sin/cos everywhere; 2: polynomials on every renderer; unset: the renderer's choice"),
  "STRICT_FLOAT": ("0", "1: never reassociate float reductions"),
  "SPEC": ("0", "1: check every graph against the IR spec"),
  "DEV": ("CPU", "the default device"),
  "DEBUG_NANS": ("0", "1: check every kernel output for NaN/Inf"),
  "TGFN_LOG_COMPILES": ("0", "1: say why each jitted function compiles"),
}


def getenv(name: str, default: Optional[str] = None) -> str:
  """The switch's current value (the environment's, else its registered default)."""
  value = os.environ.get(name)
  if value is None or value == "": return default if default is not None else SWITCHES.get(name, ("",))[0]
  return value


def flag(name: str) -> bool:
  """An on/off switch: set to anything but '' or '0'."""
  return getenv(name) not in ("", "0")


def DEBUG() -> int:
  """DEBUG=1 kernel count and time per realize or jit call, 2 a line per kernel, 3 what each kernel fuses
  and why each buffer is materialized, 4 source, 5 the linear program with operands."""
  return int(getenv("DEBUG") or 0)


def settings() -> dict[str, str]:
  """The value of every known switch now (what a capture records)."""
  return {name: getenv(name) for name in SWITCHES}


class Context:
  """Override switches for a block: `with Context(DEBUG=2): ...`. The values go into the environment for
  the block (so every reader, fast paths and child processes included, sees them) and are restored after.
  Not thread-local: the environment is the process's."""
  def __init__(self, **switches: Any):
    self.switches = {k: str(int(v) if isinstance(v, bool) else v) for k, v in switches.items()}
    self._saved: list[dict[str, Optional[str]]] = []

  def __enter__(self) -> Context:
    self._saved.append({k: os.environ.get(k) for k in self.switches})
    os.environ.update(self.switches)
    return self

  def __exit__(self, *exc: Any) -> None:
    for k, v in self._saved.pop().items():
      if v is None: os.environ.pop(k, None)
      else: os.environ[k] = v


# Source locations (tgfn/viz/locations.py): None, or the function `Array(uop)` calls to remember the
# user's line that built `uop`; `differentiating` is the forward node a backward rule is working on.
locator: Optional[Any] = None
differentiating: Optional[Any] = None

# Pass tracking (tgfn/viz/recorder.py): None, or the Recorder that VIZ=1 turns on. Kept here so the IR
# (tgfn/uop/ops.py) and the engine need no viz import; with VIZ off each hook costs one global read.
tracker: Optional[Any] = None


def track(name: str, before: Any, after: Any) -> None:
  """Record a named pass's input and output graphs (UOps, lists of UOps or Arrays)."""
  if tracker is not None: tracker.record_pass(name, before, after)


def track_begin(title: str, graph: Any) -> None:
  """A realize or jit compile starts: its passes and kernels are grouped under `title` until track_end."""
  if tracker is not None: tracker.begin(title, graph)


def track_kernel(kernel: Any) -> None:
  """Codegen starts on `kernel`: the passes that follow belong to it."""
  if tracker is not None: tracker.enter_kernel(kernel)


def track_end(kernels: Any) -> None:
  """The realize or jit compile begun last is done; these are its compiled kernels."""
  if tracker is not None: tracker.end(kernels)
