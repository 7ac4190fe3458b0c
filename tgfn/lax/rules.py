"""grad, jvp and vmap of CALL nodes: each rule builds new bodies by transforming the old one (opened on
fresh placeholders, transformed with the ordinary rule tables, closed again) and returns new calls.

- reverse mode: a scan runs forward once more stacking its carries, then a reverse scan whose body
  recomputes one step and pulls the cotangents back through it; a cond runs the VJP of the branch
  taken; a checkpoint runs a backward body that recomputes what its policy did not save; a while_loop
  has no reverse mode (as in JAX).
- forward mode: the same construct over (primal, tangent) pairs.
- vmap: the bodies are batched; a scan's or while's carry is batched if any step makes it so; a cond
  with a batched predicate runs every branch and selects; a while with a batched predicate runs while
  any member is still going, freezing the finished ones.
"""
from __future__ import annotations

from typing import Optional, Sequence

from tgfn.array import Array
from tgfn.uop.body import Body, Call, Cond, CustomJVP, CustomVJP, Scan, While, call_outputs, close, substitute_many
from tgfn.uop.ops import Ops, UOp

Ct = Optional[Array]


def _fresh(avals: Sequence[tuple]) -> list[UOp]:
  from tgfn.transforms.trace import placeholder
  return [placeholder(shape, dt, None) for shape, dt in avals]


def _zeros(shape: tuple[int, ...], dt) -> Array: return Array.const(0, dt, shape)
def _is_float(dt) -> bool: return dt is not None and dt.is_inexact
def _pick(xs: Sequence, mask: Sequence[bool]) -> list: return [x for x, m in zip(xs, mask) if m]


def _uops(xs: Sequence) -> list[UOp]: return [x.uop if isinstance(x, Array) else x for x in xs]


def _backward(outs: Sequence[UOp], cts: Sequence[Ct], wrt: Sequence[UOp]) -> list[Ct]:
  from tgfn.transforms.grad import backward
  pairs = [(o, ct) for o, ct in zip(outs, cts) if ct is not None and _is_float(o.dtype)]
  if not pairs or not wrt: return [None] * len(wrt)
  return backward([o for o, _ in pairs], [ct.astype(o.dtype) for o, ct in pairs], wrt)


def _or_zeros(values: Sequence[Ct], likes: Sequence[UOp]) -> list[Array]:
  return [v if v is not None else _zeros(u.shape, u.dtype) for v, u in zip(values, likes)]


# ============================================================================================ reverse mode
def call_vjp(node: UOp, cts: dict[int, Array]) -> list[Ct]:
  """Cotangents of a call's sources given cotangents of (some of) its outputs."""
  spec = node.arg[0]
  srcs = list(node.src)
  if isinstance(spec, (CustomVJP, CustomJVP)):
    from tgfn.transforms.custom_rules import custom_vjp
    return custom_vjp(node, cts)
  if isinstance(spec, Scan): return _scan_vjp(spec, srcs, cts)
  if isinstance(spec, Cond): return _cond_vjp(spec, srcs, cts)
  if isinstance(spec, Call): return _call_vjp(spec, srcs, cts)
  if isinstance(spec, While):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic "
                     "start/stop values. Try using lax.scan, or lax.fori_loop with static (Python int) start/stop.")
  raise NotImplementedError(f"no VJP rule for {type(spec).__name__} calls")


def _vjp_body(body: Body, diff_in: Sequence[bool], ct_out: Sequence[bool]) -> Body:
  """inputs (body inputs, cotangents of the outputs in ct_out) -> cotangents of the inputs in diff_in."""
  holders = _fresh(body.in_avals)
  outs = body.instantiate(holders)
  ct_h = _fresh(_pick(body.out_avals, ct_out))
  it = iter(ct_h)
  cts = [Array(next(it)) if m else None for m in ct_out]
  wrt = _pick(holders, diff_in)
  return close(holders + ct_h, _uops(_or_zeros(_backward(outs, cts, wrt), wrt)))


def _cond_vjp(spec: Cond, srcs: list[UOp], cts: dict[int, Array]) -> list[Ct]:
  ops = srcs[1:]
  diff_in = [_is_float(u.dtype) for u in ops]
  ct_out = [i in cts and _is_float(dt) for i, (_, dt) in enumerate(spec.out_avals)]
  bodies = tuple(_vjp_body(b, diff_in, ct_out) for b in spec.branches)
  ct_vals = [cts[i].uop for i, m in enumerate(ct_out) if m]
  outs = iter(Array(u) for u in call_outputs(Cond(bodies), [srcs[0]] + ops + ct_vals))
  return [None] + [next(outs) if m else None for m in diff_in]


def _call_vjp(spec: Call, srcs: list[UOp], cts: dict[int, Array]) -> list[Ct]:
  outs_ct = [cts.get(i) for i in range(len(spec.out_avals))]
  diff_in = [_is_float(u.dtype) for u in srcs]
  if spec.name != "checkpoint" or spec.policy == "everything":  # no barrier wanted: differentiate it inlined
    return _or_none(_backward(spec.body.instantiate(srcs), outs_ct, srcs), diff_in)
  ct_out = [ct is not None and _is_float(dt) for ct, (_, dt) in zip(outs_ct, spec.out_avals)]
  ct_vals = [ct.uop for ct, m in zip(outs_ct, ct_out) if m]
  if not spec.saved:  # recompute everything in the backward body: its own node, never merged with the forward
    bwd = _vjp_body(spec.body, diff_in, ct_out)
    results = iter(Array(u) for u in call_outputs(Call(bwd, "checkpoint backward"), srcs + ct_vals))
    return [next(results) if m else None for m in diff_in]
  # save the policy's values: a forward call that also returns them, a backward body that reads them
  n = len(spec.body.outputs)
  forward = Body(spec.body.inputs, spec.body.outputs + tuple(_distinct(spec.saved, spec.body.outputs)))
  saved_vals = call_outputs(Call(forward, "checkpoint forward"), srcs)[n:]
  bwd = _saved_vjp_body(spec.body, spec.saved, diff_in, ct_out)
  results = iter(Array(u) for u in call_outputs(Call(bwd, "checkpoint backward"), srcs + list(saved_vals) + ct_vals))
  return [next(results) if m else None for m in diff_in]


def _distinct(extra: Sequence[UOp], outputs: Sequence[UOp]) -> list[UOp]:
  """`extra` values as more body outputs, each a computed node of its own (as close() makes outputs)."""
  out: list[UOp] = []
  for k, s in enumerate(extra):
    if s in outputs or s in out or s.op in (Ops.PLACEHOLDER, Ops.BUFFER, Ops.CONST):
      s = UOp(Ops.CONTIGUOUS, s.dtype, (s,), ("extra output", k))
    out.append(s)
  return out


def _unwrap(u: UOp) -> UOp:
  """The value behind an output copy made by close() or _distinct."""
  return u.src[0] if u.op is Ops.CONTIGUOUS and isinstance(u.arg, tuple) else u


def _saved_vjp_body(body: Body, saved: Sequence[UOp], diff_in: Sequence[bool], ct_out: Sequence[bool]) -> Body:
  """inputs (body inputs, saved values, output cotangents) -> input cotangents. The saved nodes are
  read, not recomputed: the outputs are differentiated with each saved node standing for its value,
  then each saved node's cotangent is pulled back through its own (recomputed) sub-graph, last first."""
  holders, saved_h = _fresh(body.in_avals), _fresh([(s.shape, s.dtype) for s in saved])
  ct_h = _fresh(_pick(body.out_avals, ct_out))
  it = iter(ct_h)
  cts = [Array(next(it)) if m else None for m in ct_out]
  mapping = dict(zip(body.inputs, holders)) | dict(zip(saved, saved_h))
  wrt = _pick(holders, diff_in)
  grads = _backward(substitute_many(body.outputs, mapping), cts, wrt + saved_h)
  g_in, g_saved = grads[:len(wrt)], grads[len(wrt):]
  for j in range(len(saved) - 1, -1, -1):  # saved is in graph order: a later node only reads earlier ones
    if g_saved[j] is None: continue
    below = {k: v for k, v in mapping.items() if k is not saved[j]}
    pulled = _backward(substitute_many([saved[j]], below), [g_saved[j]], wrt + saved_h[:j])
    g_in = [_add(a, b) for a, b in zip(g_in, pulled[:len(wrt)])]
    g_saved[:j] = [_add(a, b) for a, b in zip(g_saved[:j], pulled[len(wrt):])]
  return close(holders + saved_h + ct_h, _uops(_or_zeros(g_in, wrt)))


def _add(a: Ct, b: Ct) -> Ct: return b if a is None else a if b is None else a + b


def _or_none(values: Sequence[Ct], mask: Sequence[bool]) -> list[Ct]:
  return [v if m else None for v, m in zip(values, mask)]


def _scan_vjp(spec: Scan, srcs: list[UOp], cts: dict[int, Array]) -> list[Ct]:
  body, nk, nc, n = spec.body, spec.n_consts, spec.n_carry, spec.length
  consts, init, xs = srcs[:nk], srcs[nk:nk + nc], srcs[nk + nc:]
  ny = len(body.outputs) - nc
  fk, fc, fx = ([_is_float(u.dtype) for u in part] for part in (consts, init, xs))
  fy = [nc + i in cts and _is_float(body.out_avals[nc + i][1]) for i in range(ny)]
  # forward again, stacking each step's input carry (the backward pass recomputes a step from it)
  aug = Scan(Body(body.inputs, body.outputs + tuple(_distinct(body.inputs[nk:nk + nc], body.outputs))),
             nk, nc, n, spec.reverse)
  stacked = call_outputs(aug, srcs)[nc + ny:]
  # backward body: (consts | ct carry, ct consts so far | stacked carry, xs, ct ys) -> (ct carry', ct consts' | ct xs)
  hk, hc, hx = _fresh(body.in_avals[:nk]), _fresh(body.in_avals[nk:nk + nc]), _fresh(body.in_avals[nk + nc:])
  h_ct_c = _fresh(_pick(body.out_avals[:nc], fc))
  h_acc = _fresh(_pick(body.in_avals[:nk], fk))
  h_ct_y = _fresh(_pick(body.out_avals[nc:], fy))
  outs = body.instantiate(hk + hc + hx)
  it_c, it_y = iter(h_ct_c), iter(h_ct_y)
  out_cts = [Array(next(it_c)) if m else None for m in fc] + [Array(next(it_y)) if m else None for m in fy]
  wrt_k, wrt_c, wrt_x = _pick(hk, fk), _pick(hc, fc), _pick(hx, fx)
  grads = _backward(outs, out_cts, wrt_k + wrt_c + wrt_x)
  g_k, g_c, g_x = grads[:len(wrt_k)], grads[len(wrt_k):len(wrt_k) + len(wrt_c)], grads[len(wrt_k) + len(wrt_c):]
  new_carry = _or_zeros(g_c, wrt_c) + [Array(acc) + g if g is not None else Array(acc) for acc, g in zip(h_acc, g_k)]
  bwd_body = close(hk + h_ct_c + h_acc + hc + hx + h_ct_y, _uops(new_carry + _or_zeros(g_x, wrt_x)))
  ct_carry_init = [cts[i].uop if i in cts else _zeros(u.shape, u.dtype).uop for i, u in enumerate(init) if fc[i]]
  acc_init = [_zeros(u.shape, u.dtype).uop for u in _pick(consts, fk)]
  ct_ys = [cts[nc + i].uop for i in range(ny) if fy[i]]
  back = Scan(bwd_body, nk, len(h_ct_c) + len(h_acc), n, not spec.reverse)
  res = [Array(u) for u in call_outputs(back, consts + ct_carry_init + acc_init + list(stacked) + xs + ct_ys)]
  it_c0, it_k0, it_x = iter(res[:len(h_ct_c)]), iter(res[len(h_ct_c):len(h_ct_c) + len(h_acc)]), iter(res[len(h_ct_c) + len(h_acc):])
  return ([next(it_k0) if m else None for m in fk] + [next(it_c0) if m else None for m in fc] +
          [next(it_x) if m else None for m in fx])


# ============================================================================================ forward mode
def call_jvp(node: UOp, tangents: Sequence[Ct]) -> list[Ct]:
  """Tangents of every output of a call given its sources' tangents (None: zero)."""
  spec, srcs = node.arg[0], list(node.src)
  if isinstance(spec, (CustomVJP, CustomJVP)):
    from tgfn.transforms.custom_rules import custom_jvp
    return custom_jvp(node, tangents)
  if isinstance(spec, Call):
    from tgfn.transforms.jvp import forward
    outs = spec.body.instantiate(srcs)
    return forward(outs, {s: t for s, t in zip(srcs, tangents) if t is not None})
  if isinstance(spec, Cond): return _cond_jvp(spec, srcs, tangents)
  if isinstance(spec, Scan): return _scan_jvp(spec, srcs, tangents)
  if isinstance(spec, While): return _while_jvp(spec, srcs, tangents)
  raise NotImplementedError(f"no JVP rule for {type(spec).__name__} calls")


def _jvp_outputs(body: Body, holders: list[UOp], tangent_holders: dict[UOp, UOp], want: Sequence[bool]) -> tuple[list[UOp], list[UOp]]:
  """The body's outputs on `holders`, and the tangents of the outputs in `want` (zeros where none flows)."""
  from tgfn.transforms.jvp import forward
  outs = body.instantiate(holders)
  tangents = forward(outs, {h: Array(t) for h, t in tangent_holders.items()})
  return outs, _uops(_or_zeros(_pick(tangents, want), _pick(outs, want)))


def _cond_jvp(spec: Cond, srcs: list[UOp], tangents: Sequence[Ct]) -> list[Ct]:
  ops, ts = srcs[1:], list(tangents[1:])
  tin = [t is not None and _is_float(u.dtype) for t, u in zip(ts, ops)]
  want = [_is_float(dt) for _, dt in spec.out_avals]
  bodies = []
  for branch in spec.branches:
    holders = _fresh(branch.in_avals)
    th = _fresh(_pick(branch.in_avals, tin))
    _, touts = _jvp_outputs(branch, holders, dict(zip(_pick(holders, tin), th)), want)
    bodies.append(close(holders + th, touts))
  outs = iter(Array(u) for u in call_outputs(Cond(tuple(bodies)), [srcs[0]] + ops + _uops(_pick(ts, tin))))
  return [next(outs) if m else None for m in want]


def _scan_jvp(spec: Scan, srcs: list[UOp], tangents: Sequence[Ct]) -> list[Ct]:
  body, nk, nc = spec.body, spec.n_consts, spec.n_carry
  parts = (slice(0, nk), slice(nk, nk + nc), slice(nk + nc, len(srcs)))
  tk, tc, tx = ([t is not None and _is_float(u.dtype) for t, u in zip(tangents[p], srcs[p])] for p in parts)
  tc = [_is_float(u.dtype) for u in srcs[parts[1]]]  # every float carry has a tangent (zero or not)
  ny = len(body.outputs) - nc
  want_y = [_is_float(dt) for _, dt in body.out_avals[nc:]]
  hk, hc, hx = (_fresh(body.in_avals[p]) for p in parts)
  thk, thc, thx = _fresh(_pick(body.in_avals[parts[0]], tk)), _fresh(_pick(body.in_avals[parts[1]], tc)), \
    _fresh(_pick(body.in_avals[parts[2]], tx))
  seeds = dict(zip(_pick(hk, tk), thk)) | dict(zip(_pick(hc, tc), thc)) | dict(zip(_pick(hx, tx), thx))
  outs, touts = _jvp_outputs(body, hk + hc + hx, seeds, tc + want_y)
  n_tc = sum(tc)
  new_body = close(hk + thk + hc + thc + hx + thx, outs[:nc] + touts[:n_tc] + outs[nc:] + touts[n_tc:])
  t_init = _uops(_or_zeros(_pick(tangents[parts[1]], tc), _pick(srcs[parts[1]], tc)))
  args = srcs[parts[0]] + _uops(_pick(tangents[parts[0]], tk)) + srcs[parts[1]] + t_init + \
    srcs[parts[2]] + _uops(_pick(tangents[parts[2]], tx))
  res = [Array(u) for u in call_outputs(Scan(new_body, nk + len(thk), nc + n_tc, spec.length, spec.reverse), args)]
  t_carry, t_ys = iter(res[nc:nc + n_tc]), iter(res[nc + n_tc + ny:])
  return [next(t_carry) if m else None for m in tc] + [next(t_ys) if m else None for m in want_y]


def _while_jvp(spec: While, srcs: list[UOp], tangents: Sequence[Ct]) -> list[Ct]:
  kc, kb = spec.n_cond_consts, spec.n_body_consts
  cc, bc, init = srcs[:kc], srcs[kc:kc + kb], srcs[kc + kb:]
  tb = [t is not None and _is_float(u.dtype) for t, u in zip(tangents[kc:kc + kb], bc)]
  tc = [_is_float(u.dtype) for u in init]
  carry_avals = spec.body.in_avals[kb:]
  # the predicate ignores the tangents
  hcc, hcarry, thc = _fresh(spec.cond.in_avals[:kc]), _fresh(carry_avals), _fresh(_pick(carry_avals, tc))
  cond = close(hcc + hcarry + thc, spec.cond.instantiate(hcc + hcarry))
  hbc, hb_carry = _fresh(spec.body.in_avals[:kb]), _fresh(carry_avals)
  thb, thb_carry = _fresh(_pick(spec.body.in_avals[:kb], tb)), _fresh(_pick(carry_avals, tc))
  seeds = dict(zip(_pick(hbc, tb), thb)) | dict(zip(_pick(hb_carry, tc), thb_carry))
  outs, touts = _jvp_outputs(spec.body, hbc + hb_carry, seeds, tc)
  body = close(hbc + thb + hb_carry + thb_carry, outs + touts)
  t_init = _uops(_or_zeros(_pick(tangents[kc + kb:], tc), _pick(init, tc)))
  args = cc + bc + _uops(_pick(tangents[kc:kc + kb], tb)) + init + t_init
  res = [Array(u) for u in call_outputs(While(cond, body, kc, kb + len(thb)), args)]
  t_out = iter(res[len(init):])
  return [next(t_out) if m else None for m in tc]


# ============================================================================================ vmap
def _batch_body(body: Body, flags: Sequence[bool], size: int, force: Optional[Sequence[bool]] = None) -> tuple[Body, list[bool]]:
  """The body over inputs batched where `flags` says (batch axis leading), and which outputs come out
  batched; outputs in `force` are batched even if they do not depend on a batched input."""
  from tgfn.transforms.vmap import _lead, batch_graph
  holders = [_fresh([((size,) + s if f else s, dt)])[0] for (s, dt), f in zip(body.in_avals, flags)]
  results = batch_graph(list(body.outputs), {c: Array(h) for c, h, f in zip(body.inputs, holders, flags) if f}, size)
  out_flags = [b or bool(force and force[i]) for i, (_, b) in enumerate(results)]
  outs = [_lead(a, b, size).uop if f else a.uop for (a, b), f in zip(results, out_flags)]
  unbatched = {c: h for c, h, f in zip(body.inputs, holders, flags) if not f}
  return close(holders, substitute_many(outs, unbatched) if unbatched else outs), out_flags


def call_batch(node: UOp, srcs: Sequence[tuple[Array, bool]], size: int) -> list[tuple[Array, bool]]:
  """Every output of a call, batched: (value, is batched) pairs (batch axis leading)."""
  spec = node.arg[0]
  if isinstance(spec, (CustomVJP, CustomJVP)):
    from tgfn.transforms.custom_rules import custom_batch
    return custom_batch(node, srcs, size)
  if isinstance(spec, Call):  # the saved nodes are batched along as extra outputs, then split off again
    n = len(spec.body.outputs)
    full = Body(spec.body.inputs, spec.body.outputs + tuple(_distinct(spec.saved, spec.body.outputs)))
    body, out_flags = _batch_body(full, [b for _, b in srcs], size)
    batched = Call(Body(body.inputs, body.outputs[:n]), spec.name, spec.policy, tuple(_unwrap(u) for u in body.outputs[n:]))
    outs = call_outputs(batched, [a.uop for a, _ in srcs])
    return [(Array(u), f) for u, f in zip(outs, out_flags)]
  if isinstance(spec, Cond): return _cond_batch(spec, srcs, size)
  if isinstance(spec, Scan): return _scan_batch(spec, srcs, size)
  if isinstance(spec, While): return _while_batch(spec, srcs, size)
  raise NotImplementedError(f"no batching rule for {type(spec).__name__} calls")


def _cond_batch(spec: Cond, srcs: Sequence[tuple[Array, bool]], size: int) -> list[tuple[Array, bool]]:
  import tgfn.numpy as tnp
  from tgfn.transforms.vmap import _lead, batch_graph
  (index, index_batched), ops = srcs[0], srcs[1:]
  if index_batched:  # each member takes its own branch: run them all, select per member
    led = {c: _lead(a, b, size) for c, (a, b) in zip(spec.branches[0].inputs, ops)}
    results = []
    for branch in spec.branches:
      env = {c: led[c0] for c, c0 in zip(branch.inputs, spec.branches[0].inputs)}
      results.append([_lead(a, b, size) for a, b in batch_graph(list(branch.outputs), env, size)])
    out = results[-1]
    index = tnp.clip(index, 0, len(spec.branches) - 1)  # as the runner clamps it
    for k in range(len(spec.branches) - 2, -1, -1):
      out = [tnp.where((index == k)._reshape((size,) + (1,) * (r.ndim - 1)), r, o).astype(o.dtype)
             for r, o in zip(results[k], out)]
    return [(o, True) for o in out]
  flags = [b for _, b in ops]
  union = [False] * len(spec.out_avals)
  for branch in spec.branches: union = [u or f for u, f in zip(union, _batch_body(branch, flags, size)[1])]
  bodies = tuple(_batch_body(b, flags, size, union)[0] for b in spec.branches)
  outs = call_outputs(Cond(bodies), [index.uop] + [a.uop for a, _ in ops])
  return [(Array(u), f) for u, f in zip(outs, union)]


def _carry_fixed_point(body: Body, n_before: int, flags: list[bool], size: int, n_carry: int) -> list[bool]:
  """Carry batch flags such that one step of the body keeps every batched carry batched."""
  carry = flags[n_before:n_before + n_carry]
  while True:
    _, out = _batch_body(body, flags[:n_before] + carry + flags[n_before + n_carry:], size)
    new = [c or o for c, o in zip(carry, out[:n_carry])]
    if new == carry: return carry
    carry = new


def _scan_batch(spec: Scan, srcs: Sequence[tuple[Array, bool]], size: int) -> list[tuple[Array, bool]]:
  from tgfn.transforms.vmap import _lead
  nk, nc = spec.n_consts, spec.n_carry
  flags = [b for _, b in srcs]
  carry = _carry_fixed_point(spec.body, nk, flags, size, nc)
  flags = flags[:nk] + carry + flags[nk + nc:]
  body, out_flags = _batch_body(spec.body, flags, size, carry + [False] * (len(spec.body.outputs) - nc))
  args = [a for a, _ in srcs[:nk]] + [_lead(a, b, size) if f else a for (a, b), f in zip(srcs[nk:nk + nc], carry)]
  args += [_swap01(a) if b else a for a, b in srcs[nk + nc:]]  # (batch, length, ...) -> (length, batch, ...)
  outs = [Array(u) for u in call_outputs(Scan(body, nk, nc, spec.length, spec.reverse), [a.uop for a in args])]
  return [(o, f) for o, f in zip(outs[:nc], carry)] + \
    [(_swap01(o) if f else o, f) for o, f in zip(outs[nc:], out_flags[nc:])]


def _swap01(a: Array) -> Array: return a._permute((1, 0) + tuple(range(2, a.ndim)))


def _while_batch(spec: While, srcs: Sequence[tuple[Array, bool]], size: int) -> list[tuple[Array, bool]]:
  import tgfn.numpy as tnp
  from tgfn.transforms.vmap import _lead
  kc, kb = spec.n_cond_consts, spec.n_body_consts
  flags = [b for _, b in srcs]
  cc_f, bc_f = flags[:kc], flags[kc:kc + kb]
  carry = _carry_fixed_point(spec.body, kb, flags[kc:], size, len(flags) - kc - kb)
  _, pred_flag = _batch_body(spec.cond, cc_f + carry, size)
  if pred_flag[0]: carry = [True] * len(carry)  # members finish at different steps: every carry is per member
  cond, _ = _batch_body(spec.cond, cc_f + carry, size)
  body, _ = _batch_body(spec.body, bc_f + carry, size, [True] * len(carry) if pred_flag[0] else carry)
  args = [a for a, _ in srcs[:kc + kb]] + [_lead(a, b, size) if f else a for (a, b), f in zip(srcs[kc + kb:], carry)]
  if pred_flag[0]:
    # run while any member goes on; a finished member keeps its carry: where(its predicate, new, old)
    hcc, hc = _fresh(cond.in_avals[:kc]), _fresh(cond.in_avals[kc:])
    any_cond = close(hcc + hc, [Array(cond.instantiate(hcc + hc)[0]).any().uop])
    hcc2, hbc, hc2 = _fresh(cond.in_avals[:kc]), _fresh(body.in_avals[:kb]), _fresh(body.in_avals[kb:])
    going = Array(cond.instantiate(hcc2 + hc2)[0])
    new = body.instantiate(hbc + hc2)
    kept = [tnp.where(going._reshape((size,) + (1,) * (len(n.shape) - 1)), Array(n), Array(old)).astype(n.dtype).uop
            for n, old in zip(new, hc2)]
    body = close(hcc2 + hbc + hc2, kept)
    spec2 = While(any_cond, body, kc, kc + kb)
    args = args[:kc] + args[:kc] + args[kc:]
  else: spec2 = While(cond, body, kc, kb)
  outs = call_outputs(spec2, [a.uop for a in args])
  return [(Array(u), f) for u, f in zip(outs, carry)]
