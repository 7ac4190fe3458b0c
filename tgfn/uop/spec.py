"""What a well-formed graph is at each stage. `SPEC=1` checks every graph the engine builds
(the test suite turns it on); a violation raises SpecError naming the node and the broken rule."""
from __future__ import annotations

import math

from tgfn.dtype import dtypes
from tgfn.helpers import settings
from tgfn.uop.ops import GroupOp, Ops, UOp, toposort


class SpecError(AssertionError):
  pass


def spec_enabled() -> bool: return settings.SPEC


def _fail(node: UOp, rule: str) -> None:
  raise SpecError(f"malformed {node.op.name} node: {rule}\n  {node!r}")


def _check_alu_dtypes(u: UOp) -> None:
  if u.op in (Ops.CAST, Ops.BITCAST):
    if u.op is Ops.BITCAST and u.dtype.itemsize != u.src[0].dtype.itemsize:
      _fail(u, f"BITCAST between sizes {u.src[0].dtype.itemsize} and {u.dtype.itemsize}")
    return
  values = u.src[1:] if u.op is Ops.WHERE else u.src
  if u.op is Ops.WHERE and u.src[0].dtype is not dtypes.bool: _fail(u, "WHERE condition must be bool")
  if len({s.dtype for s in values}) != 1: _fail(u, f"sources have different dtypes {[s.dtype for s in values]}")
  expected = dtypes.bool if u.op in GroupOp.Comparison else values[0].dtype
  if u.dtype is not expected: _fail(u, f"dtype {u.dtype} but the op produces {expected}")


_verified_bodies: set = set()


def verify_body(body) -> None:
  """A body (tgfn/uop/body.py) is a well-formed tensor graph over its own canonical inputs only."""
  if body in _verified_bodies: return
  from tgfn.uop.body import canonical_input
  for k, u in enumerate(body.inputs):
    if u is not canonical_input(k, u): _fail(u, f"body input {k} is not the canonical placeholder of its position")
  for o in body.outputs: verify_tensor_graph(o, frozenset(body.inputs))
  _verified_bodies.add(body)


def _check_call(u: UOp) -> None:
  spec, index = u.arg
  got = tuple((s.shape, s.dtype) for s in u.src)
  if got != spec.in_avals(): _fail(u, f"CALL inputs {got} do not match the call's {spec.in_avals()}")
  if not 0 <= index < len(spec.out_avals) or u.dtype is not spec.out_avals[index][1]:
    _fail(u, f"CALL output {index} of dtype {u.dtype} is not an output of the call {spec.out_avals}")
  for body in spec.bodies: verify_body(body)


def verify_tensor_graph(root: UOp, inputs: frozenset = frozenset()) -> None:
  """Tensor level: shapes agree, movement args are valid, dtypes follow each op's rule. `inputs` are the
  placeholders allowed to remain (a body's own inputs); CALL nodes' bodies are checked too."""
  for u in toposort([root]):
    op, arg = u.op, u.arg
    if op in GroupOp.ALU:
      _check_alu_dtypes(u)
      if len({s.shape for s in u.src}) != 1: _fail(u, f"sources have different shapes {[s.shape for s in u.src]}")
    elif op is Ops.BUFFER:
      if not (isinstance(arg, tuple) and len(arg) == 3 and hasattr(u, "buffer")): _fail(u, "BUFFER needs (id, device, shape) and a buffer")
    elif op is Ops.CONST:
      if u.src: _fail(u, "CONST has no sources")
    elif op is Ops.PARAM:
      if u.src or u.arg is None: _fail(u, "PARAM has no sources and holds a value")
    elif op is Ops.RESHAPE:
      if math.prod(arg) != math.prod(u.src[0].shape): _fail(u, f"RESHAPE {u.src[0].shape} -> {arg} changes the size")
    elif op is Ops.PERMUTE:
      if sorted(arg) != list(range(len(u.src[0].shape))): _fail(u, f"PERMUTE {arg} is not a permutation")
    elif op is Ops.EXPAND:
      src = u.src[0].shape
      if len(src) != len(arg) or any(s != n and s != 1 for s, n in zip(src, arg)):
        _fail(u, f"EXPAND {src} -> {arg} may only grow size-1 axes")
    elif op is Ops.PAD:
      if len(arg) != len(u.src[0].shape) or any(lo < 0 or hi < 0 for lo, hi in arg): _fail(u, f"PAD widths {arg}")
    elif op is Ops.SHRINK:
      if len(arg) != len(u.src[0].shape) or any(not 0 <= s <= e <= n for (s, e), n in zip(arg, u.src[0].shape)):
        _fail(u, f"SHRINK bounds {arg} outside shape {u.src[0].shape}")
    elif op is Ops.FLIP:
      if any(not 0 <= a < len(u.src[0].shape) for a in arg): _fail(u, f"FLIP axes {arg}")
    elif op is Ops.REDUCE_AXIS:
      if arg[0] not in (Ops.ADD, Ops.MUL, Ops.MAX): _fail(u, f"REDUCE_AXIS op {arg[0]}")
      if any(not 0 <= a < len(u.src[0].shape) for a in arg[1]): _fail(u, f"REDUCE_AXIS axes {arg[1]}")
    elif op is Ops.GATHER:
      x, index = u.src
      if not index.dtype.is_int or index.dtype is dtypes.uint64: _fail(u, f"index dtype {index.dtype}: not an int64-castable integer")
      if u.dtype is not x.dtype: _fail(u, f"dtype {u.dtype} but it reads {x.dtype}")
      if not 0 <= arg < len(x.shape) or len(index.shape) != len(x.shape) or \
         any(a != b and b != 1 for k, (a, b) in enumerate(zip(index.shape, x.shape)) if k != arg):
        _fail(u, f"index of shape {index.shape} must match {x.shape} except along axis {arg} and where it has size 1")
      if x.shape[arg] == 0 and math.prod(index.shape): _fail(u, "gathers from an empty axis")
    elif op is Ops.SCATTER:
      x, positions, updates = u.src
      if not positions.dtype.is_int or positions.dtype is dtypes.uint64: _fail(u, f"positions dtype {positions.dtype}: not an int64-castable integer")
      if positions.shape != updates.shape: _fail(u, f"positions of shape {positions.shape} but updates of shape {updates.shape}")
      if u.dtype is not x.dtype or updates.dtype is not x.dtype: _fail(u, f"dtype {u.dtype}, operand {x.dtype}, updates {updates.dtype}")
      if arg not in (Ops.ADD, Ops.MUL, Ops.MAX, None): _fail(u, f"SCATTER op {arg}: not ADD, MUL, MAX or None (set)")
    elif op is Ops.CALL: _check_call(u)
    elif op is Ops.HOST:
      from tgfn.ops.host import check_host_node
      if (problem := check_host_node(u)) is not None: _fail(u, problem)
    elif op is Ops.PLACEHOLDER:
      if u in inputs: continue
      _fail(u, "an unbound PLACEHOLDER cannot be computed (a traced value escaped its transform?)")
    elif op not in (Ops.CONTIGUOUS, Ops.COPY, Ops.DETACH):
      _fail(u, "not a tensor-level op")


def verify_kernel(ast: UOp) -> None:
  """Kernel level: a SINK of STOREs; integer indices; LOADs and STOREs address DEFINE_GLOBALs."""
  if ast.op is not Ops.SINK or not all(s.op is Ops.STORE for s in ast.src): _fail(ast, "a kernel is a SINK of STOREs")
  for u in toposort([ast]):
    if u.op in (Ops.LOAD, Ops.STORE):
      if u.src[0].op is not Ops.DEFINE_GLOBAL: _fail(u, "must address a DEFINE_GLOBAL")
      if not u.src[1].dtype.is_int: _fail(u, "index must be an integer")
      if u.op is Ops.LOAD and len(u.src) == 3 and u.src[2].dtype is not dtypes.bool: _fail(u, "gate must be bool")
    elif u.op is Ops.RANGE:
      if u.src[0].op is not Ops.CONST: _fail(u, "RANGE bound must be a constant")
    elif u.op is Ops.REDUCE:
      if len(u.reduce_values) != 1 or not u.reduce_ranges: _fail(u, "REDUCE accumulates one value over RANGEs")
    elif u.op in GroupOp.ALU: _check_alu_dtypes(u)
    elif u.op is Ops.DEFINE_VAR:
      if u.src or not isinstance(u.arg, int): _fail(u, "DEFINE_VAR has no sources and a parameter number")
    elif u.op not in (Ops.SINK, Ops.DEFINE_GLOBAL, Ops.CONST): _fail(u, "not a kernel-level op")


def verify_linear(program: list[UOp]) -> None:
  """Linear level: sources come first, loops nest, accumulators are declared before use."""
  seen: set[UOp] = set()
  open_ranges: list[UOp] = []
  for u in program:
    for s in u.src:
      if s not in seen: _fail(u, f"uses {s.op.name} before it is computed")
    if u.op is Ops.RANGE: open_ranges.append(u)
    elif u.op is Ops.ENDRANGE:
      if not open_ranges or open_ranges.pop() is not u.src[0]: _fail(u, "ENDRANGE does not close the innermost loop")
    seen.add(u)
  if open_ranges: raise SpecError(f"{len(open_ranges)} loop(s) never closed")
