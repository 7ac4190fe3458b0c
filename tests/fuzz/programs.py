"""Random tgfn programs for the differential fuzzer: a program is a list of steps over a pool of values
(its inputs first). Each step applies one public `tgfn.numpy` operation -- elementwise, reduction,
movement, indexing, `.at[]` update or cast -- and knows its NumPy mirror: the same operation in NumPy
with tgfn's documented semantics (JAX promotion, saturating float->int casts, wrapping ints).

Drawing a program builds its tgfn graph lazily (nothing runs), so every step is drawn for the real
shapes and dtypes of its operands. `run_tgfn` replays the steps on fresh inputs (on the device of the
moment) and `run_numpy` on host arrays. The mirror is exact for most ops; a step whose tgfn result may
round differently from NumPy's (transcendentals, float reductions, float `.at[].add` with repeats)
carries a tolerance, and any later non-movement step on such a value has no NumPy reference (only the
devices are compared there)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
from hypothesis import strategies as st

import tgfn.numpy as tnp
from tgfn.array import Array
from tgfn.dtype import ALL_DTYPES, DType, dtypes
from tgfn.ops.axes import normalize_axes
from tests.op_registry import ELEMENTWISE, REDUCTIONS, SMALL, Domain, OpRecord, Tol
from tests.strategies import arrays, axes, cast_host, lattice_arg, reference, round_bf16, weak_scalar

MAX_SIDE = 4
EXACT, APPROX, NO_REF = 0, 1, 2  # how a value's NumPy mirror relates to tgfn's result
# float results that are correctly rounded in both tgfn and the float64-then-round reference
EXACT_FLOAT_OPS = {"add", "subtract", "multiply", "divide", "negative", "positive", "abs", "sign", "square",
                   "reciprocal", "maximum", "minimum", "clip", "where", "floor", "ceil", "trunc", "round", "rint",
                   "sqrt"}
SMALL_INTS = Domain(-3.0, 3.0, specials=False)


@dataclass
class Step:
  """`out = tg(*pool[args])` in tgfn; `ref(*hosts)` gives the NumPy mirror's host array and the tolerance
  (None: exact). `keeps`: a movement or read, so the result is exactly as close to NumPy as its input."""
  desc: str
  args: tuple[int, ...]
  tg: Callable[..., Array]
  ref: Callable[..., tuple[np.ndarray, Optional[Tol]]]
  keeps: bool = False
  host: Optional[np.ndarray] = None  # input steps: their data and dtype
  dtype: Optional[DType] = None


@dataclass
class Program:
  """Step i computes pool value v{i}; inputs are steps without arguments."""
  steps: list[Step] = field(default_factory=list)

  def __repr__(self) -> str: return "\n".join(f"v{i} = {s.desc}" for i, s in enumerate(self.steps))
  def _repr_pretty_(self, p: Any, cycle: bool) -> None: p.text(repr(self))  # hypothesis reports

  def outputs(self) -> list[int]:
    """The computed values nothing later consumes (so every step's result is observed, directly or not)."""
    used = {a for s in self.steps for a in s.args}
    return [i for i, s in enumerate(self.steps) if s.args and i not in used] or [len(self.steps) - 1]


  def input_hosts(self) -> list[tuple[np.ndarray, DType]]:
    return [(s.host, s.dtype) for s in self.steps if not s.args]


def run_tgfn(prog: Program, inputs: Optional[list[Array]] = None) -> list[Array]:
  """Every pool value; the input steps take `inputs` (in order) when given, else their own data."""
  pool: list[Array] = []
  given = iter(inputs) if inputs is not None else None
  for s in prog.steps: pool.append(next(given) if given is not None and not s.args else s.tg(*[pool[a] for a in s.args]))
  return pool


def run_numpy(prog: Program) -> list[tuple[Optional[np.ndarray], int, Optional[Tol]]]:
  """(host array or None, EXACT/APPROX/NO_REF, tolerance) per pool value."""
  pool: list[tuple[Optional[np.ndarray], int, Optional[Tol]]] = []
  for s in prog.steps:
    args = [pool[a] for a in s.args]
    level = max((a[1] for a in args), default=EXACT)
    if level == NO_REF or (level == APPROX and not s.keeps):
      pool.append((None, NO_REF, None))
      continue
    with np.errstate(all="ignore"):
      host, tol = s.ref(*[a[0] for a in args])
    if s.keeps: pool.append((host, level, next((a[2] for a in args if a[2] is not None), None)))
    else: pool.append((host, EXACT if tol is None else APPROX, tol))
  return pool


# ---- casts with tgfn's documented meaning
def cast_to(host: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """Float -> int truncates toward zero, saturates at the target's range and sends NaN to 0; every
  other conversion is NumPy's (rounding to nearest, ints wrapping); bfloat16 is rounded to nearest even
  from float32, as both drivers do (so an int of more than 24 bits is rounded twice)."""
  host = np.asarray(host)
  if src.is_float and dst.is_int:
    flat = [0 if math.isnan(v) else (dst.min if v < 0 else dst.max) if math.isinf(v) else
            min(max(int(v), dst.min), dst.max) for v in host.astype(np.float64).ravel().tolist()]
    return np.array(flat, dtype=dst.np).reshape(host.shape)
  return cast_host(host, dst)


# ---- drawing the pieces
def dtype_strategy() -> st.SearchStrategy[DType]: return st.sampled_from(ALL_DTYPES)


def shape_strategy() -> st.SearchStrategy[tuple[int, ...]]:
  # sides of 2 or more first: hypothesis favours the first choices, and most bugs need them
  return st.lists(st.sampled_from([2, 3, 4, 1, 0]), min_size=0, max_size=3).map(tuple)


def draw_host(draw: Any, dt: DType, shape: tuple[int, ...]) -> np.ndarray:
  domain = draw(st.sampled_from([SMALL_INTS, SMALL, Domain()]), label="domain")
  return draw(arrays(dt, shape, domain))


def _broadcast_partner_shape(draw: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
  """A shape that broadcasts with `shape`: a suffix of it, with some sides replaced by 1."""
  suffix = shape[draw(st.integers(0, len(shape))):]
  return tuple(1 if draw(st.booleans()) else n for n in suffix)


class Drawer:
  """Draws steps onto a Program, keeping the lazily built tgfn values (on the CPU) to read shapes."""

  def __init__(self, draw: Any, prog: Program, pool: list[Array]) -> None:
    self.draw, self.prog, self.pool = draw, prog, pool
  def add_input(self, dt: DType, shape: tuple[int, ...]) -> int:
    self.add(input_step(draw_host(self.draw, dt, shape), dt))
    return len(self.pool) - 1

  def add(self, step: Step) -> None:
    out = step.tg(*[self.pool[a] for a in step.args])
    self.prog.steps.append(step)
    self.pool.append(out)

  def name(self, i: int) -> str: return f"v{i}"

  def pick(self) -> int: return self.draw(st.integers(0, len(self.pool) - 1), label="operand")

  def cast_to_allowed(self, x: int, allowed: tuple[DType, ...]) -> int:
    """`x`, or a cast of it (a separate, visible step) if the op does not take its dtype."""
    if self.pool[x].dtype in allowed: return x
    self.add(cast_step(x, self.pool[x].dtype, self.draw(st.sampled_from(allowed))))
    return len(self.pool) - 1

  # ---- elementwise
  def elementwise(self) -> Optional[Step]:
    rec: OpRecord = self.draw(st.sampled_from(ELEMENTWISE), label="op")
    first = self.cast_to_allowed(self.pick(), rec.dtypes_of(0))
    operands: list[Any] = [Ref(first)]
    for i in range(1, rec.nargs):
      allowed = rec.dtypes_of(i)
      choice = self.draw(st.sampled_from(["pool", "new", "scalar"]), label="kind")
      if choice == "scalar" and not any(d.is_bool for d in allowed):
        operands.append(self.draw(weak_scalar(self.pool[first].dtype, self.draw(st.sampled_from(allowed)),
                                              rec.domain(i)), label="scalar"))
      elif choice == "pool":
        shape = self.pool[first].shape
        operands.append(Ref(self.draw(st.sampled_from([j for j, v in enumerate(self.pool)
                                                       if _broadcasts(v.shape, shape)]))))
      else:
        shape = _broadcast_partner_shape(self.draw, self.pool[first].shape)
        operands.append(Ref(self.add_input(self.draw(st.sampled_from(allowed)), shape)))
    operands = [Ref(self.cast_to_allowed(o.index, rec.dtypes_of(i))) if isinstance(o, Ref) else o
                for i, o in enumerate(operands)]
    return elementwise_step(rec, operands, [self.pool[o.index].dtype if isinstance(o, Ref) else None
                                            for o in operands])

  def reduction(self) -> Optional[Step]:
    rec: OpRecord = self.draw(st.sampled_from(REDUCTIONS), label="op")
    x = self.pick()
    v = self.pool[x]
    if v.dtype not in rec.dtypes: return None
    axis = self.draw(axes(v.ndim, rec.multi_axis), label="axis")
    count = math.prod(v.shape[a] for a in normalize_axes(axis, v.ndim))
    if rec.needs_nonempty and count == 0: return None
    kwargs = dict(rec.kwargs)
    if rec.keepdims: kwargs["keepdims"] = self.draw(st.booleans(), label="keepdims")
    return reduction_step(rec, x, v.dtype, axis, kwargs, count)

  def movement(self) -> Optional[Step]:
    x = self.pick()
    shape = self.pool[x].shape
    kind = self.draw(st.sampled_from(["reshape", "transpose", "broadcast_to", "pad", "flip", "expand_dims"]))
    if kind == "reshape":
      new = self.draw(reshape_target(math.prod(shape)), label="shape")
      return Step(f"reshape({self.name(x)}, {new})", (x,), lambda a: tnp.reshape(a, new),
                  lambda h: (np.reshape(h, new), None), keeps=True)
    if kind == "transpose":
      perm = tuple(self.draw(st.permutations(range(len(shape)))))
      return Step(f"transpose({self.name(x)}, {perm})", (x,), lambda a: tnp.transpose(a, perm),
                  lambda h: (np.transpose(h, perm), None), keeps=True)
    if kind == "broadcast_to":
      lead = tuple(self.draw(st.lists(st.integers(0, 3), max_size=1)))
      new = lead + tuple(self.draw(st.integers(0, 3)) if n == 1 else n for n in shape)
      return Step(f"broadcast_to({self.name(x)}, {new})", (x,), lambda a: tnp.broadcast_to(a, new),
                  lambda h: (np.broadcast_to(h, new), None), keeps=True)
    if kind == "pad" and shape:  # NumPy takes no pad widths for a 0-d array
      widths = tuple(tuple(self.draw(st.lists(st.integers(0, 2), min_size=2, max_size=2))) for _ in shape)
      modes = ["constant"] + (["edge", "wrap", "reflect", "symmetric"] if all(shape) else [])
      mode = self.draw(st.sampled_from(modes), label="mode")
      if mode == "constant":
        value = self.draw(st.sampled_from([0, 1]))  # fits every dtype
        return Step(f"pad({self.name(x)}, {widths}, constant_values={value})", (x,),
                    lambda a: tnp.pad(a, widths, constant_values=value),
                    lambda h: (np.pad(h, widths, constant_values=value), None), keeps=True)
      return Step(f"pad({self.name(x)}, {widths}, mode={mode!r})", (x,), lambda a: tnp.pad(a, widths, mode=mode),
                  lambda h: (np.pad(h, widths, mode=mode), None), keeps=True)
    if kind in ("flip", "pad"):
      axis = self.draw(axes(len(shape), True), label="axis")
      return Step(f"flip({self.name(x)}, {axis})", (x,), lambda a: tnp.flip(a, axis),
                  lambda h: (np.flip(h, axis), None), keeps=True)
    axis = self.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    return Step(f"expand_dims({self.name(x)}, {axis})", (x,), lambda a: tnp.expand_dims(a, axis),
                lambda h: (np.expand_dims(h, axis), None), keeps=True)

  def index(self) -> Optional[Step]:
    x = self.pick()
    shape = self.pool[x].shape
    idx = self.draw(index_strategy(shape), label="index")
    return Step(f"{self.name(x)}[{_show(idx)}]", (x,), lambda a: a[idx], lambda h: (h[idx], None), keeps=True)

  def update(self) -> Optional[Step]:
    x = self.pick()
    v = self.pool[x]
    idx = self.draw(index_strategy(v.shape), label="index")
    target = np.empty(v.shape)[idx].shape
    method = self.draw(st.sampled_from(["set", "add", "multiply", "min", "max"]), label="method")
    values = draw_host(self.draw, v.dtype, target[self.draw(st.integers(0, len(target))):])
    return update_step(x, v.dtype, v.shape, idx, method, values)

  def cast(self) -> Optional[Step]:
    x = self.pick()
    return cast_step(x, self.pool[x].dtype, self.draw(dtype_strategy(), label="dtype"))


@dataclass(frozen=True)
class Ref:
  """An operand that is pool value v{index} (as opposed to a Python scalar)."""
  index: int


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
  """`a` broadcasts to `b` without changing b."""
  return len(a) <= len(b) and all(m in (1, n) for m, n in zip(a[::-1], b[::-1]))


def _show(idx: Any) -> str:
  items = idx if isinstance(idx, tuple) else (idx,)
  def one(i: Any) -> str:
    if isinstance(i, np.ndarray): return f"np.array({i.tolist()}, dtype=np.{i.dtype})"
    if isinstance(i, slice): return f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}" \
                                    f"{'' if i.step is None else ':' + str(i.step)}"
    return "..." if i is Ellipsis else repr(i)
  return ", ".join(one(i) for i in items) + ("," if isinstance(idx, tuple) and len(idx) == 1 else "")


def elementwise_step(rec: OpRecord, operands: list[Any], dts: list[Optional[DType]]) -> Step:
  names = [f"v{o.index}" if isinstance(o, Ref) else repr(o) for o in operands]
  positions = [i for i, o in enumerate(operands) if isinstance(o, Ref)]
  args = tuple(operands[i].index for i in positions)

  def fill(values: tuple) -> list:
    out, it = list(operands), iter(values)
    for i in positions: out[i] = next(it)
    return out

  def ref(*hosts: np.ndarray) -> tuple[np.ndarray, Optional[Tol]]:
    full = fill(hosts)
    want = reference(rec, full, list(dts))
    promoted = tnp.result_type(*[lattice_arg(h, dt) for h, dt in zip(full, dts)])
    out = rec.result_dtype(promoted)
    exact = not out.is_float or rec.name in EXACT_FLOAT_OPS
    return want, None if exact else rec.tol[out]

  kwargs = f", {rec.kwargs}" if rec.kwargs else ""
  return Step(f"{rec.name}({', '.join(names)}{kwargs})", args,
              lambda *a: rec.fn(*fill(a), **rec.kwargs), ref)


def reduction_step(rec: OpRecord, x: int, dt: DType, axis: Any, kwargs: dict, count: int) -> Step:
  def ref(h: np.ndarray) -> tuple[np.ndarray, Optional[Tol]]:
    comp, out = rec.compute(dt), rec.result_dtype(dt)
    operand = cast_host(h, comp)
    want = cast_host(rec.ref(operand.astype(np.float64) if comp.is_float else operand, axis, **kwargs), out)
    if not out.is_float or rec.name in ("max", "min") or count <= 1 and rec.name in ("sum", "prod", "cumsum"):
      return want, None
    eps = float(np.finfo(np.float64 if comp is dtypes.float64 else np.float32).eps)
    finite = operand[np.isfinite(operand)].astype(np.float64) if comp.is_float else operand.astype(np.float64)
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    base = rec.tol[out]
    return want, Tol(base.rtol + 4 * eps * count, base.atol + 4 * eps * count * scale ** rec.scale_power)

  return Step(f"{rec.name.split('[')[0]}(v{x}, axis={axis}, **{kwargs})", (x,),
              lambda a: rec.fn(a, axis=axis, **kwargs), ref)


def input_step(host: np.ndarray, dt: DType) -> Step:
  return Step(f"array(np.array({host.tolist()}, dtype=np.{host.dtype}), dtype={dt.name})", (),
              lambda: tnp.array(host, dtype=dt), lambda: (host, None), keeps=True, host=host, dtype=dt)


def cast_step(x: int, src: DType, dst: DType) -> Step:
  return Step(f"v{x}.astype({dst.name})", (x,), lambda a: a.astype(dst), lambda h: (cast_to(h, src, dst), None))


_UFUNC = {"set": None, "add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}
_BOOL_UFUNC = {"add": np.logical_or, "multiply": np.logical_and, "min": np.logical_and, "max": np.logical_or}


def update_step(x: int, dt: DType, shape: tuple[int, ...], idx: Any, method: str, values: np.ndarray) -> Step:
  positions = np.arange(math.prod(shape)).reshape(shape)[idx].ravel()
  repeated = len(set(positions.tolist())) < positions.size

  def ref(h: np.ndarray) -> tuple[np.ndarray, Optional[Tol]]:
    out = np.array(h, copy=True)
    if method == "set": out[idx] = values
    else: (_BOOL_UFUNC if dt.is_bool else _UFUNC)[method].at(out, idx, values)
    if dt is dtypes.bfloat16: out = round_bf16(out)
    # float accumulation over repeated positions may run in another order
    loose = repeated and dt.is_float and method in ("add", "multiply")
    return out, Tol(1e-2 if dt.bits == 16 else 1e-5, 1e-2 if dt.bits == 16 else 1e-5) if loose else None

  return Step(f"v{x}.at[{_show(idx)}].{method}(<{values.shape} {dt.name}: {values.tolist()}>)", (x,),
              lambda a: getattr(a.at[idx], method)(tnp.array(values, dtype=dt)), ref)


@st.composite
def reshape_target(draw: Any, size: int) -> tuple[int, ...]:
  """A shape of `size` elements, maybe with one -1."""
  if size == 0:
    shape = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    shape[draw(st.integers(0, len(shape) - 1))] = 0
    return tuple(shape)
  factors, n, p = [], size, 2
  while n > 1:
    while n % p == 0: factors.append(p); n //= p
    p += 1
  ndim = draw(st.integers(0 if size == 1 else 1, 3))
  dims = [1] * ndim
  for f in factors: dims[draw(st.integers(0, ndim - 1))] *= f
  if dims and draw(st.booleans()): dims[draw(st.integers(0, len(dims) - 1))] = -1
  return tuple(dims)


@st.composite
def index_strategy(draw: Any, shape: tuple[int, ...]) -> Any:
  """A NumPy index for `shape`: basic items (ints, slices, None, ...), integer arrays (in range, negative
  values too) or a boolean mask over leading axes."""
  kind = draw(st.sampled_from(["basic", "array", "mask"] if shape else ["basic"]), label="kind")
  if kind == "mask":
    k = draw(st.integers(1, len(shape)))
    mask = draw(arrays(dtypes.bool, shape[:k], Domain()))
    return (mask,) + ((slice(None),) if k < len(shape) and draw(st.booleans()) else ())
  items: list[Any] = []
  for n in shape:
    options = ["slice"] + (["int"] if n else []) + (["array"] if kind == "array" and n else [])
    item = draw(st.sampled_from(options))
    if item == "int": items.append(draw(st.integers(-n, n - 1)))
    elif item == "array":
      ishape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
      items.append(draw(arrays(dtypes.int32, ishape, Domain(ints=(-n, n - 1)))))
    else:
      bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
      items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
  if items and draw(st.booleans()): items = items[:draw(st.integers(0, len(items)))]  # trailing axes implicit
  if draw(st.booleans()): items.insert(draw(st.integers(0, len(items))), None)
  if draw(st.booleans()) and kind == "basic":
    at = draw(st.integers(0, len(items)))
    # an Ellipsis before items binds them to the trailing axes: only where every axis has its item (the
    # Ellipsis then stands for none), else after them
    items.insert(at if sum(i is not None for i in items) == len(shape) else len(items), Ellipsis)
  return tuple(items)


@st.composite
def programs(draw: Any, max_steps: int = 5) -> Program:
  prog, pool = Program(), []  # pool: the tgfn values, built lazily on the default device
  d = Drawer(draw, prog, pool)
  n_inputs = draw(st.integers(1, 2), label="n_inputs")
  for _ in range(n_inputs):
    d.add_input(draw(dtype_strategy(), label="dtype"), draw(shape_strategy(), label="shape"))
  makers = [d.elementwise, d.elementwise, d.reduction, d.movement, d.index, d.update, d.cast]
  for _ in range(draw(st.integers(1, max_steps), label="n_steps")):
    step = draw(st.sampled_from(makers), label="kind")()
    if step is not None: d.add(step)
  if len(prog.steps) == n_inputs: d.add(cast_step(0, pool[0].dtype, pool[0].dtype))
  return prog
