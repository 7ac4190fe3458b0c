"""The user's source line of each node, always recorded: `Array(uop)` calls `helpers.locator(uop)`, which
keeps the innermost frame outside the tgfn package on the node, as its code object and instruction offset
(no string is made: the line is worked out only when an error, DEBUG_NANS or VIZ asks, by `location`).
Whether a file is the user's is decided once per file. Nodes a backward rule builds carry
the line of the forward node they differentiate, marked "backward" (tgfn/transforms/grad.py sets
`helpers.differentiating`). docs/observability.md gives the cost."""
from __future__ import annotations

import functools
import inspect
import linecache
import os
import sys
import sysconfig
from types import CodeType, FrameType
from typing import Any, Optional

from tgfn import helpers
from tgfn.uop.ops import Ops, UOp

LOCATION = "_user_line"   # the attribute on the node: (code object, instruction offset, "forward" or "backward")
_TGFN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# not user code: tgfn itself, the standard library, installed packages (optree calling a tree_map's function)
_LIBRARY_DIRS = tuple({_TGFN_DIR, sysconfig.get_paths()["stdlib"] + os.sep, sysconfig.get_paths()["purelib"] + os.sep,
                       sysconfig.get_paths()["platlib"] + os.sep})
class _UserFiles(dict):
  """file name -> whether it is the user's, decided on first sight (a lookup is then one dict hit: a str
  caches its hash, a code object recomputes it)."""
  def __missing__(self, name: str) -> bool:
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    # a script run from inside the package (python -m tgfn.train_digits) is the user's code
    user = not (name.startswith(_LIBRARY_DIRS) or name.startswith("<frozen")) or \
      (main is not None and os.path.abspath(main) == name)
    self[name] = user
    return user


_is_user_file = _UserFiles()


def _user_frame(depth: int) -> Optional[FrameType]:
  frame: Any = sys._getframe(depth + 1)
  try:
    while not _is_user_file[frame.f_code.co_filename]: frame = frame.f_back
  except AttributeError:  # ran off the top of the stack (frame None): no user code
    return None
  return frame


def _line_of(code: CodeType, offset: int) -> str:
  """'file:line' of the instruction at byte `offset` in `code`."""
  line = next((n for start, end, n in code.co_lines() if start <= offset < end and n is not None), code.co_firstlineno)
  return f"{code.co_filename}:{line}"


def user_line(depth: int = 1) -> Optional[str]:
  """'file:line' of the innermost caller that is user code (not tgfn, the standard library or an
  installed package), or None."""
  frame = _user_frame(depth)
  return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def at_user_line() -> str:
  """'\n  at file:line: code' for an error message about the user's line ('' when there is none)."""
  line = user_line(2)
  if line is None: return ""
  path, _, number = line.rpartition(":")
  code = linecache.getline(path, int(number)).strip()
  return f"\n  at {line}: {code}" if code else f"\n  at {line}"


def naming_the_user_line(fn: Any) -> Any:
  """`fn`, whose own argument errors end with the user's line as tgfn.numpy's do: a ValueError, TypeError
  or IndexError raised inside tgfn (not by a function of the user's that it called) gets `at_user_line()`."""
  @functools.wraps(fn)
  def checked(*args: Any, **kwargs: Any) -> Any:
    try:
      return fn(*args, **kwargs)
    except (ValueError, TypeError, IndexError) as error:
      _add_user_line(error)
      raise
  return checked


def _add_user_line(error: BaseException) -> None:
  tb = error.__traceback__
  while tb is not None and tb.tb_next is not None: tb = tb.tb_next
  if tb is None or _is_user_file[tb.tb_frame.f_code.co_filename]: return  # the user's own code raised it
  if not error.args or not isinstance(error.args[0], str) or "\n  at " in error.args[0]: return
  error.args = (error.args[0] + at_user_line(), *error.args[1:])


def name_the_user_line_in(namespace: dict) -> None:
  """Wrap every public function tgfn defines in a module's namespace with `naming_the_user_line` (for the
  modules whose errors are raised in many places: tgfn.lax, tgfn.numpy.linalg, tgfn.numpy.fft)."""
  for name, value in list(namespace.items()):
    if not name.startswith("_") and inspect.isfunction(value) and value.__module__.startswith("tgfn."):
      namespace[name] = naming_the_user_line(value)


def locate(node: UOp) -> None:
  """Remember the user's line on `node` (Array.__init__ calls it for a node that has none yet). The first
  line that builds a node keeps it: nodes are hash-consed."""
  # A BUFFER (an input, a realized result) computes nothing a line could be blamed for, and jitted calls
  # make a new one per call: not located (None marks it, so a recycled output is not looked at again).
  if node.op is Ops.BUFFER:
    node.__dict__[LOCATION] = None
    return
  forward = helpers.differentiating
  if forward is not None and (origin := forward.__dict__.get(LOCATION)) is not None:
    node.__dict__[LOCATION] = (origin[0], origin[1], "backward")
    return
  frame: Any = sys._getframe(2)  # the caller of Array.__init__; _user_frame, inlined (the hot path)
  try:
    while not _is_user_file[frame.f_code.co_filename]: frame = frame.f_back
  except AttributeError:  # no user code on the stack
    return
  node.__dict__[LOCATION] = (frame.f_code, frame.f_lasti, "forward")


def location(node: UOp) -> Optional[tuple[str, str]]:
  """(file:line, 'forward' or 'backward') of the user's code that built the node, or None."""
  if (where := node.__dict__.get(LOCATION)) is None: return None
  return _line_of(where[0], where[1]), where[2]


def nearest_location(node: UOp, inputs: set) -> Optional[tuple[str, str]]:
  """The location of `node`, else of the nearest located node fused into its kernel (stopping at `inputs`)."""
  stack, seen = [node], set()
  while stack:
    x = stack.pop(0)
    if x in seen or x in inputs or x.op in (Ops.BUFFER, Ops.PLACEHOLDER): continue
    seen.add(x)
    if (found := location(x)) is not None: return found
    stack.extend(x.src)
  return None


def kernel_origin(kernel: Any) -> str:
  """'\n  in the kernel of the operation at file:line (forward pass)' for a LoweredKernel, or ''."""
  for node in kernel.outputs:
    if (where := nearest_location(node, set(kernel.inputs))) is not None:
      return f"\n  in the kernel of the operation at {where[0]} ({where[1]} pass)"
  return ""


def turn_on() -> None:
  helpers.locator = locate


def turn_off() -> None:
  helpers.locator = None
