"""Sub-graphs: a `Body` is a closed graph with explicit inputs, and a `CALL` node runs one.

A body's inputs are *canonical* placeholders (numbered by position), its outputs graphs over them and
constants only. Closed means nothing else leaks in: values a traced function captures from outside
(an outer placeholder, a realized buffer, work on them) are hoisted out and become extra inputs
(`close`). Because UOps are hash-consed and inputs are numbered, two bodies of the same structure are
the same value, so bodies key caches: a body is compiled once per device however often it is traced.

A CALL node is one output of a call: `UOp(Ops.CALL, dtype, inputs, (spec, output index))`, where the
spec (`Call`, `Cond`, `Scan`, `While`, `CustomVJP`, `CustomJVP`) holds the bodies and static parameters. The outputs of one call
are the CALL nodes with the same spec and sources; they are computed together. Graph walks (toposort,
substitute, graph_rewrite) never enter a body: a body only sees its inputs, so rewriting the graph
around a call never needs to rewrite the body.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tgfn.uop.ops import GroupOp, Ops, UOp, substitute, toposort

Aval = tuple[tuple[int, ...], Any]  # (shape, dtype)


def canonical_input(k: int, like: UOp) -> UOp:
  """The placeholder standing for input k of a body (same shape, dtype, device as `like`)."""
  return UOp(Ops.PLACEHOLDER, like.dtype, (), (("body input", k), like.shape, like.device))


def is_canonical_input(u: UOp) -> bool:
  return u.op is Ops.PLACEHOLDER and isinstance(u.arg[0], tuple) and u.arg[0][0] == "body input"


def substitute_many(roots: Sequence[UOp], mapping: dict[UOp, UOp]) -> list[UOp]:
  """Replace nodes by `mapping` everywhere under `roots` (one pass: replacements are not rewritten). A
  rebuilt node keeps the user's line of the node it replaces (DEBUG_NANS and errors inside a body name it)."""
  done: dict[UOp, UOp] = {}
  return [substitute(r, mapping, done) for r in roots]


@dataclass(frozen=True)
class Body:
  inputs: tuple[UOp, ...]    # canonical placeholders, input k is canonical_input(k, ...)
  outputs: tuple[UOp, ...]   # distinct computed nodes over the inputs and constants

  @property
  def in_avals(self) -> tuple[Aval, ...]: return tuple((u.shape, u.dtype) for u in self.inputs)
  @property
  def out_avals(self) -> tuple[Aval, ...]: return tuple((u.shape, u.dtype) for u in self.outputs)

  def instantiate(self, args: Sequence[UOp]) -> list[UOp]:
    """The outputs as graphs over `args` (one node per input): inlining the body."""
    if len(args) != len(self.inputs): raise ValueError(f"body takes {len(self.inputs)} inputs, got {len(args)}")
    return substitute_many(self.outputs, dict(zip(self.inputs, args)))

  def __repr__(self) -> str: return f"Body({len(self.inputs)} inputs -> {list(self.out_avals)})"


def captured_values(inputs: Sequence[UOp], outputs: Sequence[UOp]) -> list[UOp]:
  """The values the graph from `inputs` to `outputs` takes from outside: maximal subgraphs that do not
  depend on the inputs and read a buffer or a placeholder (constant-only work stays in the body).
  Movement ops stay inside, so a broadcast of a captured weight is not materialized at full size."""
  input_set = set(inputs)
  depends: dict[UOp, bool] = {}
  reads_data: dict[UOp, bool] = {}
  order = toposort(list(outputs))
  for n in order:
    depends[n] = n in input_set or any(depends[s] for s in n.src)
    reads_data[n] = n.op in (Ops.BUFFER, Ops.PLACEHOLDER) or any(reads_data[s] for s in n.src)

  def hoist_point(n: UOp) -> Optional[UOp]:
    while n.op in GroupOp.Movement: n = n.src[0]
    return n if reads_data[n] else None

  out: dict[UOp, None] = {}
  for n in order:
    if not depends[n]: continue
    for s in n.src:
      if not depends[s] and (h := hoist_point(s)) is not None: out[h] = None
  for o in outputs:
    if not depends[o] and (h := hoist_point(o)) is not None: out[h] = None
  return list(out)


def close(inputs: Sequence[UOp], outputs: Sequence[UOp]) -> Body:
  """The body computing `outputs` from `inputs` (placeholders, and the captured values found by
  captured_values), with canonical inputs. Each output becomes a distinct computed node (an input passed
  through, or an output repeated, is copied), so running a body writes every output into its own buffer."""
  canon = [canonical_input(k, u) for k, u in enumerate(inputs)]
  new_outputs = substitute_many(outputs, dict(zip(inputs, canon)))
  seen: set[UOp] = set()
  final = []
  for k, o in enumerate(new_outputs):
    if o in seen or o.op in (Ops.PLACEHOLDER, Ops.BUFFER, Ops.CONST):
      o = UOp(Ops.CONTIGUOUS, o.dtype, (o,), ("body output", k))
    seen.add(o)
    final.append(o)
  leaked = [u for u in toposort(final) if u.op is Ops.BUFFER or (u.op is Ops.PLACEHOLDER and u not in canon)]
  if leaked: raise ValueError(f"a body reads a value it does not take as an input: {leaked[0].op.name} {leaked[0].shape}")
  return Body(tuple(canon), tuple(final))


# ---- call specs: what a CALL node runs. Frozen dataclasses: equal structure, equal (hashable) spec.
class CallSpec:
  """Base of the call kinds. `out_avals` are the call's outputs; `n_inputs` its sources."""
  bodies: tuple[Body, ...]
  @property
  def out_avals(self) -> tuple[Aval, ...]: raise NotImplementedError
  def in_avals(self) -> tuple[Aval, ...]: raise NotImplementedError


@dataclass(frozen=True)
class Call(CallSpec):
  """Run `body` once on the inputs. `name` says what made it ("checkpoint", ...). For a checkpoint,
  `policy` is its policy's kind and `saved` the body's nodes that policy keeps for the backward pass."""
  body: Body
  name: str = "call"
  policy: Optional[str] = None
  saved: tuple[UOp, ...] = ()

  @property
  def bodies(self) -> tuple[Body, ...]: return (self.body,)
  @property
  def out_avals(self) -> tuple[Aval, ...]: return self.body.out_avals
  def in_avals(self) -> tuple[Aval, ...]: return self.body.in_avals


@dataclass(frozen=True)
class Cond(CallSpec):
  """Inputs: (index int32 scalar, *operands). Runs branches[clamp(index)] on the operands."""
  branches: tuple[Body, ...]

  @property
  def bodies(self) -> tuple[Body, ...]: return self.branches
  @property
  def out_avals(self) -> tuple[Aval, ...]: return self.branches[0].out_avals
  def in_avals(self) -> tuple[Aval, ...]:
    from tgfn.dtype import dtypes
    return (((), dtypes.int32),) + self.branches[0].in_avals


@dataclass(frozen=True)
class Scan(CallSpec):
  """Inputs: (*consts, *init carry, *xs stacked on a leading axis of `length`). Body: (consts, carry,
  x slices) -> (new carry, y slices). Outputs: (final carry, *ys stacked). `reverse` walks i = length-1..0."""
  body: Body
  n_consts: int
  n_carry: int
  length: int
  reverse: bool = False

  @property
  def bodies(self) -> tuple[Body, ...]: return (self.body,)
  @property
  def n_xs(self) -> int: return len(self.body.inputs) - self.n_consts - self.n_carry
  @property
  def out_avals(self) -> tuple[Aval, ...]:
    outs = self.body.out_avals
    return outs[:self.n_carry] + tuple(((self.length,) + s, dt) for s, dt in outs[self.n_carry:])
  def in_avals(self) -> tuple[Aval, ...]:
    ins = self.body.in_avals
    k = self.n_consts + self.n_carry
    return ins[:k] + tuple(((self.length,) + s, dt) for s, dt in ins[k:])


@dataclass(frozen=True)
class While(CallSpec):
  """Inputs: (*cond consts, *body consts, *init carry). While cond(cond consts, carry) is true,
  carry = body(body consts, carry). Outputs: the final carry."""
  cond: Body
  body: Body
  n_cond_consts: int
  n_body_consts: int

  @property
  def bodies(self) -> tuple[Body, ...]: return (self.cond, self.body)
  @property
  def out_avals(self) -> tuple[Aval, ...]: return self.body.out_avals
  def in_avals(self) -> tuple[Aval, ...]:
    return self.cond.in_avals[:self.n_cond_consts] + self.body.in_avals


@dataclass(frozen=True)
class CustomVJP(CallSpec):
  """A function with a user-defined reverse-mode rule (`custom_vjp`). Inputs: (*args, *captured). Runs
  `fun`; the VJP runs `fwd` (same inputs -> residuals) and then `bwd` ((*args, *captured, *residuals,
  *cotangents of the float outputs) -> cotangents of the float args). `n_args` inputs are arguments,
  the rest captured values (they get no cotangent, as in JAX)."""
  fun: Body
  fwd: Body
  bwd: Body
  n_args: int
  name: str

  @property
  def bodies(self) -> tuple[Body, ...]: return (self.fun, self.fwd, self.bwd)
  @property
  def out_avals(self) -> tuple[Aval, ...]: return self.fun.out_avals
  def in_avals(self) -> tuple[Aval, ...]: return self.fun.in_avals


@dataclass(frozen=True)
class CustomJVP(CallSpec):
  """A function with a user-defined forward-mode rule (`custom_jvp`). Inputs: (*args, *captured). Runs
  `fun`; `jvp` maps (*args, *captured, *tangents of the float args) -> tangents of the float outputs,
  linear in the tangents, so reverse mode is its transpose."""
  fun: Body
  jvp: Body
  n_args: int
  name: str

  @property
  def bodies(self) -> tuple[Body, ...]: return (self.fun, self.jvp)
  @property
  def out_avals(self) -> tuple[Aval, ...]: return self.fun.out_avals
  def in_avals(self) -> tuple[Aval, ...]: return self.fun.in_avals


def call_outputs(spec: CallSpec, inputs: Sequence[UOp]) -> list[UOp]:
  """The CALL nodes of one call of `spec` on `inputs` (one per output)."""
  expected = spec.in_avals()
  got = tuple((u.shape, u.dtype) for u in inputs)
  if got != expected:
    raise ValueError(f"{type(spec).__name__} call takes inputs {_fmt(expected)}, got {_fmt(got)}")
  return [UOp(Ops.CALL, dt, tuple(inputs), (spec, i)) for i, (_, dt) in enumerate(spec.out_avals)]


def inlines(spec: CallSpec) -> bool:
  """Whether the scheduler runs a call's body inline (fused with its neighbours): a jitted function called
  inside a trace and a custom-derivative function are ordinary code once the transforms are done; a
  checkpoint's calls keep their boundary (it is the barrier) and loops and branches run as calls."""
  if isinstance(spec, (CustomVJP, CustomJVP)): return True
  return isinstance(spec, Call) and not spec.name.startswith("checkpoint")


def inline_calls(roots: Sequence[UOp]) -> list[UOp]:
  """`roots` with every call that `inlines` replaced by its body's graph on the call's inputs (nested
  ones too). A body's PARAMs (Python scalars where it was traced) become CONSTs: the body is fixed, and
  the caller's kernels take only the caller's own PARAMs as arguments."""
  done: dict[UOp, UOp] = {}
  order = toposort(list(roots))
  if not any(n.op is Ops.CALL and inlines(n.arg[0]) for n in order): return list(roots)
  for node in order:
    new_src = tuple(done[s] for s in node.src)
    if node.op is Ops.CALL and inlines(node.arg[0]):
      spec, index = node.arg
      body = spec.bodies[0]
      params = {u: UOp.const(u.dtype, u.arg) for u in toposort(list(body.outputs)) if u.op is Ops.PARAM}
      inlined = substitute_many([body.outputs[index]], {**dict(zip(body.inputs, new_src)), **params})[0]
      done[node] = inline_calls([inlined])[0]
    else: done[node] = node if all(a is b for a, b in zip(new_src, node.src)) else node.replace(src=new_src)
  out: list[UOp] = []
  for r in roots:  # a root stays a distinct computed node: callers name results by their roots
    u = done[r]
    if u is not r and (u in out or u in roots or u.op in (Ops.PLACEHOLDER, Ops.BUFFER, Ops.CONST)):
      u = UOp(Ops.CONTIGUOUS, u.dtype, (u,), ("inlined output", len(out)))
    out.append(u)
  return out


def siblings(node: UOp) -> list[UOp]:
  """Every output of the call `node` is one output of."""
  spec = node.arg[0]
  return [UOp(Ops.CALL, dt, node.src, (spec, i)) for i, (_, dt) in enumerate(spec.out_avals)]


def _fmt(avals: Sequence[Aval]) -> str: return "[" + ", ".join(f"{dt.name}{list(s)}" for s, dt in avals) + "]"
