"""What VIZ=1 records: captures (one per realize that had to compile, one per jit compile), each with
its traced graph, the settings of the moment, every named pass with its input and output graphs, and
the kernels it compiled. Only references are kept while the program runs; graphs are drawn when the
page is asked for (tgfn/viz/page.py)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from tgfn.helpers import settings
from tgfn.uop.ops import UOp
from tgfn.viz.locations import location

MAX_PASSES = 400      # per capture: a rewrite-heavy capture (a BEAM search) keeps its first ones
MAX_CAPTURES = 500    # the oldest are dropped past this
OUTSIDE = "transforms outside realize/jit"

def _roots(x: Any) -> tuple[UOp, ...]:
  if x is None: return ()
  if isinstance(x, UOp): return (x,)
  return tuple(getattr(u, "uop", u) for u in x if u is not None)


@dataclass
class Pass:
  name: str
  before: tuple[UOp, ...]
  after: tuple[UOp, ...]


@dataclass
class Capture:
  title: str
  graph: tuple[UOp, ...]
  settings: dict[str, Any]
  passes: list[Pass] = field(default_factory=list)
  kernels: list[Any] = field(default_factory=list)  # CompiledKernels
  dropped_passes: int = 0
  done: bool = False
  html: Optional[str] = None   # the page's section for it, made once it is done (tgfn/viz/page.py)


class Recorder:
  """The tracker helpers.track* call while VIZ is on (one per process)."""
  def __init__(self) -> None:
    self.captures: list[Capture] = []
    self._stack = threading.local()
    self.lock = threading.Lock()
    self.version = 0                      # bumped on every change (the page's cache key)
    self.scope = ""                       # the kernel codegen is working on (prefixes its passes' names)

  def _current(self) -> Optional[Capture]:
    stack = getattr(self._stack, "items", None)
    return stack[-1] if stack else None

  def begin(self, title: str, graph: Any) -> None:
    roots = _roots(graph)
    if roots and roots[0].dtype is not None:  # say what it computes, and where the user asked for it
      first = roots[0]
      try:
        title += f": {first.dtype.name}{list(first.shape)}"
      except Exception:  # a node without a shape
        pass
      if (where := location(first)) is not None: title += f" from {where[0].rsplit('/', 1)[-1]}"
    capture = Capture(title, roots, settings())
    with self.lock:
      self.captures.append(capture)
      del self.captures[:-MAX_CAPTURES]
      self.version += 1
    if not hasattr(self._stack, "items"): self._stack.items = []
    self._stack.items.append(capture)
    self.scope = ""

  def end(self, kernels: Sequence[Any]) -> None:
    capture = self._current()
    if capture is None: return
    capture.kernels.extend(k for k in kernels if k is not None)
    capture.done = True
    self._stack.items.pop()
    self.version += 1
    self.scope = ""

  def enter_kernel(self, kernel: Any) -> None:
    """Codegen starts on `kernel` (a LoweredKernel): the passes that follow are named after it."""
    from tgfn.viz.debug import kernel_label
    self.scope = kernel_label(kernel)

  def record_pass(self, name: str, before: Any, after: Any) -> None:
    if hasattr(after, "ast"):  # lowering made a kernel: name the pass after it
      from tgfn.viz.debug import kernel_label
      name, after = f"{name}: {kernel_label(after)}", after.ast
    elif self.scope: name = f"{self.scope}: {name}"
    capture = self._current()
    if capture is None:  # a transform or a rewrite outside any realize or jit compile: one capture for a run of them
      last = self.captures[-1] if self.captures else None
      if last is not None and last.title == OUTSIDE: capture = last
      else:
        self.begin(OUTSIDE, None)
        capture = self._stack.items.pop()
    if len(capture.passes) >= MAX_PASSES:
      capture.dropped_passes += 1
      return
    capture.passes.append(Pass(name, _roots(before), _roots(after)))
    self.version += 1
