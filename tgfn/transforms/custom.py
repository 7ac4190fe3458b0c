"""User-defined derivatives: `custom_vjp` and `custom_jvp`, with JAX's decorator API.

Calling a decorated function traces it, and its rules, into closed bodies (tgfn/uop/body.py) and returns
one CALL of a `CustomVJP` or `CustomJVP` spec: the function's body runs as a call (the scheduler inlines
it, so it fuses with its neighbours), and the transforms use the rule bodies (tgfn/transforms/custom_rules.py):
reverse mode runs custom_vjp's forward and backward rules (custom_jvp's: the transpose of its JVP rule),
forward mode runs the JVP rule, vmap batches every body. Values the function or its rules read from
outside become extra inputs of the call, which get no cotangent (as in JAX, where closing over a traced
value in a custom rule is an error).

When every argument is concrete (eager code, or inside grad), the traces see concrete values, so
Python control flow on them works as when the function runs directly.

`custom_vjp_primal_jvp` is an internal variant (not JAX's API) for tgfn's own functions: reverse mode
uses the rule, but forward mode (jvp, and so forward-over-reverse) differentiates the function itself
instead of refusing, as `custom_vjp` does. It suits functions whose tangent is cheap through the primal's
own operations while the automatic reverse pass is not, e.g. a convolution (tgfn/lax/conv.py): its
tangent is two forward convolutions, but the transpose of its window gather is a slow scatter-like sum.
It keeps its traced bodies per argument shapes and dtypes instead of tracing at every call.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tgfn.array import Array, as_array
from tgfn.transforms.subgraph import captures, concrete_where_possible, holders_for
from tgfn.transforms.trace import flatten_outputs
from tgfn.tree import flatten, unflatten
from tgfn.tree import map as tree_map
from tgfn.uop.body import CustomJVP, CustomVJP, call_outputs, close
from tgfn.uop.ops import UOp


def _flat_inputs(args: tuple) -> tuple[list[Array], Any]:
  leaves, in_tree = flatten(args)
  return [as_array(leaf) for leaf in leaves], in_tree


def _is_float(a: Any) -> bool: return a.dtype is not None and a.dtype.is_inexact


def _uops(arrays: Sequence[Array]) -> list[UOp]: return [a.uop for a in arrays]


def _fit(value: Any, like: Array, what: str) -> Array:
  """A rule's result for `like`: cast to its dtype, broadcast to its shape (None: zero)."""
  if value is None: return Array.const(0, like.dtype, like.shape)
  v = as_array(value)
  try:
    return v.astype(like.dtype)._broadcast_to(like.shape)
  except ValueError:
    raise TypeError(f"{what} has shape {v.shape}, but the value it belongs to has shape {like.shape}") from None


def _check_structure(what: str, got_tree: Any, got: Sequence[Array], want_tree: Any, want: Sequence[Array]) -> None:
  if got_tree != want_tree or any(g.shape != w.shape for g, w in zip(got, want)):
    describe = lambda tree, xs: f"{tree} with shapes {[x.shape for x in xs]}"
    raise TypeError(f"{what} must match the function's output, {describe(want_tree, want)}; got {describe(got_tree, got)}")


def _call(spec_factory: Callable[[list[UOp]], Any], inputs: list[Array], captured: list[UOp], out_tree: Any) -> Any:
  results = call_outputs(spec_factory(captured), _uops(inputs) + captured)
  return unflatten(out_tree, [Array(u) for u in results])


class _ThreadFlag:
  """A per-thread boolean: while one thread traces a rule (inside which calls of the function are plain),
  another thread's call of the same function still gets its rule."""

  def __init__(self) -> None: self._local = threading.local()

  def __bool__(self) -> bool: return getattr(self._local, "on", False)

  @contextlib.contextmanager
  def on(self) -> Any:
    self._local.on = True
    try:
      yield
    finally:
      self._local.on = False


@dataclass(frozen=True)
class CustomVJPPrimalJVP(CustomVJP):
  """A CustomVJP call whose forward-mode derivative is the JVP of `fun` (`custom_vjp_primal_jvp`)."""


class custom_vjp:
  """`@custom_vjp def f(x): ...`, then `f.defvjp(f_fwd, f_bwd)` where `f_fwd(*args) -> (out, residuals)`
  and `f_bwd(residuals, out_cotangent) -> tuple of cotangents, one per positional argument`."""

  def __init__(self, fun: Callable[..., Any]):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.fwd: Optional[Callable] = None
    self.bwd: Optional[Callable] = None
    self._in_fwd = _ThreadFlag()  # the usual fwd calls the function itself: that inner call is plain
    self._spec_type: type[CustomVJP] = CustomVJP

  def defvjp(self, fwd: Callable[..., tuple[Any, Any]], bwd: Callable[[Any, Any], tuple]) -> None:
    self.fwd, self.bwd = fwd, bwd

  def __call__(self, *args: Any) -> Any:
    if self._in_fwd: return self.fun(*args)
    inputs, in_tree = _flat_inputs(args)
    return _call(*self._trace(args, inputs, in_tree))

  def _trace(self, args: tuple, inputs: list[Array], in_tree: Any) -> tuple[Callable, list[Array], list[UOp], Any]:
    """(spec factory, inputs, captured values, output tree) of one call: the function and its rules traced."""
    if self.fwd is None or self.bwd is None:
      raise TypeError(f"custom_vjp function {self.fun.__name__} has no rule yet: call {self.fun.__name__}.defvjp(fwd, bwd)")
    name = self.fun.__name__
    holders = holders_for(inputs)
    primals = unflatten(in_tree, [Array(h) for h in holders])
    with concrete_where_possible(holders, inputs):
      outs, out_tree = flatten_outputs(self.fun(*primals), name)
      with self._in_fwd.on(): fwd_out = self.fwd(*primals)
      if not isinstance(fwd_out, tuple) or len(fwd_out) != 2:
        raise TypeError(f"the custom_vjp forward rule of {name} must return a pair (output, residuals), got {type(fwd_out).__name__}")
      fwd_outs, fwd_tree = flatten_outputs(fwd_out[0], name)
      _check_structure(f"the custom_vjp forward rule of {name}'s output", fwd_tree, fwd_outs, out_tree, outs)
      res_leaves, res_tree = flatten(fwd_out[1])
      # array residuals are outputs of the forward body; anything else (a Python int, a shape) is static
      # an argument kept as a residual is not an output of the forward body: the backward body has the
      # arguments among its inputs (as a body output it would be copied into a buffer of its own)
      is_array = lambda r: isinstance(r, Array) or hasattr(r, "__array__")  # noqa: E731
      is_arg = lambda r: isinstance(r, Array) and r.uop in holders  # noqa: E731
      res_arrays = [as_array(r) for r in res_leaves if is_array(r) and not is_arg(r)]
      res_holders = holders_for(res_arrays)
      it = iter(res_holders)
      residuals = unflatten(res_tree, [r if is_arg(r) else Array(next(it)) if is_array(r) else r for r in res_leaves])
      float_outs = [o for o in outs if _is_float(o)]
      ct_holders = holders_for(float_outs)
      it = iter(ct_holders)
      cts = unflatten(out_tree, [Array(next(it)) if _is_float(o) else Array.const(0, o.dtype, o.shape) for o in outs])
      grads = self.bwd(residuals, cts)
    if not isinstance(grads, tuple) or len(grads) != len(args):
      raise TypeError(f"the custom_vjp backward rule of {name} must return a tuple with one cotangent per "
                      f"positional argument ({len(args)}), got {type(grads).__name__}"
                      + (f" of length {len(grads)}" if isinstance(grads, tuple) else ""))
    grad_leaves, _ = flatten(grads, is_leaf=lambda x: x is None)
    if len(grad_leaves) != len(inputs):
      raise TypeError(f"the custom_vjp backward rule of {name} returned {len(grad_leaves)} cotangent leaves for "
                      f"{len(inputs)} argument leaves")
    in_cts = [_fit(g, Array(h), f"the cotangent {name}'s backward rule returned for argument leaf {i}").uop
              for i, (g, h, x) in enumerate(zip(grad_leaves, holders, inputs)) if _is_float(x)]
    out_uops, res_uops = _uops(outs), _uops(res_arrays)
    bwd_inputs = holders + res_holders + ct_holders
    captured = captures((holders, out_uops), (holders, res_uops), (bwd_inputs, in_cts))
    spec = lambda cap: self._spec_type(close(holders + cap, out_uops), close(holders + cap, res_uops),
                                       close(holders + cap + res_holders + ct_holders, in_cts), len(inputs), name)
    return spec, inputs, captured, out_tree


class custom_vjp_primal_jvp(custom_vjp):
  """Internal: a `custom_vjp` whose forward mode differentiates the function itself (see the module's
  docstring); vmap and reverse mode are custom_vjp's."""

  def __init__(self, fun: Callable[..., Any]):
    super().__init__(fun)
    self._spec_type = CustomVJPPrimalJVP
    self._specs: dict[Any, tuple[CustomVJP, Any]] = {}

  def __call__(self, *args: Any) -> Any:
    """As custom_vjp's, but the traced spec is kept per argument structure, shapes, dtypes and devices, so
    that eager code does not trace the function and both rules at every call. Only for functions whose
    traces depend on nothing else (no Python control flow on values, nothing captured)."""
    if self._in_fwd: return self.fun(*args)
    inputs, in_tree = _flat_inputs(args)
    key = (in_tree, tuple((x.shape, x.dtype, x.uop.device) for x in inputs))
    if key not in self._specs:
      spec_factory, _, captured, out_tree = self._trace(args, inputs, in_tree)
      if captured: return _call(spec_factory, inputs, captured, out_tree)
      if len(self._specs) >= 64: self._specs.clear()
      self._specs[key] = (spec_factory([]), out_tree)
    spec, out_tree = self._specs[key]
    return unflatten(out_tree, [Array(u) for u in call_outputs(spec, _uops(inputs))])


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
    self._in_rule = _ThreadFlag()  # a rule that calls the function itself: that inner call is plain

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
    if self._in_rule: return self.fun(*args)
    return _call(*self._trace(args))

  def _trace(self, args: tuple) -> tuple[Callable, list[Array], list[UOp], Any]:
    """(spec factory, inputs, captured values, output tree) of one call: the function and its rule traced."""
    name = self.fun.__name__
    nondiff = [a for i, a in enumerate(args) if i in self.nondiff_argnums]
    inputs, in_tree = _flat_inputs(tuple(a for i, a in enumerate(args) if i not in self.nondiff_argnums))
    holders = holders_for(inputs)
    primals = unflatten(in_tree, [Array(h) for h in holders])
    float_inputs = [x for x in inputs if _is_float(x)]
    tangent_holders = holders_for(float_inputs)
    it = iter(tangent_holders)
    tangents = unflatten(in_tree, [Array(next(it)) if _is_float(x) else Array.const(0, x.dtype, x.shape) for x in inputs])
    with concrete_where_possible(holders, inputs):
      outs, out_tree = flatten_outputs(self.fun(*self._merge(nondiff, primals)), name)
      with self._in_rule.on(): rule_out = self.jvp(*nondiff, tuple(primals), tuple(tangents))
    if not isinstance(rule_out, (tuple, list)) or len(rule_out) != 2:
      raise TypeError(f"the custom_jvp rule of {name} must return a pair (output, tangent), got {type(rule_out).__name__}")
    t_leaves, t_tree = flatten(rule_out[1], is_leaf=lambda x: x is None)
    t_arrays = [Array.const(0, o.dtype, o.shape) if t is None else as_array(t) for t, o in zip(t_leaves, outs)]
    _, out_tree_with_none = flatten(unflatten(out_tree, outs), is_leaf=lambda x: x is None)
    _check_structure(f"the tangent output of {name}'s custom_jvp rule", t_tree, t_arrays, out_tree_with_none, outs)
    t_outs = [_fit(t, o, f"the tangent {name}'s custom_jvp rule returned").uop for t, o in zip(t_arrays, outs) if _is_float(o)]
    out_uops = _uops(outs)
    captured = captures((holders, out_uops), (holders + tangent_holders, t_outs))
    spec = lambda cap: CustomJVP(close(holders + cap, out_uops), close(holders + cap + tangent_holders, t_outs),
                                 len(inputs), name)
    return spec, inputs, captured, out_tree


def _zeros_like_tree(tree: Any) -> Any:
  return tree_map(lambda x: Array.const(0, as_array(x).dtype, as_array(x).shape), tree)


# how deep a rule's partials may call the function with its rule again (x ** 3's slope 3 x^2 is itself a
# power): 2 levels give the rule's second derivatives (hessians); below that the calls are plain
_NESTED_RULE_LEVELS = 2


class _custom_jvp_kept(custom_jvp):
  """Internal: a custom_jvp whose traced spec is kept per argument structure, shapes, dtypes, devices and
  non-differentiable values (scalars), as custom_vjp_primal_jvp's, so that eager code does not trace the
  function and its rule at every call. Only for functions whose traces depend on nothing else.

  Calls of the function inside its own rule keep the rule, down to _NESTED_RULE_LEVELS (a plain
  custom_jvp makes them plain at once); the spec of such an inner call is not kept, being shallower."""

  def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
    super().__init__(fun, nondiff_argnums)
    self._specs: dict[Any, tuple[CustomJVP, Any]] = {}
    self._depth = threading.local()

  def __call__(self, *args: Any) -> Any:
    depth = getattr(self._depth, "level", 0)
    if depth >= _NESTED_RULE_LEVELS: return self.fun(*args)
    nondiff = tuple((type(a), repr(a)) for i, a in enumerate(args) if i in self.nondiff_argnums)  # repr: -0.0 != 0.0
    inputs, in_tree = _flat_inputs(tuple(a for i, a in enumerate(args) if i not in self.nondiff_argnums))
    key = (nondiff, in_tree, tuple((x.shape, x.dtype, x.uop.device, x.uop.committed) for x in inputs))
    if key not in self._specs or depth > 0:
      self._depth.level = depth + 1
      try:
        spec_factory, _, captured, out_tree = self._trace(args)
      finally:
        self._depth.level = depth
      if captured or depth > 0: return _call(spec_factory, inputs, captured, out_tree)
      if len(self._specs) >= 64: self._specs.clear()
      self._specs[key] = (spec_factory([]), out_tree)
    spec, out_tree = self._specs[key]
    return unflatten(out_tree, [Array(u) for u in call_outputs(spec, _uops(inputs))])


def derivatives(*partials: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
  """Internal: give an elementwise function the derivative of its math instead of its decomposition's
  (a `where`, `abs` or `maximum` inside a formula has the wrong derivative at its switch points, or a NaN
  from a branch it does not take). `partials[i](out, *args)` is the partial derivative with respect to
  argument i, elementwise; the tangent is the sum of tangent_i * partial_i (a custom_jvp, so reverse mode
  is its transpose).

  Python and NumPy scalars among the arguments are constants: their partials are never formed, as with
  JAX's symbolic zeros, so that forward mode does not multiply a zero tangent by an infinite partial
  (e.g. d/dy of x * log(y) at y = 0 is inf, which must not turn the jvp with respect to x into NaN)."""
  def decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
    by_constants: dict[tuple[int, ...], custom_jvp] = {}

    def with_constants(constants: tuple[int, ...]) -> custom_jvp:
      def jvp(*rule_args: Any) -> tuple[Any, Any]:
        args = rule._merge(rule_args[:-2], rule_args[-2])
        out = fun(*args)
        variables = [i for i in range(len(args)) if i not in constants]
        # integer and bool arguments have no tangent, so no partial; the others' partials see them as floats
        as_floats = [a.astype(out.dtype) if isinstance(a, Array) and not _is_float(a) else a for a in args]
        terms = [t * partials[i](out, *as_floats) for i, t in zip(variables, rule_args[-1]) if _is_float(args[i])]
        return out, functools.reduce(lambda a, b: a + b, terms) if terms else None
      rule = _custom_jvp_kept(fun, nondiff_argnums=constants)
      rule.defjvp(jvp)
      return rule

    @functools.wraps(fun)
    def call(*args: Any) -> Any:
      if len(args) != len(partials):
        raise TypeError(f"{fun.__name__} takes {len(partials)} arguments, got {len(args)}")
      args = tuple(a if isinstance(a, Array) or _is_scalar(a) else as_array(a) for a in args)
      constants = tuple(i for i, a in enumerate(args) if _is_scalar(a))
      if len(constants) == len(args): return fun(*args)
      if constants not in by_constants: by_constants[constants] = with_constants(constants)
      return by_constants[constants](*args)
    return call
  return decorate


def _is_scalar(x: Any) -> bool: return isinstance(x, (int, float, np.generic))
