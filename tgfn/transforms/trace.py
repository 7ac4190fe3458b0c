"""Tracing: running a user function on placeholder inputs to capture its graph.

Each input leaf becomes a PLACEHOLDER UOp with its shape, dtype and device. A placeholder may be
*bound* to a concrete value for the duration of a trace: `grad`, `vjp` and `jvp` bind theirs, so
the function sees concrete values and Python control flow on them works, as in JAX. `jit` and `vmap`
leave theirs unbound, so values are abstract, and observing one (`bool(x)`, `x.item()`,
`np.asarray(x)`) raises `ConcretizationError` naming the user's line and the fix.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sys
from typing import Any, Callable, Iterator, Optional, Sequence

import tgfn
from tgfn.array import Array
from tgfn.tree import tree_flatten
from tgfn.uop.ops import Ops, UOp, substitute, toposort, unique_id

# tgfn/ and tgfn_drivers/, found from this file: a package's own __file__ is None when it is a namespace package
_TGFN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE_DIRS = (_TGFN_DIR + os.sep, os.path.join(os.path.dirname(_TGFN_DIR), "tgfn_drivers") + os.sep)
_bindings: dict[UOp, UOp] = {}


class ConcretizationError(TypeError):
  """A traced (abstract) value was used where Python needs a concrete one."""


def user_frame() -> str:
  """'file:line: code' of the innermost stack frame outside tgfn itself."""
  frame = sys._getframe(1)
  while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIRS):
    frame = frame.f_back
  if frame is None: return "<unknown location>"
  code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
  return f"{frame.f_code.co_filename}:{frame.f_lineno}: {code}"


def placeholder(shape: tuple[int, ...], dtype: Any, device: Optional[str], committed: bool = True) -> UOp:
  """A stand-in for a value of `shape` and `dtype` on `device`, committed to it (UOp.committed) unless the
  array it stands for is not: then an operand committed elsewhere takes its place's computation there."""
  holder = UOp(Ops.PLACEHOLDER, dtype, (), (unique_id(), tuple(shape), device))
  if not committed: holder.__dict__["committed"] = False
  return holder


@contextlib.contextmanager
def bound(mapping: dict[UOp, UOp]) -> Iterator[None]:
  """Give placeholders concrete values while the block runs."""
  _bindings.update(mapping)
  try:
    yield
  finally:
    for p in mapping: _bindings.pop(p, None)


def _resolve(uop: UOp) -> tuple[UOp, list[UOp]]:
  """Substitute bound placeholders (transitively); also return the unbound ones that remain."""
  while True:
    holders = [u for u in toposort([uop]) if u.op is Ops.PLACEHOLDER]
    bound_here = {p: _bindings[p] for p in holders if p in _bindings}
    if not bound_here: return uop, holders
    uop = substitute(uop, bound_here)


def is_traced(uop: UOp) -> bool:
  """True when the value depends on a placeholder: it is part of some transform's trace."""
  return any(u.op is Ops.PLACEHOLDER for u in toposort([uop]))


def is_abstract(uop: UOp) -> bool:
  """True when the value depends on a placeholder that has no concrete binding."""
  return bool(_resolve(uop)[1])


def concretize(uop: UOp, what: str = "this operation") -> UOp:
  """`uop` with bound placeholders replaced by their values; raises if an unbound one remains."""
  uop, unbound = _resolve(uop)
  if unbound:
    raise ConcretizationError(
      f"{what} needs a concrete value, but this array is traced (abstract) inside jit or vmap.\n"
      f"  at {user_frame()}\n"
      "Python control flow and conversions cannot depend on traced values. Fixes: compute both branches "
      "and select with tnp.where, use structured control flow (tgfn.lax.cond, tgfn.lax.switch, "
      "tgfn.lax.while_loop, tgfn.lax.fori_loop, tgfn.lax.scan), or mark the argument static "
      "(jit(f, static_argnums=...)).")
  return uop


def trace_inputs(leaves: Sequence[Any]) -> list[Array]:
  """A placeholder Array for each input leaf (Arrays, NumPy arrays or Python scalars)."""
  out = []
  for leaf in leaves:
    arr = leaf if isinstance(leaf, Array) else tgfn.numpy.asarray(leaf)
    out.append(Array(placeholder(arr.shape, arr.dtype, arr.uop.device, arr.uop.committed)))
  return out


def flatten_outputs(out: Any, fn_name: str) -> tuple[list[Array], Any]:
  """Output leaves as Arrays (Python scalars become constants) and the tree to rebuild them."""
  leaves, tree = tree_flatten(out)
  arrays = []
  for leaf in leaves:
    if isinstance(leaf, Array): arrays.append(leaf)
    elif isinstance(leaf, (int, float, bool)) or hasattr(leaf, "__array__"): arrays.append(tgfn.numpy.asarray(leaf))
    else: raise TypeError(f"{fn_name} must return arrays (or pytrees of arrays), got a {type(leaf).__name__}")
  return arrays, tree


def fn_name(fn: Callable) -> str: return getattr(fn, "__name__", repr(fn))
