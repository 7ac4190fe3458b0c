"""The user's source line of each node, recorded when something will read it (VIZ=1, DEBUG_NANS=1):
`Array(uop)` calls `helpers.locator(uop)`, which keeps the first frame outside the tgfn package on the
node. Nodes a backward rule builds carry the line of the forward node they differentiate, marked
"backward" (tgfn/transforms/grad.py sets `helpers.differentiating`). Off, it costs one global read."""
from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from typing import Any, Optional

from tgfn import helpers
from tgfn.uop.ops import UOp

LOCATION = "_user_line"   # the attribute on the node: (file:line, "forward" or "backward")
_TGFN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# not user code: tgfn itself, the standard library, installed packages (optree calling a tree_map's function)
_LIBRARY_DIRS = tuple({_TGFN_DIR, sysconfig.get_paths()["stdlib"] + os.sep, sysconfig.get_paths()["purelib"] + os.sep,
                       sysconfig.get_paths()["platlib"] + os.sep})


def _is_user(frame: Any) -> bool:
  name = frame.f_code.co_filename
  # a script run from inside the package (python -m tgfn.train_digits) is the user's code
  return not (name.startswith(_LIBRARY_DIRS) or name.startswith("<frozen")) or frame.f_globals.get("__name__") == "__main__"


def user_line(depth: int = 1) -> Optional[str]:
  """'file:line' of the innermost caller that is user code (not tgfn, the standard library or an
  installed package), or None."""
  frame = sys._getframe(depth)
  while frame is not None and not _is_user(frame): frame = frame.f_back
  return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def at_user_line() -> str:
  """'\n  at file:line: code' for an error message about the user's line ('' when there is none)."""
  line = user_line(2)
  if line is None: return ""
  path, _, number = line.rpartition(":")
  return f"\n  at {line}: {linecache.getline(path, int(number)).strip()}"


def locate(node: UOp) -> None:
  if LOCATION in node.__dict__: return
  forward = helpers.differentiating
  if forward is not None and (origin := forward.__dict__.get(LOCATION)) is not None:
    node.__dict__[LOCATION] = (origin[0], "backward")
  elif (line := user_line(2)) is not None: node.__dict__[LOCATION] = (line, "forward")


def location(node: UOp) -> Optional[tuple[str, str]]:
  """(file:line, 'forward' or 'backward') for a node built by user code while locations were on."""
  return node.__dict__.get(LOCATION)


def turn_on() -> None:
  helpers.locator = locate
