"""`checkpoint` (alias `remat`): trade compute for memory in reverse mode.

`checkpoint(f)(*args)` traces f once into a closed body and returns a call of it (a CALL node,
tgfn/uop/body.py). Its forward pass keeps only f's outputs. Its VJP (tgfn/lax/rules.py) is another
call, whose body recomputes what the policy did not save and pulls the cotangents back: the
recomputation lives in a body of its own, so hash-consing can never merge it back into the forward
pass's nodes (the barrier JAX builds with `optimization_barrier`).

Policies (`tgfn.checkpoint_policies`) say which of f's intermediate values the forward pass saves for
the backward pass: `nothing_saveable` (the default: recompute everything), `everything_saveable` (no
rematerialization), `dots_saveable` (save matrix products, recompute the cheap elementwise work), and
`save_only_these_names(*names)` (save the values tagged with `checkpoint_name`).
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from tgfn.array import Array, as_array
from tgfn.transforms.trace import flatten_outputs, fn_name, placeholder
from tgfn.tree import flatten, unflatten
from tgfn.uop.body import Body, Call, call_outputs, captured_values, close
from tgfn.uop.ops import GroupOp, Ops, UOp, toposort


@dataclass(frozen=True)
class Policy:
  """Which intermediate values of a checkpointed function its forward pass keeps."""
  kind: str                      # "nothing", "everything", "dots" or "names"
  names: tuple[str, ...] = ()

  def saves(self, node: UOp) -> bool:
    if self.kind == "dots": return _is_contraction(node)
    if self.kind == "names": return _names.get(node) in self.names
    return False


def _is_contraction(node: UOp) -> bool:
  """A matrix product (or any contraction): a sum over a product."""
  return node.op is Ops.REDUCE_AXIS and node.arg[0] is Ops.ADD and node.src[0].op is Ops.MUL


# names given with checkpoint_name, by node (a node is its value: the same computation, the same name)
_names: "weakref.WeakKeyDictionary[UOp, str]" = weakref.WeakKeyDictionary()


def checkpoint_name(x: Any, name: str) -> Any:
  """`x` (a pytree of arrays), tagged `name` for the save_only_these_names policy."""
  leaves, tree = flatten(x)
  arrays = [as_array(leaf) for leaf in leaves]
  for a in arrays: _names[a.uop] = name
  return unflatten(tree, arrays)


class _Policies:
  """tgfn.checkpoint_policies: JAX's policy names."""
  nothing_saveable = Policy("nothing")
  everything_saveable = Policy("everything")
  dots_saveable = Policy("dots")
  checkpoint_dots = dots_saveable

  @staticmethod
  def save_only_these_names(*names: str) -> Policy: return Policy("names", tuple(names))


checkpoint_policies = _Policies()


def checkpoint(fun: Optional[Callable] = None, *, policy: Optional[Policy] = None, prevent_cse: bool = True,
               static_argnums: Union[int, Sequence[int]] = ()) -> Any:
  """`fun`, whose intermediate values are recomputed in the backward pass instead of kept (see the
  module docstring). `prevent_cse` is accepted for JAX compatibility: the barrier is always there."""
  if fun is None: return lambda f: checkpoint(f, policy=policy, prevent_cse=prevent_cse, static_argnums=static_argnums)
  policy = policy if policy is not None else checkpoint_policies.nothing_saveable
  if not isinstance(policy, Policy):
    raise TypeError(f"checkpoint: policy must be one of tgfn.checkpoint_policies, got {policy!r}")
  static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)

  @functools.wraps(fun)
  def wrapped(*args: Any) -> Any:
    dynamic = [a for i, a in enumerate(args) if i not in static]
    leaves, tree = flatten(tuple(dynamic))
    inputs = [as_array(x) for x in leaves]
    holders = [Array(placeholder(x.shape, x.dtype, x.uop.device)) for x in inputs]
    it = iter(unflatten(tree, holders))
    out = fun(*[a if i in static else next(it) for i, a in enumerate(args)])
    outs, out_tree = flatten_outputs(out, fn_name(fun))
    spec, captured = _checkpoint_spec([h.uop for h in holders], [o.uop for o in outs], policy)
    results = call_outputs(spec, [x.uop for x in inputs] + captured)
    return unflatten(out_tree, [Array(u) for u in results])
  return wrapped


remat = checkpoint


def _checkpoint_spec(inputs: list[UOp], outs: list[UOp], policy: Policy) -> tuple[Call, list[UOp]]:
  captured = captured_values(inputs, outs)
  held = set(inputs) | set(captured)
  depends: set[UOp] = set()
  saved: dict[UOp, None] = {}
  topo = toposort(outs)
  for node in topo:
    if node in held or any(s in depends for s in node.src): depends.add(node)
    if node in depends and node.dtype.is_inexact and policy.saves(node):
      while node.op in GroupOp.Movement: node = node.src[0]  # a view is saved as the value it moves
      if node not in held: saved[node] = None
  position = {n: i for i, n in enumerate(topo)}
  # in graph order: the backward body pulls each saved value's cotangent back, the last first
  full = close(inputs + captured, outs + sorted(saved, key=position.__getitem__))
  n = len(outs)
  saved_nodes = tuple(u.src[0] if u.op is Ops.CONTIGUOUS and isinstance(u.arg, tuple) else u for u in full.outputs[n:])
  return Call(Body(full.inputs, full.outputs[:n]), "checkpoint", policy.kind, saved_nodes), captured
