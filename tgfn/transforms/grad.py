"""Reverse mode: one VJP rule per primitive op, and the walk that applies them.

A rule takes the cotangent `ct` of a node's output (an Array) and the node `y` (a UOp), and returns
one cotangent per source (None where no derivative flows). Rules build ordinary Array ops, so the
gradient is itself a graph that can be differentiated again, batched or compiled.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tgfn.array import Array
from tgfn.dtype import DType, dtypes
from tgfn import helpers
from tgfn.helpers import track
from tgfn.uop.ops import Ops, UOp, toposort

LN2 = math.log(2.0)
Cotangents = tuple[Optional[Array], ...]


def _a(u: UOp) -> Array: return Array(u)


def _tnp():
  import tgfn.numpy as tnp
  return tnp


def _host():
  import tgfn.ops.host as host
  return host


def _max_vjp(ct: Array, y: UOp) -> Cotangents:
  """JAX's convention: at a tie, each side gets half the cotangent."""
  tnp = _tnp()
  a, b = _a(y.src[0]), _a(y.src[1])
  share = tnp.where(a > b, 1.0, tnp.where(a == b, 0.5, 0.0)).astype(ct.dtype)
  return ct * share, ct * (1.0 - share)


def _reduce_vjp(ct: Array, y: UOp) -> Cotangents:
  tnp = _tnp()
  op, axes = y.arg
  x, shape = _a(y.src[0]), y.src[0].shape
  ct_full = ct._broadcast_to(shape)
  if op is Ops.ADD: return (ct_full,)
  if op is Ops.MAX:  # the maximum shares its cotangent equally among ties
    hit = (x == _a(y)._broadcast_to(shape)).astype(ct.dtype)
    return (ct_full * hit / hit._reduce(Ops.ADD, axes)._broadcast_to(shape),)
  return (ct_full * product_of_others(x, axes),)


def product_of_others(x: Array, axes: tuple[int, ...]) -> Array:
  """d prod(x) / d x_i = product of the other elements, exact when x has zeros: with no zero it is
  prod / x_i; with exactly one zero, only that position is non-zero; with more, everything is 0."""
  tnp = _tnp()
  shape = x.shape
  is_zero = x == 0
  zeros = is_zero.astype(x.dtype)._reduce(Ops.ADD, axes)._broadcast_to(shape)
  nonzero_prod = tnp.where(is_zero, 1.0, x).astype(x.dtype)._reduce(Ops.MUL, axes)._broadcast_to(shape)
  safe_x = tnp.where(is_zero, 1.0, x).astype(x.dtype)
  return tnp.where(zeros == 0, nonzero_prod / safe_x, tnp.where(is_zero & (zeros == 1), nonzero_prod, 0.0)).astype(x.dtype)


def _permute_vjp(ct: Array, y: UOp) -> Cotangents:
  inverse = tuple(sorted(range(len(y.arg)), key=lambda i: y.arg[i]))
  return (ct._permute(inverse),)


def _expand_vjp(ct: Array, y: UOp) -> Cotangents:
  src = y.src[0].shape
  axes = tuple(i for i, (s, n) in enumerate(zip(src, y.arg)) if s == 1 and n != 1)
  return (ct._reduce(Ops.ADD, axes),)


def _cast_vjp(ct: Array, y: UOp) -> Cotangents:
  return (ct.astype(y.src[0].dtype),) if y.src[0].dtype.is_inexact and y.dtype.is_inexact else (None,)


def _position_dtype(n: int) -> DType:
  """int32 for the positions of n elements where it holds them all, so that gradients of gathers and
  scatters need no 64-bit integers (which WEBGPU lacks); int64 past 2**31."""
  return dtypes.int32 if n < 2 ** 31 else dtypes.int64


def _index_holder(dtype: DType) -> DType:
  """A signed dtype that holds every value of the index dtype `dtype` (int32 for 32-bit ones or narrower)."""
  return dtypes.int32 if dtype.itemsize < 4 or dtype is dtypes.int32 else dtypes.int64


def _gather_vjp(ct: Array, y: UOp) -> Cotangents:
  """Scatter-add of the cotangent into the source's shape: each element of y came from the source element
  its (clamped) index names, so its cotangent is added there. One pass over y's elements."""
  tnp = _tnp()
  x, axis = y.src[0], y.arg
  if math.prod(x.shape) == 0: return (tnp.zeros(x.shape, ct.dtype), None)
  raw, at = _a(y.src[1]), _position_dtype(math.prod(x.shape))
  index = tnp.clip(raw.astype(_index_holder(raw.dtype)), 0, x.shape[axis] - 1).astype(at)
  stride = lambda k: math.prod(x.shape[k + 1:])  # noqa: E731
  position = index * stride(axis)
  for k, size in enumerate(x.shape):  # a size-1 axis of the source is read at 0 whatever y's size there
    if k != axis and size > 1:
      position = position + tnp.arange(size, dtype=at).reshape((size,) + (1,) * (len(y.shape) - k - 1)) * stride(k)
  return (tnp.zeros(x.shape, ct.dtype)._scatter(position._broadcast_to(y.shape), ct, Ops.ADD), None)


def _scatter_vjp(ct: Array, y: UOp) -> Cotangents:
  """Adding: the operand's cotangent is ct, each update's is ct at its position (0 where dropped).
  Setting: an element's cotangent goes to the update that won it (the last at its position), or to the
  operand where no update landed."""
  if y.arg not in (Ops.ADD, None): raise NotImplementedError(f"the derivative of a scatter with {y.arg} is not implemented")
  tnp = _tnp()
  x, positions, updates = y.src
  n = math.prod(x.shape)
  if n == 0: return (ct, None, tnp.zeros(updates.shape, updates.dtype))
  p = _a(positions)
  p = p.astype(_index_holder(p.dtype))
  valid = (p >= 0) & (p < n)
  at = tnp.where(valid, p, 0).astype(_position_dtype(n)).reshape(-1)
  picked = ct._reshape((n,))._gather(at, 0)._reshape(p.shape)
  if y.arg is Ops.ADD: return (ct, None, tnp.where(valid, picked, 0).astype(ct.dtype))
  order = tnp.arange(p.size, dtype=_position_dtype(p.size)).reshape(p.shape)
  winner = tnp.full(x.shape, -1, order.dtype)._scatter(p, order, Ops.MAX)  # the last update at each element
  won = valid & (winner._reshape((n,))._gather(at, 0)._reshape(p.shape) == order)
  return (tnp.where(winner >= 0, 0, ct).astype(ct.dtype), None, tnp.where(won, picked, 0).astype(ct.dtype))


VJP_RULES: dict[Ops, Callable[[Array, UOp], Cotangents]] = {
  Ops.ADD: lambda ct, y: (ct, ct),
  Ops.SUB: lambda ct, y: (ct, -ct),
  Ops.MUL: lambda ct, y: (ct * _a(y.src[1]), ct * _a(y.src[0])),
  Ops.FDIV: lambda ct, y: (ct / _a(y.src[1]), -ct * _a(y) / _a(y.src[1])),
  Ops.NEG: lambda ct, y: (-ct,),
  Ops.RECIP: lambda ct, y: (-ct * _a(y) * _a(y),),
  Ops.SQRT: lambda ct, y: (ct * 0.5 / _a(y),),
  Ops.EXP2: lambda ct, y: (ct * _a(y) * LN2,),
  Ops.LOG2: lambda ct, y: (ct / (_a(y.src[0]) * LN2),),
  Ops.SIN: lambda ct, y: (ct * _tnp().cos(_a(y.src[0])),),
  Ops.COS: lambda ct, y: (-ct * _tnp().sin(_a(y.src[0])),),
  Ops.MAX: _max_vjp,
  Ops.WHERE: lambda ct, y: (None, _tnp().where(_a(y.src[0]), ct, 0.0).astype(ct.dtype),
                            _tnp().where(_a(y.src[0]), 0.0, ct).astype(ct.dtype)),
  Ops.CAST: _cast_vjp,
  Ops.REDUCE_AXIS: _reduce_vjp,
  Ops.RESHAPE: lambda ct, y: (ct._reshape(y.src[0].shape),),
  Ops.PERMUTE: _permute_vjp,
  Ops.EXPAND: _expand_vjp,
  Ops.PAD: lambda ct, y: (ct._shrink(tuple((lo, lo + n) for (lo, _), n in zip(y.arg, y.src[0].shape))),),
  Ops.SHRINK: lambda ct, y: (ct._pad(tuple((s, n - e) for (s, e), n in zip(y.arg, y.src[0].shape))),),
  Ops.FLIP: lambda ct, y: (ct._flip(y.arg),),
  Ops.CONTIGUOUS: lambda ct, y: (ct,),
  Ops.COPY: lambda ct, y: (Array(UOp(Ops.COPY, ct.dtype, (ct.uop,), y.src[0].device)),),
  Ops.DETACH: lambda ct, y: (None,),
  Ops.GATHER: _gather_vjp,
  Ops.SCATTER: _scatter_vjp,
  Ops.HOST: lambda ct, y: _host().host_vjp(ct, y),
}

# Ops through which no derivative flows, and why (checked for completeness by the rule-coverage test).
NO_VJP_NEEDED: dict[Ops, str] = {
  Ops.TRUNC: "piecewise constant: derivative zero almost everywhere (as JAX's floor/round)",
  Ops.CMPLT: "boolean output", Ops.CMPNE: "boolean output",
  Ops.IDIV: "integer-only op", Ops.MOD: "integer-only op", Ops.AND: "integer/bool-only op",
  Ops.OR: "integer/bool-only op", Ops.XOR: "integer/bool-only op", Ops.SHL: "integer-only op",
  Ops.SHR: "integer-only op", Ops.BITCAST: "reinterprets bits: no derivative",
  Ops.BUFFER: "a leaf", Ops.CONST: "a leaf", Ops.PARAM: "a leaf (a constant)", Ops.PLACEHOLDER: "a leaf (the differentiated input)",
}


def _call_key(node: UOp) -> Any:
  """What identifies one call: the spec and inputs of a CALL node."""
  return (node.arg[0], node.src)


def _differentiable(u: UOp) -> bool: return u.dtype is not None and u.dtype.is_inexact


def backward(outputs: Sequence[UOp], cotangents: Sequence[Array], wrt: Sequence[UOp]) -> list[Optional[Array]]:
  """Cotangents of `wrt` nodes given cotangents of `outputs` (None where nothing flows)."""
  topo = toposort(list(outputs))
  targets = set(wrt)
  on_path: set[UOp] = set()
  # nodes that depend on some `wrt` node through differentiable values; an op of NO_VJP_NEEDED (a float
  # TRUNC inside floor/round/mod) has a zero derivative, so the path stops there instead of raising
  for node in topo:
    if node in targets or (_differentiable(node) and node.op not in NO_VJP_NEEDED
                           and any(s in on_path for s in node.src)): on_path.add(node)
  grads: dict[UOp, Array] = {}

  def accumulate(node: UOp, ct: Optional[Array]) -> None:
    if ct is None or node not in on_path: return
    grads[node] = grads[node] + ct if node in grads else ct

  for out, ct in zip(outputs, cotangents): accumulate(out, ct)
  # a sub-graph call (CALL: a loop, a checkpoint, a custom-derivative function) runs its rule once per
  # call, at the call's output that comes first in `topo`: by then every output has its complete cotangent
  first_output: dict[Any, UOp] = {}
  for node in topo:
    if node.op is Ops.CALL: first_output.setdefault(_call_key(node), node)
  call_cts: dict[Any, dict[int, Array]] = {}
  for node in reversed(topo):
    if node in targets: continue
    if node.op is Ops.CALL:
      key, index = _call_key(node), node.arg[1]
      if node in grads: call_cts.setdefault(key, {})[index] = grads.pop(node)
      if first_output[key] is node and key in call_cts:
        from tgfn.lax.rules import call_vjp
        for src, src_ct in zip(node.src, call_vjp(node, call_cts.pop(key))): accumulate(src, src_ct)
      continue
    if node not in grads: continue
    ct = grads.pop(node)
    rule = VJP_RULES.get(node.op)
    if rule is None:
      raise NotImplementedError(f"no VJP rule for {node.op}: {NO_VJP_NEEDED.get(node.op, 'missing rule')}")
    helpers.differentiating = node  # nodes the rule builds carry this node's source line (DEBUG_NANS, VIZ)
    for src, src_ct in zip(node.src, rule(ct, node)): accumulate(src, src_ct)
  helpers.differentiating = None
  result = [grads.get(w) for w in wrt]
  track("grad: backward walk", outputs, result)
  return result
