"""Structured control flow with JAX's API: cond, switch, while_loop, fori_loop, scan, map, associative_scan.

Each construct traces its function(s) once, on placeholders of the carry's (or operand's) shapes, into a
closed `Body` (tgfn/uop/body.py) and returns CALL nodes: lazy Arrays like any other. Values a function
captures from outside become extra inputs of the call. The engine compiles each body once and runs it
as many times as needed (tgfn/engine/call.py); under jit the loop runs inside the compiled replay.
Transform rules for the calls are in tgfn/lax/rules.py.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.transforms.trace import fn_name, is_abstract, placeholder
from tgfn.tree import flatten, unflatten
from tgfn.uop.body import Cond, Scan, While, call_outputs, captured_values, close


def _leaves(tree: Any) -> tuple[list[Array], Any]:
  leaves, treedef = flatten(tree)
  return [as_array(x) for x in leaves], treedef


def _holders(arrays: Sequence[Array], drop_leading: bool = False) -> list[Array]:
  return [Array(placeholder(a.shape[1:] if drop_leading else a.shape, a.dtype, a.uop.device)) for a in arrays]


def _out_leaves(out: Any, what: str) -> tuple[list[Array], Any]:
  leaves, treedef = flatten(out)
  try:
    return [as_array(x) for x in leaves], treedef
  except TypeError:
    raise TypeError(f"{what} must return arrays (or pytrees of arrays), got {out!r}") from None


def _describe(arrays: Sequence[Array], tree: Any) -> str:
  return f"{tree} with leaves " + ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in arrays)


def _check_same(what: str, left_name: str, left: Sequence[Array], left_tree: Any,
                right_name: str, right: Sequence[Array], right_tree: Any) -> None:
  """Raise naming both sides unless the two pytrees have the same structure, shapes and dtypes."""
  if left_tree != right_tree or any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(left, right)):
    raise TypeError(f"{what}: {left_name} and {right_name} must have the same tree structure, shapes and dtypes, "
                    f"but\n  {left_name} is {_describe(left, left_tree)}\n  {right_name} is {_describe(right, right_tree)}")


def _weak_leaves(tree: Any) -> list[bool]:
  """Which leaves are Python scalars (weakly typed: JAX lets the loop's output type decide them)."""
  return [isinstance(x, (int, float)) and not isinstance(x, bool) for x in flatten(tree)[0]]


def _promote_weak(init: list[Array], weak: list[bool], out: list[Array]) -> Optional[list[Array]]:
  """The carry with weakly typed leaves cast to the dtype the body returned for them, if that changes any."""
  if len(out) != len(init): return None
  promoted = [x.astype(o.dtype) if w and x.dtype != o.dtype and x.shape == o.shape else x
              for x, w, o in zip(init, weak, out)]
  return promoted if any(p is not x for p, x in zip(promoted, init)) else None


# ---------------------------------------------------------------------------------------------- scan
def scan(f: Callable, init: Any, xs: Any = None, length: Optional[int] = None, reverse: bool = False,
         unroll: Any = 1) -> tuple[Any, Any]:
  """Loop `carry, y = f(carry, x)` over the leading axis of `xs`; returns (final carry, stacked ys).
  `unroll=k` runs k steps per body run (when k divides the length; True: all of them)."""
  x_leaves, x_tree = _leaves(xs)
  lengths = {x.shape[0] for x in x_leaves if x.ndim}
  if any(x.ndim == 0 for x in x_leaves): raise ValueError("scan: every leaf of xs needs a leading axis to scan over, got a 0-d array")
  if len(lengths) > 1: raise ValueError(f"scan: the leaves of xs have different leading sizes {sorted(lengths)}")
  if length is not None:
    if lengths and lengths != {length}: raise ValueError(f"scan: length={length} but xs have leading size {lengths.pop()}")
  elif lengths: length = lengths.pop()
  else: raise ValueError("scan: with no xs, pass length=")
  length = int(length)
  k = length if unroll is True else max(int(unroll), 1)
  if 1 < k <= length and length % k == 0: return _scan_unrolled(f, init, xs, length, reverse, k)
  init_leaves, carry_tree = _leaves(init)
  traced = _trace_scan_body(f, init_leaves, carry_tree, x_leaves, x_tree)
  if (promoted := _promote_weak(init_leaves, _weak_leaves(init), traced[3])) is not None:
    init_leaves = promoted
    traced = _trace_scan_body(f, init_leaves, carry_tree, x_leaves, x_tree)
  body_in, x_holders, outs, new_carry, new_tree, y_tree = traced
  _check_same("scan", "the carry input (init)", init_leaves, carry_tree, f"the carry output of {fn_name(f)}",
              new_carry, new_tree)
  consts = captured_values(body_in + x_holders, outs)
  body = close(consts + body_in + x_holders, outs)
  spec = Scan(body, len(consts), len(init_leaves), length, bool(reverse))
  results = [Array(u) for u in call_outputs(spec, consts + [x.uop for x in init_leaves] + [x.uop for x in x_leaves])]
  return unflatten(carry_tree, results[:len(init_leaves)]), unflatten(y_tree, results[len(init_leaves):])


def _trace_scan_body(f: Callable, init: list[Array], carry_tree: Any, x_leaves: list[Array], x_tree: Any) -> tuple:
  carry_h, x_h = _holders(init), _holders(x_leaves, drop_leading=True)
  out = f(unflatten(carry_tree, carry_h), unflatten(x_tree, x_h))
  if not (isinstance(out, tuple) and len(out) == 2):
    raise TypeError(f"scan: the body {fn_name(f)} must return a pair (new carry, y), got {type(out).__name__}")
  new_carry, new_tree = _out_leaves(out[0], f"scan body {fn_name(f)}")
  ys, y_tree = _out_leaves(out[1], f"scan body {fn_name(f)}")
  return [h.uop for h in carry_h], [h.uop for h in x_h], [a.uop for a in new_carry + ys], new_carry, new_tree, y_tree


def _scan_unrolled(f: Callable, init: Any, xs: Any, length: int, reverse: bool, k: int) -> tuple[Any, Any]:
  """k steps of f per body run: xs seen as (length / k, k, ...) blocks, ys put back to (length, ...)."""
  import tgfn.numpy as tnp
  x_leaves, x_tree = _leaves(xs)
  blocks = unflatten(x_tree, [x._reshape((length // k, k) + x.shape[1:]) for x in x_leaves])

  def block_body(carry: Any, xb: Any) -> tuple[Any, Any]:
    xb_leaves = flatten(xb)[0]
    ys: list[Any] = [None] * k
    for j in (range(k - 1, -1, -1) if reverse else range(k)):
      carry, ys[j] = f(carry, unflatten(x_tree, [x[j] for x in xb_leaves]))
    y_leaves = [flatten(y)[0] for y in ys]
    return carry, unflatten(flatten(ys[0])[1], [tnp.stack([yl[i] for yl in y_leaves]) for i in range(len(y_leaves[0]))])

  carry, ys = scan(block_body, init, blocks, length=length // k, reverse=reverse)
  y_leaves, y_tree = flatten(ys)
  return carry, unflatten(y_tree, [y._reshape((length,) + y.shape[2:]) for y in y_leaves])


def map(f: Callable, xs: Any) -> Any:  # noqa: A001 -- JAX's name
  """`f` applied to each slice of `xs` along the leading axis, stacked (a scan with no carry)."""
  return scan(lambda _, x: ((), f(x)), (), xs)[1]


# ---------------------------------------------------------------------------------------------- while
def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
  """`while cond_fun(val): val = body_fun(val)`; returns the final val. Not reverse-differentiable."""
  init, tree = _leaves(init_val)
  traced = _trace_while(cond_fun, body_fun, init, tree)
  if (promoted := _promote_weak(init, _weak_leaves(init_val), traced[3])) is not None:
    init = promoted
    traced = _trace_while(cond_fun, body_fun, init, tree)
  cond_in, pred, body_in, new, new_tree = traced
  _check_same("while_loop", "the loop carry (init_val)", init, tree, "body_fun's output", new, new_tree)
  cond_consts = captured_values(cond_in, [pred])
  body_consts = captured_values(body_in, [a.uop for a in new])
  spec = While(close(cond_consts + cond_in, [pred]), close(body_consts + body_in, [a.uop for a in new]),
               len(cond_consts), len(body_consts))
  outs = call_outputs(spec, cond_consts + body_consts + [x.uop for x in init])
  return unflatten(tree, [Array(u) for u in outs])


def _trace_while(cond_fun: Callable, body_fun: Callable, init: list[Array], tree: Any) -> tuple:
  cond_h, body_h = _holders(init), _holders(init)
  pred = as_array(cond_fun(unflatten(tree, cond_h)))
  if pred.shape != () or pred.dtype is not dtypes.bool:
    raise TypeError(f"while_loop: cond_fun {fn_name(cond_fun)} must return a boolean scalar, got "
                    f"{pred.dtype.name}{list(pred.shape)}")
  new, new_tree = _out_leaves(body_fun(unflatten(tree, body_h)), f"while_loop body_fun {fn_name(body_fun)}")
  return [h.uop for h in cond_h], pred.uop, [h.uop for h in body_h], new, new_tree


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any, unroll: Any = 1) -> Any:
  """`for i in range(lower, upper): val = body_fun(i, val)`. With Python int bounds it is a scan (so it
  can be reverse-differentiated); with traced bounds a while_loop."""
  if all(isinstance(b, int) and not isinstance(b, bool) for b in (lower, upper)):
    def step(carry: Any, _: Any) -> tuple[Any, None]:
      i, val = carry
      return (i + 1, body_fun(i, val)), None
    start = Array.const(lower, dtypes.int32)
    (_, val), _ = scan(step, (start, init_val), None, length=max(upper - lower, 0), unroll=unroll)
    return val
  lo, hi = as_array(lower), as_array(upper)
  if not (lo.dtype.is_int and hi.dtype.is_int): raise TypeError("fori_loop: lower and upper must be integers")
  dt = dtypes.int64 if dtypes.int64 in (lo.dtype, hi.dtype) else dtypes.int32
  _, _, val = while_loop(lambda c: c[0] < c[1], lambda c: (c[0] + 1, c[1], body_fun(c[0], c[2])),
                         (lo.astype(dt), hi.astype(dt), init_val))
  return val


# ---------------------------------------------------------------------------------------------- cond
def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
  """`branches[clamp(index, 0, len-1)](*operands)`. Every branch must return the same structure, shapes
  and dtypes. A concrete index runs only its branch's graph (all branches are still checked)."""
  return _switch("switch", index, branches, operands, [f"branch {k} ({fn_name(b)})" for k, b in enumerate(branches)], 0)


def _switch(what: str, index: Any, branches: Sequence[Callable], operands: tuple, names: list[str], ref: int) -> Any:
  """switch, with each branch's name for errors; every branch is checked against branch `ref`."""
  if not branches: raise ValueError("switch: needs at least one branch")
  idx = as_array(index)
  if idx.shape != () or not (idx.dtype.is_int or idx.dtype is dtypes.bool):
    raise TypeError(f"switch: the index must be an integer scalar, got {idx.dtype.name}{list(idx.shape)}")
  ops, op_tree = _leaves(operands)
  traced = []
  for branch, name in zip(branches, names):
    holders = _holders(ops)
    outs, tree = _out_leaves(branch(*unflatten(op_tree, holders)), f"{what} {name}")
    traced.append(([h.uop for h in holders], outs, tree))
  _, first, first_tree = traced[ref]
  for k, (_, outs, tree) in enumerate(traced):
    if k != ref: _check_same(what, f"{names[ref]} output", first, first_tree, f"{names[k]} output", outs, tree)
  consts = list(dict.fromkeys(c for holders, outs, _ in traced for c in captured_values(holders, [a.uop for a in outs])))
  bodies = tuple(close(holders + consts, [a.uop for a in outs]) for holders, outs, _ in traced)
  args = [x.uop for x in ops] + consts
  if not is_abstract(idx.uop):  # a concrete index: inline the branch taken
    chosen = min(max(int(idx.item()), 0), len(branches) - 1)
    return unflatten(first_tree, [Array(u) for u in bodies[chosen].instantiate(args)])
  clamped = idx.astype(dtypes.int32)
  outs = call_outputs(Cond(bodies), [clamped.uop] + args)
  return unflatten(first_tree, [Array(u) for u in outs])


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
  """`true_fun(*operands) if pred else false_fun(*operands)`; pred is a scalar (bool or number)."""
  p = as_array(pred)
  if p.shape != (): raise TypeError(f"cond: the predicate must be a scalar, got shape {p.shape}")
  return _switch("cond", p != 0, [false_fun, true_fun], operands,
                 [f"false_fun ({fn_name(false_fun)})", f"true_fun ({fn_name(true_fun)})"], 1)


# ---------------------------------------------------------------------------------------------- associative_scan
def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
  """All prefix combinations `fn(...fn(fn(e0, e1), e2)..., ei)` along `axis`, for an associative `fn`
  over pytrees, in O(log n) rounds of slicing (no body: it is composed from slices and fn)."""
  import tgfn.numpy as tnp
  leaves, tree = _leaves(elems)
  if not leaves: return elems
  ax = axis % leaves[0].ndim
  n = leaves[0].shape[ax]
  if any(x.shape[ax] != n for x in leaves): raise ValueError("associative_scan: every leaf needs the same size along axis")

  def sl(x: Array, start: int, stop: Optional[int], step: int = 1) -> Array:
    return x[(slice(None),) * ax + (slice(start, stop, step),)]

  def combine(a: list[Array], b: list[Array]) -> list[Array]:
    return _leaves(fn(unflatten(tree, a), unflatten(tree, b)))[0]

  def interleave(even: Array, odd: Array) -> Array:
    """even[0], odd[0], even[1], ...: 2 * len(even) elements (the caller slices off a padding one)."""
    m = even.shape[ax]
    if odd.shape[ax] < m: odd = tnp.concatenate([odd, sl(even, 0, 1)], axis=ax)
    both = tnp.stack([even, odd], axis=ax + 1)
    return both._reshape(both.shape[:ax] + (2 * m,) + both.shape[ax + 2:])

  def prefix(xs: list[Array]) -> list[Array]:
    size = xs[0].shape[ax]
    if size < 2: return xs
    odd = prefix(combine([sl(x, 0, size - 1, 2) for x in xs], [sl(x, 1, None, 2) for x in xs]))
    if size % 2 == 0: even = combine([sl(o, 0, -1) for o in odd], [sl(x, 2, None, 2) for x in xs])
    else: even = combine(odd, [sl(x, 2, None, 2) for x in xs])
    even = [tnp.concatenate([sl(x, 0, 1), e], axis=ax) for x, e in zip(xs, even)]
    return [sl(interleave(e, o), 0, size) for e, o in zip(even, odd)]

  if reverse: leaves = [tnp.flip(x, axis=ax) for x in leaves]
  out = prefix(leaves)
  if reverse: out = [tnp.flip(x, axis=ax) for x in out]
  return unflatten(tree, out)
