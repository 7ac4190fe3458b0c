"""The one IR: `UOp(op, dtype, src, arg)`, hash-consed, plus the pattern matcher that rewrites it.

Every stage of tgfn speaks UOps. At the *tensor* level a graph of UOps describes array math with
shapes (BUFFER, CONST, elementwise ALU ops, REDUCE_AXIS, movement ops). The scheduler lowers each
kernel to the *kernel* level, where shapes are gone and values are addressed by index expressions
over RANGE loops (DEFINE_GLOBAL, RANGE, LOAD, STORE, REDUCE). The linearizer orders that into a flat
program (adding ENDRANGE, DEFINE_ACC, ASSIGN).

UOps are immutable and hash-consed: building the same (op, dtype, src, arg) twice returns the same
object, so equality is identity, common subexpressions are shared for free, and caches key on it.
"""
from __future__ import annotations

import inspect
import itertools
import math
import weakref
from _weakref import _remove_dead_weakref  # what WeakValueDictionary uses to drop an entry
from enum import Enum, auto
from typing import Any, Callable, Optional, Sequence

from tgfn import helpers
from tgfn.dtype import DType, dtypes

_NAN = float("nan")  # the one NaN object CONST args hold (see UOp.__new__)


class Ops(Enum):
  # ---- sources (tensor level)
  BUFFER = auto()       # arg: (unique id, device, shape); realized data lives in a device Buffer
  CONST = auto()        # arg: a Python scalar; shape () at the tensor level
  PLACEHOLDER = auto()  # arg: (unique id, shape, device); an input of a traced function
  PARAM = auto()        # arg: a Python scalar of eager code, passed to kernels as an argument (DEFINE_VAR),
                        # so a new value compiles no new kernel
  # ---- movement (tensor level); none of these makes a kernel
  RESHAPE = auto()      # arg: new shape
  PERMUTE = auto()      # arg: axis order
  EXPAND = auto()       # arg: new shape (size-1 axes broadcast)
  PAD = auto()          # arg: ((before, after), ...) zero padding
  SHRINK = auto()       # arg: ((start, end), ...)
  FLIP = auto()         # arg: tuple of axes to reverse
  # ---- reduction (tensor level); arg: (ALU op, axes); reduced axes keep size 1
  REDUCE_AXIS = auto()
  # ---- data-dependent read (tensor level); src: (x, index), arg: axis. index is an integer array of x's
  # rank, equal to x's shape except along `axis` and where x has size 1 (broadcast: read at 0);
  # out[..., i, ...] = x[..., clamp(index[..., i, ...]), ...] with the index clamped into
  # [0, x.shape[axis] - 1] (the result has index's shape)
  GATHER = auto()
  # ---- data-dependent write (tensor level); src: (operand, positions, updates), arg: ALU op (ADD, MUL, MAX) or
  # None (set). positions (integers) and updates have one shape; each position is a flat index into operand.
  # The result is operand updated in order, update by update: out[p] = out[p] <op> u (or out[p] = u, so the
  # last of repeated positions wins); positions outside [0, operand.size) are dropped. Its own kernel
  SCATTER = auto()
  # ---- realization (tensor level)
  CONTIGUOUS = auto()   # force a kernel boundary: the value is materialized in a buffer
  COPY = auto()         # arg: target device name
  HOST = auto()         # arg: (function name, static params, shape); a NumPy function run on the host over the
                        # realized sources, its outputs packed along the last axis (tgfn/ops/host.py)
  # ---- transform markers (tensor level): the value of src[0], with special meaning to transforms
  DETACH = auto()       # stop_gradient: no derivative flows through
  COLLECTIVE = auto()   # src: (x,) (none for axis_index); arg: a Collective (tgfn/lax/collectives.py): psum,
                        # all_gather, ... over named axes; replaced by shard_map, pmap or vmap before it runs
  # ---- sub-graphs (tensor level): one output of a call of a closed body (tgfn/uop/body.py)
  CALL = auto()         # src: the call's inputs; arg: (CallSpec, output index). Its own schedule item
  # ---- elementwise ALU, every level. Unary:
  NEG = auto(); RECIP = auto(); SQRT = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); COS = auto()  # noqa: E702
  TRUNC = auto(); CAST = auto(); BITCAST = auto()  # noqa: E702
  # binary:
  ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto()  # noqa: E702
  MAX = auto(); CMPLT = auto(); CMPNE = auto()  # noqa: E702
  AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()  # noqa: E702
  # ternary:
  WHERE = auto()
  # ---- kernel level
  DEFINE_GLOBAL = auto()  # arg: buffer slot number; dtype: element dtype
  DEFINE_VAR = auto()     # arg: scalar parameter number; dtype: its dtype. A PARAM's value, passed to the
                          # kernel after the buffers
  RANGE = auto()          # src: (size CONST,); arg: (unique id, AxisType)
  LOAD = auto()           # src: (DEFINE_GLOBAL, index) or (DEFINE_GLOBAL, index, gate); a vector dtype with
                          # a scalar index loads that many consecutive elements
  STORE = auto()          # src: (DEFINE_GLOBAL, index, value); a vector value stores consecutive elements
  REDUCE = auto()         # src: (*values, *RANGEs); arg: ALU op (ADD, MUL, MAX). The values are combined
                          # into the accumulator in order, once per iteration of the ranges
  SINK = auto()           # groups the stores of a kernel
  VECTORIZE = auto()      # src: n scalars -> one value of the n-lane vector dtype
  GEP = auto()            # src: (vector,); arg: lane -> that lane, a scalar
  # ---- linear program level
  ENDRANGE = auto()       # src: (RANGE,)
  DEFINE_ACC = auto()     # src: (initial CONST,); arg: number within the kernel. Also stands for the final
                          # value of its reduction, after the loops
  ASSIGN = auto()         # src: (DEFINE_ACC, new value); arg: ALU op: acc = acc <op> value

  def __repr__(self) -> str: return f"Ops.{self.name}"
  # Enum's own __hash__ hashes the member's name in Python code, and every node built or looked up hashes
  # its op (a cold compile of the MLP step: ~90,000 times). Members are singletons compared by identity,
  # so identity's hash is the same contract, in C. (Neither is stable across processes; disk keys spell
  # the names.)
  __hash__ = object.__hash__


class AxisType(Enum):
  """What a kernel loop axis is for; the optimizer changes kinds as it splits axes (tgfn/codegen/opts.py)."""
  GLOBAL = auto()   # an output axis: a loop whose iterations are independent
  THREAD = auto()   # the output axis whose iterations are split among the worker threads
  REDUCE = auto()   # a reduction loop
  UPCAST = auto()   # an output axis unrolled into several values held at once (a tile in registers)
  UNROLL = auto()   # a reduction axis unrolled: the values are accumulated in their original order
  VECTOR = auto()   # the lanes of a vector value (an output axis, or a reduction axis whose lanes are
                    # combined at the end: a reordering the float policy must allow)
  LOCAL = auto()    # an output axis run by work groups of arg[2] work items each (GPU kernel ids: OpenCL's
                    # group and local ids, CUDA's blocks and threads); the kernel checks the bound
  LOOP = auto()     # a sequential loop whose iterations depend on one another (a scatter's pass over its
                    # updates): opened where its stores need it, never split, reordered or vectorized

  def __repr__(self) -> str: return f"AxisType.{self.name}"
  __hash__ = object.__hash__  # as Ops: hashed with every RANGE node


class GroupOp:
  Unary = frozenset({Ops.NEG, Ops.RECIP, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TRUNC,
                     Ops.CAST, Ops.BITCAST})
  Binary = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT,
                      Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
  Ternary = frozenset({Ops.WHERE})
  ALU = Unary | Binary | Ternary
  Movement = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP})
  Comparison = frozenset({Ops.CMPLT, Ops.CMPNE})
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR})
  Transcendental = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS})


# The hash-consing table: (op, dtype, src, arg, sign of a float arg) -> weak reference to the node. A plain
# dict of weakrefs rather than a WeakValueDictionary: its lookups and insertions are C calls, and every
# new node (each eager operation makes several) pays for them.
_nodes: dict[tuple, weakref.ref] = {}



class _computed_once:
  """Like functools.cached_property, without its lock (Python 3.11 takes one per first access, a cost
  every new node pays): the value is stored in the instance, which later lookups find first. Two
  threads may both compute it; the values are equal (the functions are pure)."""
  def __init__(self, fn: Callable[[Any], Any]): self.fn, self.name = fn, fn.__name__
  def __get__(self, obj: Any, cls: Any = None) -> Any:
    if obj is None: return self
    value = obj.__dict__[self.name] = self.fn(obj)
    return value


class UOp:
  """An immutable, hash-consed IR node. Construct with `UOp(op, dtype, src, arg)`."""
  __slots__ = ("op", "dtype", "src", "arg", "__weakref__", "__dict__")
  def __new__(cls, op: Ops, dtype: Optional[DType] = None,
              src: tuple[UOp, ...] = (), arg: Any = None) -> UOp:
    # NaN != NaN, so each NaN object would key a node of its own: one NaN keeps graphs with NaN constants
    # hash-consed (and their kernels cached, instead of recompiled at every realization)
    if type(arg) is float and arg != arg: arg = _NAN
    # -0.0 == 0.0 and they hash alike: key on the sign too, or x / -0.0 would reuse the CONST 0.0
    key = (op, dtype, src, arg, math.copysign(1.0, arg) if type(arg) is float else None)
    try:
      if (ref := _nodes.get(key)) is not None and (hit := ref()) is not None: return hit
    except TypeError:
      raise TypeError(f"UOp arg must be hashable, got {arg!r} for {op}") from None
    # a miss: build the node, then publish it with one setdefault, which is atomic: of two threads building
    # an equal node, both return the one published first, so identity stays equality
    self = object.__new__(cls)
    _set_op(self, op)
    _set_dtype(self, dtype)
    _set_src(self, src)
    _set_arg(self, arg)
    # when the node dies, its entry goes -- unless a live node has taken the key since (C: atomic)
    ref = weakref.ref(self, lambda _, key=key: _remove_dead_weakref(_nodes, key))
    while (published := _nodes.setdefault(key, ref)) is not ref:
      if (hit := published()) is not None: return hit
      _remove_dead_weakref(_nodes, key)  # a dead node's entry its callback has not removed yet
    return self

  @classmethod
  def unique(cls, op: Ops, dtype: DType, arg: Any) -> UOp:
    """A source node whose arg carries a fresh unique id (a BUFFER): it can never be built twice, so it
    skips the hash-consing table -- this keeps returning a jitted result cheap."""
    self = object.__new__(cls)
    object.__setattr__(self, "op", op)
    object.__setattr__(self, "dtype", dtype)
    object.__setattr__(self, "src", ())
    object.__setattr__(self, "arg", arg)
    return self

  def __setattr__(self, name: str, value: Any) -> None:
    if name in ("op", "dtype", "src", "arg"): raise AttributeError("UOps are immutable")
    object.__setattr__(self, name, value)

  def __reduce__(self): return (UOp, (self.op, self.dtype, self.src, self.arg))

  def __repr__(self) -> str:
    return self.pretty(max_depth=3)

  def pretty(self, max_depth: int = 100, _depth: int = 0) -> str:
    arg = "" if self.arg is None else f", arg={self.arg!r}"
    if _depth >= max_depth or not self.src: srcs = "" if not self.src else ", src=(...)"
    else: srcs = ", src=(" + ", ".join(s.pretty(max_depth, _depth + 1) for s in self.src) + ")"
    return f"UOp({self.op}, {self.dtype}{arg}{srcs})"

  def replace(self, **kwargs: Any) -> UOp:
    fields = {"op": self.op, "dtype": self.dtype, "src": self.src, "arg": self.arg, **kwargs}
    return UOp(fields["op"], fields["dtype"], tuple(fields["src"]), fields["arg"])

  # ---- graph walks (iterative: user graphs can be thousands of nodes deep)
  def toposort(self) -> list[UOp]:
    """Every node reachable from self, each after all of its sources."""
    return toposort([self])

  @staticmethod
  def param(dtype: DType, value: Any) -> UOp:
    """A tensor-level PARAM: a Python scalar that kernels take as an argument. Its value is its arg (so a
    repeated expression is still hash-consed), but lowering and the engine's plans key only on its dtype."""
    return UOp(Ops.PARAM, dtype, (), normalize_const(value, dtype))

  # ---- construction helpers used at the kernel level (index arithmetic)
  @staticmethod
  def const(dtype: DType, value: Any) -> UOp:
    return UOp(Ops.CONST, dtype, (), normalize_const(value, dtype))

  def alu(self, op: Ops, *others: UOp) -> UOp:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else (others[-1].dtype if op is Ops.WHERE else self.dtype)
    return UOp(op, out_dtype, (self,) + others)

  def _lift(self, x: Any) -> UOp: return x if isinstance(x, UOp) else UOp.const(self.dtype, x)
  def __add__(self, x: Any) -> UOp: return self.alu(Ops.ADD, self._lift(x))
  def __radd__(self, x: Any) -> UOp: return self._lift(x).alu(Ops.ADD, self)
  def __sub__(self, x: Any) -> UOp: return self.alu(Ops.SUB, self._lift(x))
  def __rsub__(self, x: Any) -> UOp: return self._lift(x).alu(Ops.SUB, self)
  def __mul__(self, x: Any) -> UOp: return self.alu(Ops.MUL, self._lift(x))
  def __rmul__(self, x: Any) -> UOp: return self._lift(x).alu(Ops.MUL, self)
  def __floordiv__(self, x: Any) -> UOp: return self.alu(Ops.IDIV, self._lift(x))
  def __mod__(self, x: Any) -> UOp: return self.alu(Ops.MOD, self._lift(x))
  def __neg__(self) -> UOp: return self.alu(Ops.NEG)
  def lt(self, x: Any) -> UOp: return self.alu(Ops.CMPLT, self._lift(x))
  def ne(self, x: Any) -> UOp: return self.alu(Ops.CMPNE, self._lift(x))
  def logical_and(self, x: UOp) -> UOp: return self.alu(Ops.AND, x)
  def where(self, a: UOp, b: UOp) -> UOp: return self.alu(Ops.WHERE, a, b)
  def cast(self, dtype: DType) -> UOp: return self if dtype == self.dtype else UOp(Ops.CAST, dtype, (self,))

  # ---- kernel-level structure
  @staticmethod
  def range(size: int, rid: int, kind: AxisType) -> UOp:
    return UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size),), (rid, kind))
  @property
  def size(self) -> int: return self.src[0].arg  # a RANGE's trip count
  @property
  def kind(self) -> AxisType: return self.arg[1]  # a RANGE's AxisType
  @property
  def reduce_values(self) -> tuple[UOp, ...]:
    """A REDUCE's values (its sources before the trailing RANGEs; there is always at least one)."""
    n = len(self.src)
    while n > 1 and self.src[n - 1].op is Ops.RANGE: n -= 1
    return self.src[:n]
  @property
  def reduce_ranges(self) -> tuple[UOp, ...]: return self.src[len(self.reduce_values):]
  __hash__ = object.__hash__

  # ---- tensor-level shape and device
  @_computed_once
  def shape(self) -> tuple[int, ...]:
    return _shape(self)

  @_computed_once
  def device(self) -> Optional[str]:
    """Where the value lives. A node whose sources live on different devices lives where its committed
    source does (see `committed`): the others are copied there when it is scheduled."""
    if self.op in (Ops.BUFFER, Ops.PLACEHOLDER): return self.arg[1 if self.op is Ops.BUFFER else 2]
    if self.op is Ops.COPY: return self.arg
    return device_of_sources(self.src)

  @_computed_once
  def committed(self) -> bool:
    """Whether the value is pinned to its device, as in JAX: placed there by name (`device_put`, a
    `device=` keyword), or computed from a pinned value. An uncommitted value (an array made without
    naming a device, a constant) goes to the device of the committed values it meets."""
    # (engine/realize.py's buffer_uop pins a buffer; transforms/trace.py's placeholder unpins a stand-in)
    if self.op is Ops.BUFFER: return False
    if self.op in (Ops.COPY, Ops.PLACEHOLDER): return True
    for s in self.src:  # (a loop, not any(): every new node pays this)
      if s.committed: return True
    return False

  # ---- integer bounds, for index simplification (kernel level)
  @_computed_once
  def vmin_vmax(self) -> tuple[Any, Any]:
    return _bounds(self)
  @property
  def vmin(self) -> Any: return self.vmin_vmax[0]
  @property
  def vmax(self) -> Any: return self.vmin_vmax[1]


class DeviceConflictError(ValueError):
  """One operation reads values committed to two different devices."""


def device_of_sources(src: tuple[UOp, ...]) -> Optional[str]:
  """The device of a node computed from `src`: theirs when they agree (sources without a device, constants,
  go anywhere), else the one device the committed sources share."""
  found = None
  for s in src:
    if (d := s.device) is None or d == found: continue
    if found is not None: return _committed_device(src)
    found = d
  return found


def _committed_device(src: tuple[UOp, ...]) -> str:
  committed = sorted({d for s in src if (d := s.device) is not None and s.committed})
  if len(committed) > 1:
    raise DeviceConflictError(f"one operation reads arrays committed to different devices {committed}; "
                              f"move them to one with tgfn.device_put(x, device)")
  # none committed (values made under different default devices): the first source's device
  return committed[0] if committed else next(d for s in src if (d := s.device) is not None)


def _shape(u: UOp) -> tuple[int, ...]:
  op, arg = u.op, u.arg
  if op is Ops.BUFFER: return arg[2]
  if op is Ops.PLACEHOLDER: return arg[1]
  if op in (Ops.CONST, Ops.PARAM): return ()
  if op is Ops.CALL: return arg[0].out_avals[arg[1]][0]
  if op in (Ops.RESHAPE, Ops.EXPAND): return arg
  if op is Ops.HOST: return arg[2]
  if op is Ops.COLLECTIVE: return arg.shape
  src = u.src[0].shape
  if op is Ops.PERMUTE: return tuple(src[i] for i in arg)
  if op is Ops.PAD: return tuple(s + lo + hi for s, (lo, hi) in zip(src, arg))
  if op is Ops.SHRINK: return tuple(end - start for start, end in arg)
  if op is Ops.REDUCE_AXIS: return tuple(1 if i in arg[1] else s for i, s in enumerate(src))
  if op is Ops.WHERE: return u.src[1].shape
  if op is Ops.GATHER: return u.src[1].shape
  if op in GroupOp.ALU or op in (Ops.FLIP, Ops.SCATTER, Ops.CONTIGUOUS, Ops.COPY, Ops.DETACH): return src
  raise ValueError(f"{op} has no shape (it is not a tensor-level op)")


def _bounds(u: UOp) -> tuple[Any, Any]:
  dt = u.dtype
  full = (dt.min, dt.max) if dt is not None and not dt.is_float else (-math.inf, math.inf)
  if u.op is Ops.CONST: return (u.arg, u.arg)
  if u.op is Ops.RANGE: return (0, u.src[0].arg - 1)
  if u.op is Ops.VECTORIZE and dt is not None and not dt.is_float:
    return (min(s.vmin for s in u.src), max(s.vmax for s in u.src))
  if u.op in GroupOp.Comparison or (dt is dtypes.bool): return (False, True) if u.op is not Ops.CONST else full
  if not u.src or dt is None or dt.is_float: return full
  s = [x.vmin_vmax for x in u.src]
  if u.op is Ops.ADD: lo, hi = s[0][0] + s[1][0], s[0][1] + s[1][1]
  elif u.op is Ops.SUB: lo, hi = s[0][0] - s[1][1], s[0][1] - s[1][0]
  elif u.op is Ops.MUL:
    prods = [a * b for a in s[0] for b in s[1]]
    lo, hi = min(prods), max(prods)
  elif u.op is Ops.IDIV and u.src[1].op is Ops.CONST and u.src[1].arg > 0 and s[0][0] >= 0:
    lo, hi = s[0][0] // u.src[1].arg, s[0][1] // u.src[1].arg
  elif u.op is Ops.MOD and u.src[1].op is Ops.CONST and u.src[1].arg > 0 and s[0][0] >= 0:
    lo, hi = 0, min(s[0][1], u.src[1].arg - 1)
  elif u.op is Ops.MAX: lo, hi = max(s[0][0], s[1][0]), max(s[0][1], s[1][1])
  elif u.op is Ops.WHERE: lo, hi = min(s[1][0], s[2][0]), max(s[1][1], s[2][1])
  elif u.op is Ops.NEG: lo, hi = -s[0][1], -s[0][0]
  elif u.op is Ops.CAST and u.src[0].dtype is not None and not u.src[0].dtype.is_float: lo, hi = s[0]
  else: return full
  # a bound outside the dtype means the arithmetic may wrap: know nothing then
  return (lo, hi) if full[0] <= lo and hi <= full[1] else full


# the fields' slot setters: UOp.__setattr__ refuses them, and these are quicker than object.__setattr__
_set_op, _set_dtype, _set_src, _set_arg = UOp.op.__set__, UOp.dtype.__set__, UOp.src.__set__, UOp.arg.__set__


def normalize_const(value: Any, dtype: DType) -> Any:
  """The Python value a CONST of `dtype` holds: bool, int wrapped to the dtype's width, or float."""
  if dtype is None: return value
  if dtype.is_bool: return bool(value)
  if dtype.is_int:
    if isinstance(value, float):
      if math.isnan(value) or math.isinf(value): raise ValueError(f"cannot represent {value} as {dtype}")
      value = int(value)
    value = int(value) & ((1 << dtype.bits) - 1)
    if dtype.kind == "i" and value >= 1 << (dtype.bits - 1): value -= 1 << dtype.bits
    return value
  if dtype.is_complex: return complex(value)
  return float(value)


def toposort(roots: Sequence[UOp], children: Optional[Callable[[UOp], Sequence[UOp]]] = None) -> list[UOp]:
  """Every node reachable from `roots` through `children` (default: the sources), each after its children."""
  order: list[UOp] = []
  seen: set[UOp] = set()
  if children is None:  # the common walk, depth first with an iterator per open node (codegen's hottest loop)
    for root in roots:
      if root in seen: continue
      seen.add(root)
      path = [(root, iter(root.src))]
      while path:
        node, rest = path[-1]
        for s in rest:
          if s not in seen:
            seen.add(s)
            path.append((s, iter(s.src)))
            break
        else:
          path.pop()
          order.append(node)
    return order
  stack: list[tuple[UOp, bool]] = [(r, False) for r in reversed(roots)]
  while stack:
    node, expanded = stack.pop()
    if node in seen: continue
    if expanded:
      seen.add(node)
      order.append(node)
      continue
    stack.append((node, True))
    for s in reversed(children(node)):
      if s not in seen: stack.append((s, False))
  return order


# ---------------------------------------------------------------------------------------------
# Pattern matching: a UPat describes a UOp shape; a PatternMatcher is a list of (UPat, function)
# pairs read like flash cards. Named sub-patterns are passed to the function as keyword arguments.

class UPat:
  def __init__(self, op: Ops | Sequence[Ops] | None = None, dtype: DType | Sequence[DType] | None = None,
               src: tuple[UPat, ...] | list[UPat] | UPat | None = None, arg: Any = None,
               name: Optional[str] = None, allow_any_len: bool = False):
    self.ops = None if op is None else (frozenset({op}) if isinstance(op, Ops) else frozenset(op))
    self.dtypes = None if dtype is None else (frozenset({dtype}) if isinstance(dtype, DType) else frozenset(dtype))
    self.arg, self.name, self.allow_any_len = arg, name, allow_any_len
    # a tuple matches in order; a list (of two) also tries the swapped order; a single UPat matches every src
    self.src = src

  @staticmethod
  def var(name: Optional[str] = None, dtype: Any = None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: Optional[str] = None, dtype: Any = None) -> UPat: return UPat(Ops.CONST, dtype, name=name)

  def match(self, uop: UOp, store: dict[str, UOp]) -> bool:
    if self.ops is not None and uop.op not in self.ops: return False
    if self.dtypes is not None and uop.dtype not in self.dtypes: return False
    if self.arg is not None and uop.arg != self.arg: return False
    if self.name is not None:
      if self.name in store and store[self.name] is not uop: return False
      store[self.name] = uop
    if self.src is None: return True
    # (loops rather than all(...) over a generator: matching is the rewrite engine's innermost work)
    if isinstance(self.src, UPat):
      for s in uop.src:
        if not self.src.match(s, store): return False
      return True
    if isinstance(self.src, tuple):
      # one order: matched into `store` itself. A failed match may leave bindings there, but whoever asked
      # drops it then (PatternMatcher.rewrite, or a two-order parent's trial copy below)
      if len(self.src) != len(uop.src) and not (self.allow_any_len and len(uop.src) >= len(self.src)): return False
      for p, s in zip(self.src, uop.src):
        if not p.match(s, store): return False
      return True
    for pats in (self.src, self.src[::-1]):
      if len(pats) != len(uop.src) and not (self.allow_any_len and len(uop.src) >= len(pats)): continue
      trial = dict(store)
      for p, s in zip(pats, uop.src):
        if not p.match(s, trial): break
      else:
        store.update(trial)
        return True
    return False

  def source_ops(self) -> Optional[tuple[Optional[frozenset[Ops]], ...]]:
    """The ops each source must have, by position, where the sources are matched in one order (None: any
    op there); None where they are not. A node whose sources differ cannot match (PatternMatcher checks this
    before matching)."""
    if not isinstance(self.src, tuple) or self.allow_any_len: return None
    return tuple(p.ops for p in self.src)


class PatternMatcher:
  """An ordered rule list. `rewrite(uop)` returns the first rule's non-None result, or None.
  `marks_fixed_points`: its rules are pure functions of the node (no ctx, no state, no settings), so
  graph_rewrite may mark each node it leaves unchanged and skip a marked node's whole graph next time
  (`symbolic`: codegen simplifies the same index arithmetic after every pass, and in every kernel)."""
  def __init__(self, rules: list[tuple[UPat, Callable[..., Optional[UOp]]]], marks_fixed_points: bool = False):
    self.rules, self.marks_fixed_points = rules, marks_fixed_points
    self._by_op: dict[Ops, list[tuple[UPat, Callable, bool, Optional[tuple]]]] = {op: [] for op in Ops}
    for pat, fn in rules:
      wants_ctx = "ctx" in inspect.signature(fn).parameters
      for op in (pat.ops if pat.ops is not None else Ops):
        self._by_op[op].append((pat, fn, wants_ctx, pat.source_ops()))

  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.rules + other.rules)

  def rewrite(self, uop: UOp, ctx: Any = None) -> Optional[UOp]:
    for pat, fn, wants_ctx, source_ops in self._by_op[uop.op]:
      # most rules fail on their sources' ops: checked before building a match
      if source_ops is not None and not _sources_fit(source_ops, uop.src): continue
      store: dict[str, UOp] = {}
      if pat.match(uop, store):
        out = fn(ctx=ctx, **store) if wants_ctx else fn(**store)
        if out is not None: return out
    return None


def _sources_fit(source_ops: tuple[Optional[frozenset[Ops]], ...], src: tuple[UOp, ...]) -> bool:
  if len(source_ops) != len(src): return False
  for ops, s in zip(source_ops, src):
    if ops is not None and s.op not in ops: return False
  return True


def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, name: Optional[str] = None) -> UOp:
  """Rewrite bottom-up to a fixed point: sources first, then the rules on the rebuilt node, again on
  whatever a rule returns, until no rule fires. Iterative, so deep graphs do not hit the recursion limit.
  A pass has a `name`: VIZ=1 records its input and output under it (an unnamed rewrite is an analysis's
  scratch work, not a stage of the pipeline, and is not recorded)."""
  done: dict[UOp, UOp] = {}
  # a node this matcher left unchanged before, sources and all (the mark is the matcher itself)
  marker = pm if pm.marks_fixed_points and ctx is None else None
  stack: list[tuple[UOp, int, Optional[UOp]]] = [(root, 0, None)]
  while stack:
    node, stage, replacement = stack.pop()
    if node in done: continue
    if stage == 0:
      if marker is not None and node.__dict__.get("_fixed_point_of") is marker:
        done[node] = node
        continue
      stack.append((node, 1, None))
      for s in reversed(node.src):
        if s not in done: stack.append((s, 0, None))
    elif stage == 1:
      new_src = tuple([done[s] for s in node.src])
      rebuilt = node if new_src == node.src else UOp(node.op, node.dtype, new_src, node.arg)
      out = pm.rewrite(rebuilt, ctx)
      if out is None or out is rebuilt:
        done[node] = rebuilt
        if marker is not None: rebuilt.__dict__["_fixed_point_of"] = marker
      else:
        stack.append((node, 2, out))
        stack.append((out, 0, None))
    else:
      done[node] = done[replacement]
  if name is not None and helpers.tracker is not None: helpers.track(name, root, done[root])
  return done[root]


def substitute(root: UOp, mapping: dict[UOp, UOp], memo: Optional[dict[UOp, UOp]] = None) -> UOp:
  """Replace nodes by `mapping` everywhere in the graph under `root`. A CALL node's bodies are closed
  graphs over their own inputs (tgfn/uop/body.py): they are never entered, nothing there needs replacing.
  `memo` (node -> its replacement) may be shared by calls with the same mapping: a subgraph it holds is
  not walked again (expanding a vector axis substitutes each lane into many graphs sharing their indices)."""
  done: dict[UOp, UOp] = {} if memo is None else memo
  for node, out in mapping.items(): done.setdefault(node, out)
  if root in done: return done[root]
  keep_lines = helpers.locator is not None  # a rebuilt node keeps its user's source line (tgfn/viz/locations.py)
  # depth first, an iterator per open node (as toposort): a node is rebuilt once all its sources are done
  path = [(root, iter(root.src))]
  while path:
    node, rest = path[-1]
    for s in rest:
      if s not in done:
        path.append((s, iter(s.src)))
        break
    else:
      path.pop()
      new_src = tuple([done[s] for s in node.src])
      out = node if all(a is b for a, b in zip(new_src, node.src)) else UOp(node.op, node.dtype, new_src, node.arg)
      if keep_lines and out is not node and (line := node.__dict__.get("_user_line")) is not None:
        out.__dict__.setdefault("_user_line", line)
      done[node] = out
  return done[root]


unique_ids = itertools.count()
def unique_id() -> int: return next(unique_ids)

