"""Settings: every switch tgfn reads, in one object.

`settings` holds each switch as an attribute (`settings.DEBUG`, `settings.BEAM`, ...), typed and ready:
reading one on a hot path is an attribute access. The environment fills it once, at import; after that
it changes only through

  tgfn.config.update("DEBUG", 2)                # for the rest of the process
  with tgfn.Context(DEBUG=2, NOOPT=1): f(x)     # for a block (nestable)
  tgfn.settings.reload()                        # read os.environ again (after changing it in-process)

`settings()` is a snapshot of every switch (what each VIZ capture records). docs/observability.md has the
table of switches.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional


def _flag(text: str) -> bool: return text.strip() not in ("", "0")


def _integer(text: str) -> int: return int(text.strip())


@dataclass(frozen=True)
class Switch:
  """One setting: its environment variable's name, its default, how the variable's text is read and what it
  does. `keyed`: generated code depends on it, so compiled plans and the disk cache key on it."""
  name: str
  default: Any
  parse: Callable[[str], Any]
  meaning: str
  keyed: bool = False

  def read(self, value: Any) -> Any:
    """The typed value of `value`: text from the environment, or a Python value from config.update/Context."""
    if value is None or (isinstance(value, str) and value.strip() == ""): return self.default
    try:
      return self.parse(value if isinstance(value, str) else str(int(value) if isinstance(value, bool) else value))
    except ValueError:
      raise ValueError(f"setting {self.name}: cannot read {value!r} as {self.parse.__name__.strip('_')} "
                       f"(default {self.default!r}): {self.meaning}") from None


# docs/observability.md lists them (tests/viz/test_settings.py checks it does).
SWITCHES: dict[str, Switch] = {s.name: s for s in [
  Switch("DEBUG", 0, _integer, "1 a line per realize or jit call, 2 a line per kernel launch, 3 what each kernel "
                               "fuses and why each buffer exists, 4 the source, 5 the linear program with operands"),
  Switch("VIZ", False, _flag, "serve a page of every realize, jit compile, pass and kernel on 127.0.0.1 "
                              "(read at import)"),
  Switch("VIZ_PORT", 0, _integer, "the VIZ server's port (0: any free port)"),
  Switch("VIZ_FILE", "", str, "with VIZ=1, also write the page as a static HTML file at exit"),
  Switch("BEAM", "0", str, "choose kernel opts by a timed search of this width (0: off)", keyed=True),
  Switch("NOOPT", False, _flag, "no kernel opts (plain loops)", keyed=True),
  Switch("TRANSCENDENTAL", "", str, "1: C library exp2/log2/sin/cos everywhere; 2: polynomials on every renderer; "
                                    "unset: the renderer's choice", keyed=True),
  Switch("STRICT_FLOAT", False, _flag, "never reassociate float reductions", keyed=True),
  Switch("DEV", "CPU", str, "the default device", keyed=True),
  Switch("SPEC", False, _flag, "check every graph against the IR spec (tgfn/uop/spec.py)"),
  Switch("DEBUG_NANS", False, _flag, "check every kernel output for NaN/Inf, naming the user's line"),
  Switch("SOURCE_LINES", True, _flag, "remember the user's line that built each node, for errors, DEBUG_NANS and "
                                      "VIZ (read at import; about 3 us per new node)"),
  Switch("POISON_MEMORY", False, _flag, "fill every CPU buffer handed out with the byte 0x6B, so a kernel that "
                                       "reads memory it never wrote gives garbage instead of a lucky zero"),
  Switch("TGFN_LOG_COMPILES", False, _flag, "say why each jitted function compiles"),
  Switch("TGFN_KERNEL_CACHE_SIZE", 4096, _integer, "compiled kernels (and plans) kept in memory"),
  Switch("TGFN_CACHE_DIR", "", str, "the on-disk compile cache's folder (default $XDG_CACHE_HOME/tgfn or ~/.cache/tgfn)"),
  Switch("TGFN_DISABLE_COMPILER_CACHE", False, _flag, "never read or write the on-disk compile cache"),
  Switch("TGFN_DISABLE_PLAN_CACHE", False, _flag, "never read or write whole jitted functions' plans on disk "
                                                  "(the kernel cache still works; docs/jit.md)"),
  Switch("TGFN_COMPILE_JOBS", "", str, "C compiler processes a batch may run at once (default: one more than the usable CPUs)"),
  Switch("TGFN_TIERED_COMPILE", False, _flag, "build a large batch of new CPU kernels quickly first and swap in the "
                                               "optimized build when a background compile is done (docs/jit.md)"),
  Switch("TGFN_CAPTURE", "", str, "process replay: record every kernel's source under this folder "
                                  "(docs/process-replay.md)"),
  Switch("TGFN_MPI_TIMEOUT", 300.0, float, "seconds a collective waits for the other processes"),
]}
_KEYED = tuple(name for name, s in SWITCHES.items() if s.keyed)


def known(name: str) -> Switch:
  if (switch := SWITCHES.get(name)) is None:
    raise ValueError(f"unknown tgfn setting {name!r}; known: {', '.join(SWITCHES)}")
  return switch


class Settings:
  """Every switch's value in effect, as attributes. The values are the environment's at import (or at
  `reload`), then `update`'s, then each active `Context`'s in the order they were entered.

  Contexts are process-wide -- tgfn's own worker threads (device queues, compile pools) see them too -- and
  thread-safe: entering and leaving is atomic, and leaving removes exactly that block's values, even when
  another thread's block was entered after it and is still open. Two threads cannot have different values
  of one switch at the same time."""
  code_key: tuple  # the values of the switches generated code depends on (plans and caches key on it)

  def __init__(self) -> None:
    object.__setattr__(self, "_lock", threading.Lock())
    object.__setattr__(self, "_base", {})
    object.__setattr__(self, "_layers", [])
    self.reload()

  def __setattr__(self, name: str, value: Any) -> None:
    raise AttributeError(f"settings are read-only: use tgfn.config.update({name!r}, value) or "
                         f"tgfn.Context({name}=value)")

  def __call__(self) -> dict[str, Any]:
    """A snapshot: every switch's value now."""
    return {name: self.__dict__[name] for name in SWITCHES}

  def reload(self, name: Optional[str] = None) -> None:
    """Read the environment again: every switch, or only `name` (a name tgfn does not know is ignored).
    For code that changes os.environ after tgfn is imported."""
    with self._lock:
      for switch in SWITCHES.values() if name is None else [SWITCHES[name]] if name in SWITCHES else []:
        self._base[switch.name] = switch.read(os.environ.get(switch.name))
      self._publish()

  def update(self, name: str, value: Any) -> None:
    """Set `name` for the rest of the process (an open Context's value still wins inside its block)."""
    switch = known(name)
    with self._lock:
      self._base[name] = switch.read(value)
      self._publish()

  def _enter(self, layer: dict[str, Any]) -> None:
    with self._lock:
      self._layers.append(layer)
      self._publish()

  def _leave(self, layer: dict[str, Any]) -> None:
    with self._lock:
      self._layers[:] = [x for x in self._layers if x is not layer]
      self._publish()

  def _publish(self) -> None:
    values = dict(self._base)
    for layer in self._layers: values.update(layer)
    self.__dict__.update(values)
    self.__dict__["code_key"] = tuple(values[name] for name in _KEYED)


settings = Settings()


class Context:
  """Override switches for a block: `with Context(DEBUG=2, BEAM=1): ...` (see `Settings` for how blocks in
  several threads combine). Values are checked here, so a bad one fails before the block starts."""
  def __init__(self, **switches: Any):
    self.switches = {name: known(name).read(value) for name, value in switches.items()}
    self._entered: list[dict[str, Any]] = []

  def __enter__(self) -> Context:
    layer = dict(self.switches)  # a fresh layer per entry: one Context object may be entered again inside itself
    self._entered.append(layer)
    settings._enter(layer)
    return self

  def __exit__(self, *exc: Any) -> None:
    settings._leave(self._entered.pop())


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
