"""`make_jaxpr(f)(*args)`: the graph f builds, printed like a jaxpr. f is traced on placeholders (no
kernel runs); every node of the UOp graph becomes one let-bound equation, in dependency order:

    { lambda a:f32[3]; b:f32[3]. let
        c:f32[3] = mul b a
        d:f32[1] = reduce_axis[axes=(0,) op=add] c
        e:f32[] = reshape[shape=()] d
      in (e,) }

Before the `;` are the constants f captured (realized arrays it closed over), after it the inputs.
Scalar constants are printed in place (`2.0:f32[]`). The primitives are tgfn's tensor-level UOps
(docs/architecture.md), not jax.lax's, so the equations are finer-grained than JAX's."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

from tgfn.dtype import DType
from tgfn.transforms.shapes import abstract_inputs
from tgfn.transforms.trace import flatten_outputs, fn_name
from tgfn.uop.ops import Ops, UOp, toposort

_SHORT = {"bool": "bool", "bfloat16": "bf16"}
# ops whose arg is printed as one named parameter
_PARAM_NAMES = {Ops.RESHAPE: "shape", Ops.EXPAND: "shape", Ops.PERMUTE: "permutation", Ops.PAD: "padding",
                Ops.SHRINK: "bounds", Ops.FLIP: "axes", Ops.COPY: "device"}


def _dtype_name(dt: DType) -> str:
  return _SHORT.get(dt.name) or dt.name[0] + dt.name.lstrip("abcdefghijklmnopqrstuvwxyz")


def aval(u: UOp) -> str:
  return f"{_dtype_name(u.dtype)}[{','.join(str(n) for n in u.shape)}]"


def _var_name(n: int) -> str:
  """a, b, ..., z, ba, bb, ...: JAX's variable names."""
  letters = ""
  while True:
    letters = "abcdefghijklmnopqrstuvwxyz"[n % 26] + letters
    n //= 26
    if n == 0: return letters


@dataclass(frozen=True)
class Equation:
  out: str
  out_aval: str
  primitive: str
  params: str
  inputs: tuple[str, ...]

  def __str__(self) -> str:
    return f"{self.out}:{self.out_aval} = {self.primitive}{self.params} {' '.join(self.inputs)}".rstrip()


def _params(u: UOp) -> str:
  if u.op is Ops.REDUCE_AXIS: return f"[axes={u.arg[1]} op={u.arg[0].name.lower()}]"
  if u.op is Ops.CALL: return f"[{_call_params(*u.arg)}]"
  if u.op in _PARAM_NAMES: return f"[{_PARAM_NAMES[u.op]}={u.arg}]"
  return ""


def _call_params(spec: Any, index: int) -> str:
  name = getattr(spec, "name", None)
  kind = type(spec).__name__.lower()
  return f"kind={kind}" + (f" name={name!r}" if name else "") + f" output={index}"


@dataclass(frozen=True)
class Jaxpr:
  """The traced graph as data (`constvars`, `invars`, `eqns`, `outvars`, each variable with its type);
  `str()` prints it."""
  constvars: tuple[str, ...]
  invars: tuple[str, ...]
  eqns: tuple[Equation, ...]
  outvars: tuple[str, ...]

  def __str__(self) -> str:
    lines = [f"{{ lambda {' '.join(self.constvars)}; {' '.join(self.invars)}. let"]
    lines += [f"    {e}" for e in self.eqns]
    lines.append(f"  in ({', '.join(self.outvars)}{',' if len(self.outvars) == 1 else ''}) }}")
    return "\n".join(lines)

  __repr__ = __str__


def _build(outs: Sequence[UOp], holders: Sequence[UOp]) -> Jaxpr:
  names: dict[UOp, str] = {}
  counter = iter(range(1 << 30))

  def new(u: UOp) -> str:
    names[u] = _var_name(next(counter))
    return names[u]

  nodes = toposort(list(outs))
  consts = [u for u in nodes if u.op is Ops.BUFFER or (u.op is Ops.PLACEHOLDER and u not in holders)]
  constvars = tuple(f"{new(u)}:{aval(u)}" for u in consts)
  invars = tuple(f"{new(u)}:{aval(u)}" for u in holders)

  def ref(u: UOp) -> str:
    # a PARAM is a Python scalar (an eager kernel argument): a literal here too
    if u.op in (Ops.CONST, Ops.PARAM): return f"{u.arg!r}:{aval(u)}"
    return names[u]

  eqns = []
  for u in nodes:
    if u in names or u.op in (Ops.CONST, Ops.PARAM): continue
    inputs = tuple(ref(s) for s in u.src)
    primitive = "stop_gradient" if u.op is Ops.DETACH else u.op.name.lower()
    eqns.append(Equation(new(u), aval(u), primitive, _params(u), inputs))
  return Jaxpr(constvars, invars, tuple(eqns), tuple(ref(o) for o in outs))


def make_jaxpr(f: Callable, static_argnums: Union[int, Sequence[int]] = ()) -> Callable[..., Jaxpr]:
  """A function that traces f on its arguments' shapes and dtypes and returns the `Jaxpr`."""
  static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

  @functools.wraps(f)
  def trace(*args: Any, **kwargs: Any) -> Jaxpr:
    nums = {n % len(args) for n in static}
    dynamic = tuple(a for i, a in enumerate(args) if i not in nums)
    traced, holders = abstract_inputs(dynamic)
    it = iter(traced)
    full = [args[i] if i in nums else next(it) for i in range(len(args))]
    outs, _ = flatten_outputs(f(*full, **kwargs), fn_name(f))
    return _build([o.uop for o in outs], [h.uop for h in holders])
  return trace
