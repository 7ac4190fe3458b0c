"""A jitted function's own earlier results, taken back as arguments without flattening them again.

A training step passes its results back in: `model, state, loss = step(model, state, x, y)`. Flattening
the model and the optimizer state on every call costs a Python callback per layer inside optree (20 us of
the main job's ~230 us step, 40 us when the cache is cold between steps). A result made only of
immutable containers -- tuples, NamedTuples, None and frozen dataclasses registered as nodes (tgfn's
layers) -- holding arrays cannot change after the call returns. So a call remembers, for each such
element of the tuple it returned, the element's leaves and tree structure, and a later call given that
very object (the same identity, checked down to the first objects that can be weakly referenced) takes
them instead of walking it.

Nothing is kept alive by this: the leaves are dropped as soon as any of the objects they were found under
is collected (a weak reference's callback), and those objects hold the leaves anyway.
"""
from __future__ import annotations

import weakref
from typing import Any, Optional

import optree

from tgfn.array import Array
from tgfn.tree import FROZEN_NODE_TYPES

_KIND = optree.PyTreeKind
_CONTAINERS = (_KIND.TUPLE, _KIND.NAMEDTUPLE)

# a template says how to find an output element's anchors: "ref" (the object itself, weakly), None (a
# None), or (type, [template per child]) for a tuple or NamedTuple, whose children are checked one by one


def _immutable(spec: Any) -> bool:
  """Whether every node of `spec` is an immutable container (its leaves are the jit's output arrays)."""
  if spec.kind in (_KIND.LEAF, _KIND.NONE): return True
  if spec.kind in _CONTAINERS or (spec.kind is _KIND.CUSTOM and spec.type in FROZEN_NODE_TYPES):
    return all(_immutable(child) for child in spec.children())
  return False


def _template(spec: Any) -> Any:
  if spec.kind is _KIND.NONE: return None
  if spec.kind in _CONTAINERS: return (spec.type, [_template(child) for child in spec.children()])
  return "ref"  # an array, or a frozen layer: weakly referenced, its identity stands for its subtree


# per compiled entry, the elements of its tuple result that can be remembered: (element index, template,
# its tree structure, first leaf, end leaf)
ResultPlan = list[tuple[int, Any, Any, int, int]]


def plan_for(out_tree: Any) -> Optional[ResultPlan]:
  """None when the result is not a tuple or no element of it qualifies."""
  if out_tree.kind is not _KIND.TUPLE: return None
  elements, start = [], 0
  for i, child in enumerate(out_tree.children()):
    end = start + child.num_leaves
    if child.kind is not _KIND.LEAF and child.num_leaves and _immutable(child):
      elements.append((i, _template(child), child, start, end))
    start = end
  return elements or None


class _Remembered:
  """One result element: its anchors (weak references; the memory is dropped when one dies), the shape
  to check an argument against, its leaves and its tree structure."""
  __slots__ = ("shape", "leaves", "spec", "__weakref__")

  def __init__(self, obj: Any, template: Any, leaves: list, spec: Any):
    self.leaves, self.spec = leaves, spec
    self.shape = self._anchor(obj, template)

  def _anchor(self, obj: Any, template: Any) -> Any:
    if template is None: return None
    if template == "ref":
      me = weakref.ref(self)

      def forget(_: Any) -> None:
        if (memo := me()) is not None: memo._forget()
      return weakref.ref(obj, forget)
    return (template[0], [self._anchor(child, t) for child, t in zip(obj, template[1])])

  def _forget(self) -> None:
    self.leaves, self.shape = None, False

  def matches(self, obj: Any) -> bool:
    return self.leaves is not None and _same(obj, self.shape)


def _same(obj: Any, shape: Any) -> bool:
  if shape is None: return obj is None
  if type(shape) is weakref.ref: return obj is shape()
  kind, children = shape
  return type(obj) is kind and len(obj) == len(children) and all(_same(o, s) for o, s in zip(obj, children))


class ResultMemo:
  """What the last call returned, per remembered element (see the module docstring)."""
  def __init__(self, plan: ResultPlan, result: tuple, leaves: list):
    self.elements = [_Remembered(result[i], template, leaves[start:end], spec)
                     for i, template, spec, start, end in plan]

  def flatten(self, args: tuple) -> Optional[tuple[list, tuple]]:
    """(leaves, structure token) of `args` when each is an array or a remembered element, else None. The
    token names each argument's structure (the remembered element's, or a leaf's) for the caller's
    cache of whole-call structures."""
    leaves: list = []
    token: list = []
    for a in args:
      if type(a) is Array:
        leaves.append(a)
        token.append(None)
        continue
      for element in self.elements:
        if element.matches(a):
          leaves += element.leaves
          token.append(id(element.spec))
          break
      else:
        return None
    return leaves, tuple(token)
