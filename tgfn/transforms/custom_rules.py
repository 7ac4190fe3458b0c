"""grad, jvp and vmap of custom_vjp and custom_jvp calls (`CustomVJP`, `CustomJVP` specs, made by
tgfn/transforms/custom.py). Like the control-flow rules (tgfn/lax/rules.py), each rule builds calls of
bodies: the rule bodies traced when the function was called, or bodies derived from them.

- custom_vjp, reverse mode: a call of the forward rule's body gives the residuals, a call of the
  backward rule's body the cotangents. Forward mode: an error, as in JAX, except for the internal
  `custom_vjp_primal_jvp` (CustomVJPPrimalJVP), whose tangent is the JVP of the function's own body.
- custom_jvp, forward mode: a call of the JVP rule's body. Reverse mode: a call of its transpose (the
  rule is linear in the tangents, so its reverse-mode derivative with respect to them is the transpose).
- vmap: every body batched with the same input flags; outputs batched where either the function or
  its rule makes them so; an argument's cotangent summed over the batch where the argument is unbatched.
"""
from __future__ import annotations

import functools
from typing import Optional, Sequence

from tgfn.array import Array
from tgfn.lax.rules import _backward, _batch_body, _fresh, _is_float, _or_zeros, _pick
from tgfn.transforms.custom import CustomVJPPrimalJVP
from tgfn.uop.body import Body, Call, CustomJVP, CustomVJP, call_outputs, close
from tgfn.uop.ops import UOp, toposort

Ct = Optional[Array]


def _float_mask(avals: Sequence[tuple]) -> list[bool]: return [_is_float(dt) for _, dt in avals]


def _spread(values: Sequence[UOp], mask: Sequence[bool]) -> list[Ct]:
  """Values for the True entries of `mask`, in order; None elsewhere."""
  it = iter(values)
  return [Array(next(it)) if m else None for m in mask]


def _arg_mask(spec: CustomVJP | CustomJVP) -> list[bool]:
  """Inputs that get a cotangent or a tangent: the float arguments (captured values do not)."""
  return [i < spec.n_args and _is_float(dt) for i, (_, dt) in enumerate(spec.fun.in_avals)]


# ============================================================================================ reverse mode
def custom_vjp(node: UOp, cts: dict[int, Array]) -> list[Ct]:
  """Cotangents of a custom call's sources given cotangents of (some of) its outputs."""
  spec, srcs = node.arg[0], list(node.src)
  out_mask = _float_mask(spec.out_avals)
  ct_vals = [(cts[i] if i in cts else Array.const(0, dt, shape)).astype(dt).uop
             for i, (shape, dt) in enumerate(spec.out_avals) if out_mask[i]]
  if isinstance(spec, CustomVJP):
    residuals = call_outputs(Call(spec.fwd, f"{spec.name} fwd"), srcs)
    in_cts = call_outputs(Call(spec.bwd, f"{spec.name} bwd"), srcs + residuals + ct_vals)
  else: in_cts = call_outputs(Call(_transposed_jvp(spec), f"{spec.name} jvp transposed"), srcs + ct_vals)
  return _spread(in_cts, _arg_mask(spec))


@functools.lru_cache(maxsize=256)
def _transposed_jvp(spec: CustomJVP) -> Body:
  """(*inputs, *cotangents of the float outputs) -> cotangents of the float arguments."""
  holders = _fresh(spec.fun.in_avals)
  mask = _arg_mask(spec)
  tangents = _fresh(_pick(spec.fun.in_avals, mask))
  t_outs = spec.jvp.instantiate(holders + tangents)
  ct_holders = _fresh([(u.shape, u.dtype) for u in t_outs])
  grads = _or_zeros(_backward(t_outs, [Array(c) for c in ct_holders], tangents), tangents)
  if any(u in set(tangents) for u in toposort([g.uop for g in grads])):
    raise TypeError(f"reverse-mode differentiation of the custom_jvp function {spec.name} needs its JVP rule to be "
                    "linear in the tangents, but the rule's tangent output depends on them non-linearly")
  return close(holders + ct_holders, [g.uop for g in grads])


# ============================================================================================ forward mode
def custom_jvp(node: UOp, tangents: Sequence[Ct]) -> list[Ct]:
  """Tangents of every output of a custom call given its sources' tangents (None: zero)."""
  spec, srcs = node.arg[0], list(node.src)
  if isinstance(spec, CustomVJPPrimalJVP):
    from tgfn.transforms.jvp import forward
    outs = spec.fun.instantiate(srcs)
    return forward(outs, {s: t for s, t, m in zip(srcs, tangents, _arg_mask(spec)) if m and t is not None})
  if isinstance(spec, CustomVJP):
    raise TypeError(f"can't apply forward-mode differentiation (jvp) to the custom_vjp function {spec.name}; "
                    "define it with custom_jvp instead, or differentiate it in reverse mode only")
  t_in = [(t if t is not None else Array.const(0, u.dtype, u.shape)).uop
          for t, u, m in zip(tangents, srcs, _arg_mask(spec)) if m]
  t_outs = call_outputs(Call(spec.jvp, f"{spec.name} jvp"), srcs + t_in)
  return _spread(t_outs, _float_mask(spec.out_avals))


# ============================================================================================ vmap
def custom_batch(node: UOp, srcs: Sequence[tuple[Array, bool]], size: int) -> list[tuple[Array, bool]]:
  """Every output of a custom call, batched: (value, is batched) pairs (batch axis leading)."""
  spec = node.arg[0]
  flags = [b for _, b in srcs]
  out_mask = _float_mask(spec.out_avals)
  arg_flags = _pick(flags, _arg_mask(spec))
  if isinstance(spec, CustomJVP):
    _, out_flags = _batch_body(spec.fun, flags, size)
    _, t_flags = _batch_body(spec.jvp, flags + arg_flags, size)
    out_flags = [f or t for f, t in zip(out_flags, _spread_flags(t_flags, out_mask))]
    fun, _ = _batch_body(spec.fun, flags, size, out_flags)
    jvp, _ = _batch_body(spec.jvp, flags + arg_flags, size, _pick(out_flags, out_mask))
    batched: CustomVJP | CustomJVP = CustomJVP(fun, jvp, spec.n_args, spec.name)
  else:
    fun, out_flags = _batch_body(spec.fun, flags, size)
    fwd, res_flags = _batch_body(spec.fwd, flags, size)
    bwd, ct_flags = _batch_body(spec.bwd, flags + res_flags + _pick(out_flags, out_mask), size)
    batched = type(spec)(fun, fwd, _match_batching(bwd, ct_flags, arg_flags, size), spec.n_args, spec.name)
  outs = call_outputs(batched, [a.uop for a, _ in srcs])
  return [(Array(u), f) for u, f in zip(outs, out_flags)]


def _spread_flags(flags: Sequence[bool], mask: Sequence[bool]) -> list[bool]:
  it = iter(flags)
  return [next(it) if m else False for m in mask]


def _match_batching(body: Body, got: Sequence[bool], want: Sequence[bool], size: int) -> Body:
  """`body` with each output batched exactly where `want` says: a cotangent batched for an unbatched
  argument is summed over the batch (the argument was broadcast), an unbatched one for a batched
  argument broadcast."""
  if list(got) == list(want): return body
  from tgfn.transforms.vmap import _lead
  holders = _fresh(body.in_avals)
  outs = [Array(u) for u in body.instantiate(holders)]
  fixed = [o.sum(0).astype(o.dtype) if g and not w else _lead(o, g, size) if w and not g else o
           for o, g, w in zip(outs, got, want)]
  return close(holders, [f.uop for f in fixed])
