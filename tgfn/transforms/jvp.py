"""Forward mode: one JVP rule per primitive op, and the walk that applies them.

A rule takes the node `y` and the tangents of its sources (an Array, or None for a zero tangent)
and returns the tangent of the output (None when it is zero). Rules build ordinary Array ops.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from tgfn.array import Array
from tgfn.helpers import track
from tgfn.transforms.grad import LN2, NO_VJP_NEEDED, product_of_others
from tgfn.uop.ops import Ops, UOp, toposort

Tangent = Optional[Array]


def _a(u: UOp) -> Array: return Array(u)


def _zero(y: UOp) -> Array: return Array.const(0, y.dtype, y.shape)


def _or_zero(t: Tangent, like: UOp) -> Array: return t if t is not None else _zero(like)


def _tnp():
  import tgfn.numpy as tnp
  return tnp


def _host():
  import tgfn.ops.host as host
  return host


def _linear_binary(sign: float) -> Callable[[UOp, Sequence[Tangent]], Tangent]:
  def rule(y: UOp, ts: Sequence[Tangent]) -> Tangent:
    a, b = ts
    if b is None: return a
    b = -b if sign < 0 else b
    return b if a is None else a + b
  return rule


def _mul_jvp(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  ta, tb = ts
  parts = [t for t in ((ta * _a(y.src[1])) if ta is not None else None,
                       (_a(y.src[0]) * tb) if tb is not None else None) if t is not None]
  return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def _div_jvp(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  ta, tb = ts
  b = _a(y.src[1])
  out = ta / b if ta is not None else None
  if tb is not None: out = (-tb * _a(y) / b) if out is None else out - tb * _a(y) / b
  return out


def _max_jvp(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  tnp = _tnp()
  a, b = _a(y.src[0]), _a(y.src[1])
  share = tnp.where(a > b, 1.0, tnp.where(a == b, 0.5, 0.0)).astype(y.dtype)
  return _or_zero(ts[0], y) * share + _or_zero(ts[1], y) * (1.0 - share)


def _where_jvp(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  return _tnp().where(_a(y.src[0]), _or_zero(ts[1], y), _or_zero(ts[2], y)).astype(y.dtype)


def _reduce_jvp(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  (t,) = ts
  op, axes = y.arg
  x, shape = _a(y.src[0]), y.src[0].shape
  if op is Ops.ADD: return t._reduce(Ops.ADD, axes)
  if op is Ops.MAX:
    hit = (x == _a(y)._broadcast_to(shape)).astype(y.dtype)
    return (t * hit)._reduce(Ops.ADD, axes) / hit._reduce(Ops.ADD, axes)
  return (t * product_of_others(x, axes))._reduce(Ops.ADD, axes)


def _unary(fn: Callable[[UOp, Array], Array]) -> Callable[[UOp, Sequence[Tangent]], Tangent]:
  return lambda y, ts: fn(y, ts[0])


def _movement(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  return Array(UOp(y.op, y.dtype, (ts[0].uop,), y.arg))


def _scatter_jvp(y: UOp, ts: Sequence[Tangent]) -> Tangent:
  """An adding or setting scatter is linear in (operand, updates): scatter the tangents the same way."""
  if y.arg not in (Ops.ADD, None): raise NotImplementedError(f"the derivative of a scatter with {y.arg} is not implemented")
  return _or_zero(ts[0], y)._scatter(_a(y.src[1]), _or_zero(ts[2], y.src[2]), y.arg)


JVP_RULES: dict[Ops, Callable[[UOp, Sequence[Tangent]], Tangent]] = {
  Ops.ADD: _linear_binary(1.0),
  Ops.SUB: _linear_binary(-1.0),
  Ops.MUL: _mul_jvp,
  Ops.FDIV: _div_jvp,
  Ops.NEG: _unary(lambda y, t: -t),
  Ops.RECIP: _unary(lambda y, t: -t * _a(y) * _a(y)),
  Ops.SQRT: _unary(lambda y, t: t * 0.5 / _a(y)),
  Ops.EXP2: _unary(lambda y, t: t * _a(y) * LN2),
  Ops.LOG2: _unary(lambda y, t: t / (_a(y.src[0]) * LN2)),
  Ops.SIN: _unary(lambda y, t: t * _tnp().cos(_a(y.src[0]))),
  Ops.COS: _unary(lambda y, t: -t * _tnp().sin(_a(y.src[0]))),
  Ops.MAX: _max_jvp,
  Ops.WHERE: _where_jvp,
  Ops.CAST: _unary(lambda y, t: t.astype(y.dtype) if y.dtype.is_inexact else None),
  Ops.REDUCE_AXIS: _reduce_jvp,
  Ops.RESHAPE: _movement, Ops.PERMUTE: _movement, Ops.EXPAND: _movement,
  Ops.PAD: _movement, Ops.SHRINK: _movement, Ops.FLIP: _movement,
  Ops.CONTIGUOUS: _unary(lambda y, t: t),
  Ops.COPY: _unary(lambda y, t: Array(UOp(Ops.COPY, t.dtype, (t.uop,), y.arg))),
  Ops.DETACH: _unary(lambda y, t: None),
  Ops.GATHER: lambda y, ts: Array(UOp(Ops.GATHER, y.dtype, (ts[0].uop, y.src[1]), y.arg)),  # linear in the source
  Ops.SCATTER: _scatter_jvp,
  Ops.HOST: lambda y, ts: _host().host_jvp(y, ts),
}
NO_JVP_NEEDED = NO_VJP_NEEDED


def forward(outputs: Sequence[UOp], tangents: dict[UOp, Array]) -> list[Tangent]:
  """Tangents of `outputs`, given tangents of some input nodes (others have zero tangent)."""
  known: dict[UOp, Array] = dict(tangents)
  custom_results: dict = {}  # a custom JVP rule runs once per call, for all of its outputs
  for node in toposort(list(outputs)):
    if node in known or not (node.dtype is not None and node.dtype.is_inexact): continue
    if node.op in NO_JVP_NEEDED: continue  # zero derivative (a float TRUNC): its tangent is zero
    src_tangents = [known.get(s) for s in node.src]
    if all(t is None for t in src_tangents): continue
    if node.op is Ops.CALL:  # a sub-graph call: all of its outputs' tangents at once
      from tgfn.lax.rules import call_jvp
      key = (node.arg[0], node.src)
      if key not in custom_results: custom_results[key] = call_jvp(node, src_tangents)
      out = custom_results[key][node.arg[1]]
    else:
      rule = JVP_RULES.get(node.op)
      if rule is None:
        raise NotImplementedError(f"no JVP rule for {node.op}: {NO_JVP_NEEDED.get(node.op, 'missing rule')}")
      out = rule(node, src_tangents)
    if out is not None: known[node] = out
  result = [known.get(o) for o in outputs]
  track("jvp: forward walk", outputs, result)
  return result
