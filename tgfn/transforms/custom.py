"""User-defined derivatives: `custom_vjp` and `custom_jvp`, with JAX's decorator API.

Calling a decorated function computes its outputs as usual and wraps each one in a CUSTOM node
whose sources are the value and the call's inputs, and whose arg points at a `CustomCall` holding
the user's rule. The transforms treat a CUSTOM node as an opaque function of the inputs: reverse
mode calls the user's backward rule (or, for custom_jvp, the transpose of the user's JVP), forward
mode calls the JVP rule, and vmap batches the rule itself.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

from tgfn.array import Array, as_array
from tgfn.tree import flatten, unflatten
from tgfn.tree import map as tree_map
from tgfn.uop.ops import Ops, UOp, substitute


class CustomCall:
  """One call of a custom-derivative function. Hashed by identity (it is a UOp arg)."""

  def __init__(self, inputs: Sequence[UOp], in_tree: Any, out_avals: Sequence[tuple], name: str,
               backward_rule: Optional[Callable[[list[Array]], list[Optional[Array]]]] = None,
               jvp_rule: Optional[Callable[[list[Array]], list[Array]]] = None):
    self.inputs, self.in_tree, self.out_avals, self.name = tuple(inputs), in_tree, list(out_avals), name
    self._backward_rule, self._jvp_rule = backward_rule, jvp_rule

  @property
  def has_jvp_rule(self) -> bool: return self._jvp_rule is not None

  def rebind(self, values: list[Optional[Array]], node: UOp) -> list[Optional[Array]]:
    """The rules build graphs on the inputs this call was made with. A transform that traced the call
    substitutes its own inputs into the CUSTOM node's sources (e.g. grad of grad): re-express the rule's
    results on the node's current inputs, so the outer transform sees the dependence."""
    mapping = {old: new for old, new in zip(self.inputs, node.src[1:]) if old is not new}
    if not mapping: return values
    return [None if v is None else Array(substitute(v.uop, mapping)) for v in values]

  def backward(self, cts: dict[int, Array]) -> list[Optional[Array]]:
    """Cotangents of the inputs, given cotangents of (some of) the outputs; missing ones are zero."""
    full = [cts.get(i, Array.const(0, dt, shape)) for i, (shape, dt) in enumerate(self.out_avals)]
    if self._backward_rule is not None: return self._backward_rule(full)
    return self._transpose_jvp(full)

  def forward_tangent(self, index: int, tangents: Sequence[Optional[Array]], cache: dict) -> Optional[Array]:
    if self._jvp_rule is None:
      raise TypeError(f"can't apply forward-mode differentiation (jvp) to the custom_vjp function {self.name}; "
                      "define it with custom_jvp instead, or differentiate it in reverse mode only")
    if self not in cache:
      full = [t if t is not None else Array.const(0, Array(u).dtype, u.shape) for t, u in zip(tangents, self.inputs)]
      cache[self] = self._jvp_rule(full)
    return cache[self][index]

  def _transpose_jvp(self, cts: list[Array]) -> list[Optional[Array]]:
    """Reverse mode for custom_jvp: the JVP is linear in the tangents, so differentiating the
    tangent outputs with respect to placeholder tangents gives its transpose applied to `cts`."""
    from tgfn.transforms.grad import backward
    from tgfn.transforms.trace import placeholder
    holders = [placeholder(u.shape, u.dtype, u.device) for u in self.inputs]
    tangent_out = self._jvp_rule([Array(h) for h in holders])
    return backward([t.uop for t in tangent_out], cts, holders)


def _wrap_outputs(out: Any, call_factory: Callable[[list[tuple]], CustomCall]) -> Any:
  leaves, out_tree = flatten(out)
  arrays = [as_array(leaf) for leaf in leaves]
  call = call_factory([(a.shape, a.dtype) for a in arrays])
  wrapped = [Array(UOp(Ops.CUSTOM, a.dtype, (a.uop, *call.inputs), (call, i))) if a.dtype.is_inexact else a
             for i, a in enumerate(arrays)]
  return unflatten(out_tree, wrapped)


def _flat_inputs(args: tuple) -> tuple[list[Array], Any]:
  leaves, in_tree = flatten(args)
  return [as_array(leaf) for leaf in leaves], in_tree


class custom_vjp:
  """`@custom_vjp def f(x): ...`, then `f.defvjp(f_fwd, f_bwd)` where `f_fwd(*args) -> (out, residuals)`
  and `f_bwd(residuals, out_cotangent) -> tuple of cotangents, one per positional argument`."""

  def __init__(self, fun: Callable[..., Any]):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.fwd: Optional[Callable] = None
    self.bwd: Optional[Callable] = None
    self._in_fwd = False  # the usual fwd calls the function itself: that inner call is plain

  def defvjp(self, fwd: Callable[..., tuple[Any, Any]], bwd: Callable[[Any, Any], tuple]) -> None:
    self.fwd, self.bwd = fwd, bwd

  def __call__(self, *args: Any) -> Any:
    if self.fwd is None or self.bwd is None:
      raise TypeError(f"custom_vjp function {self.fun.__name__} has no rule yet: call {self.fun.__name__}.defvjp(fwd, bwd)")
    if self._in_fwd: return self.fun(*args)
    inputs, in_tree = _flat_inputs(args)
    self._in_fwd = True
    try:
      out, residuals = self.fwd(*unflatten(in_tree, inputs))
    finally:
      self._in_fwd = False
    _, out_tree = flatten(out)
    bwd, name = self.bwd, self.fun.__name__

    def backward_rule(cts: list[Array]) -> list[Optional[Array]]:
      grads = bwd(residuals, unflatten(out_tree, cts))
      if not isinstance(grads, tuple) or len(grads) != len(args):
        raise TypeError(f"the custom_vjp backward rule of {name} must return a tuple with one cotangent per "
                        f"positional argument ({len(args)}), got {type(grads).__name__}")
      leaves, _ = flatten(grads, is_leaf=lambda x: x is None)
      return [None if g is None else as_array(g).astype(x.dtype)._broadcast_to(x.shape) for g, x in zip(leaves, inputs)]

    return _wrap_outputs(out, lambda avals: CustomCall([a.uop for a in inputs], in_tree, avals, name,
                                                       backward_rule=backward_rule))


class custom_jvp:
  """`@custom_jvp def f(x): ...`, then `@f.defjvp def f_jvp(primals, tangents): return out, tangent_out`,
  or `f.defjvps(jvp_x, ...)` with one `jvp_i(tangent_i, out, *primals) -> tangent contribution` per argument.

  `custom_jvp(f, nondiff_argnums=(0,))` (or `functools.partial(custom_jvp, nondiff_argnums=...)` as a
  decorator) passes those arguments (functions, ints, ...) through untouched: the rule is then called
  as `f_jvp(*nondiff_args, primals, tangents)`, where primals and tangents hold the other arguments."""

  def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
    functools.update_wrapper(self, fun)
    self.fun = fun
    if any(not isinstance(n, int) or n < 0 for n in nondiff_argnums):
      raise ValueError(f"custom_jvp nondiff_argnums must be non-negative ints, got {nondiff_argnums!r}")
    self.nondiff_argnums = tuple(nondiff_argnums)
    self.jvp: Optional[Callable] = None

  def defjvp(self, jvp: Callable[..., tuple[Any, Any]]) -> Callable:
    self.jvp = jvp
    return jvp

  def defjvps(self, *jvps: Optional[Callable[..., Any]]) -> None:
    """One rule per differentiable argument (None: that argument does not change the output)."""
    def jvp(*rule_args: Any) -> tuple[Any, Any]:
      nondiff, primals, tangents = rule_args[:-2], rule_args[-2], rule_args[-1]
      if len(jvps) != len(primals):
        raise TypeError(f"{self.fun.__name__}.defjvps got {len(jvps)} rules for {len(primals)} differentiable arguments")
      out = self.fun(*self._merge(nondiff, primals))
      terms = [rule(t, out, *primals) for rule, t in zip(jvps, tangents) if rule is not None]
      if not terms: return out, _zeros_like_tree(out)
      return out, functools.reduce(lambda a, b: tree_map(lambda u, v: u + v, a, b), terms)
    self.jvp = jvp

  def _merge(self, nondiff: Sequence[Any], diff: Sequence[Any]) -> list[Any]:
    """The full argument list from the non-differentiable and differentiable ones."""
    nondiff, diff, full = list(nondiff), list(diff), []
    for i in range(len(nondiff) + len(diff)):
      full.append(nondiff.pop(0) if i in self.nondiff_argnums else diff.pop(0))
    return full

  def __call__(self, *args: Any) -> Any:
    if self.jvp is None:
      raise TypeError(f"custom_jvp function {self.fun.__name__} has no rule yet: decorate one with @{self.fun.__name__}.defjvp")
    if any(n >= len(args) for n in self.nondiff_argnums):
      raise ValueError(f"custom_jvp nondiff_argnums {self.nondiff_argnums} out of range for {len(args)} arguments")
    nondiff = [a for i, a in enumerate(args) if i in self.nondiff_argnums]
    inputs, in_tree = _flat_inputs(tuple(a for i, a in enumerate(args) if i not in self.nondiff_argnums))
    primals = unflatten(in_tree, inputs)
    out = self.fun(*self._merge(nondiff, primals))
    jvp = self.jvp

    def jvp_rule(tangents: list[Array]) -> list[Array]:
      _, tangent_out = jvp(*nondiff, tuple(primals), tuple(unflatten(in_tree, tangents)))
      return [as_array(t) for t in flatten(tangent_out)[0]]

    return _wrap_outputs(out, lambda avals: CustomCall([a.uop for a in inputs], in_tree, avals, self.fun.__name__,
                                                       jvp_rule=jvp_rule))


def _zeros_like_tree(tree: Any) -> Any:
  return tree_map(lambda x: Array.const(0, as_array(x).dtype, as_array(x).shape), tree)
