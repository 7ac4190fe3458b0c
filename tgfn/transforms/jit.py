"""`jit`: trace once per signature, compile the whole function, replay.

The cache key is the input pytree structure, each leaf's (shape, dtype, device) -- or its Python
type for a scalar, which is traced, so a new value does not retrace -- and the static arguments'
values; a call with no array or scalar argument also keys on the default device (DEV=), where it
runs. On a miss the function is traced on placeholders (values are abstract: Python control flow on them
raises ConcretizationError) and its outputs compiled into a CompiledGraph -- or, for a graph compiled
before in any process, loaded from the disk plan cache (tgfn/engine/plan_cache.py); on a hit
the inputs are bound and the prepared kernel list runs. Called with traced arguments (inside another
transform), a jitted function becomes one CALL node of its traced body there (tgfn/transforms/subgraph.py).
"""
from __future__ import annotations

import functools
import gc
import inspect
import operator
import sys
import sysconfig
import threading
import warnings
import weakref
from typing import Any, Callable, Optional, Sequence, Union

from tgfn.array import Array, TracedScalar, _check_scalar_fits, _weak_scalar, as_array
from tgfn.codegen import search
from tgfn.device import Device
from tgfn.dtype import DType, result_type
from tgfn.engine.jit import CompiledGraph
from tgfn.engine.realize import buffer_uop
from tgfn.helpers import settings, track, track_begin, track_end
from tgfn.transforms.jit_memo import ResultMemo, plan_for
from tgfn.transforms.state import tracing_state
from tgfn.transforms.subgraph import call_traced
from tgfn.transforms.trace import flatten_outputs, fn_name, is_traced, placeholder
from tgfn.tree import flatten, unflatten
from tgfn.uop.ops import Ops, UOp, normalize_const, toposort
from tgfn.viz.locations import at_user_line

IntOrSeq = Union[int, Sequence[int]]


def refcounts_are_exact(implementation: str, version: tuple[int, int], gil_disabled_build: bool,
                        gil_enabled: bool) -> bool:
  """Whether sys.getrefcount is exact and immediate, so that a count equal to the references the jit
  cache itself holds proves nobody else holds the object: true for the standard (GIL) CPython 3.10 to
  3.13. Free-threaded builds (3.13t) defer and bias counts; 3.14 borrows references on the stack
  without counting them; other implementations have no counts at all."""
  return implementation == "cpython" and (3, 10) <= version <= (3, 13) and not gil_disabled_build and gil_enabled


# Recycling a dropped result's buffer (see JitFunction._run) is on only where the proof holds.
RECYCLE_RESULTS = refcounts_are_exact(sys.implementation.name, sys.version_info[:2],
                                      bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                                      getattr(sys, "_is_gil_enabled", lambda: True)())


def _as_tuple(x: Any) -> tuple:
  if x is None: return ()
  return (x,) if isinstance(x, (int, str)) else tuple(x)


# a function compiled this many times warns at its next compile: a retrace per call is a slow program
RETRACE_WARNING_AFTER = 4


class RetraceWarning(UserWarning):
  """A jitted function keeps compiling for new signatures (see JitFunction._explain)."""


def _log_compiles() -> bool: return settings.TGFN_LOG_COMPILES


def report_compile(explain: Callable[[], str], compiled_before: int, name: str, stacklevel: int) -> None:
  """Say that `name` compiles (again): every time with TGFN_LOG_COMPILES, else once, as a RetraceWarning
  at its compile after RETRACE_WARNING_AFTER ones. `explain()` says for what and why; `stacklevel` is the
  warning's, counted from the caller."""
  if _log_compiles(): print(explain(), file=sys.stderr)
  elif compiled_before == RETRACE_WARNING_AFTER:
    warnings.warn(f"{explain()}\n  {name} has now compiled {compiled_before + 1} times; TGFN_LOG_COMPILES=1 explains "
                  "every compile", RetraceWarning, stacklevel=stacklevel + 1)


def leaf_changes(before: Sequence[Any], now: Sequence[Any]) -> str:
  """The leaves whose signature differs between two compiles' keys."""
  diffs = [f"leaf {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(before, now)) if a != b]
  return "; ".join(diffs) or "an equivalent signature was evicted"


class _StatePlan:
  """The Tensors a traced function touched: implicit inputs (read, not passed) and write-backs.
  Each write-back is (kind 'data' or 'grad', target, output index): the target is the Tensor itself,
  or ('arg', leaf index) for an explicit Tensor argument, which may be a different object next call."""
  def __init__(self, implicit: list, writebacks: list[tuple[str, Any, Optional[int]]], n_outputs: int):
    self.implicit, self.writebacks, self.n_outputs = implicit, writebacks, n_outputs
    self.signatures = [(t._data.shape, t._data.dtype) for t in implicit]


class _Entry:
  def __init__(self, graph: CompiledGraph, out_tree: Any, passthrough: list[Optional[int]],
               state: Optional[_StatePlan] = None, input_plan: Optional[list[tuple[int, Optional[DType]]]] = None):
    self.graph, self.out_tree, self.state = graph, out_tree, state
    # with Python scalar arguments: per graph input, (leaf index, None) for an array leaf's buffer, or
    # (leaf index, dtype) for a scalar converted to a dtype the trace used it as; None: leaves map 1:1
    self.input_plan = input_plan
    self.passthrough = passthrough  # per output: the index of the input leaf it simply returns, or None
    self.computes_all = all(j is None for j in passthrough)
    self.out_shapes = [graph.slots[s].shape for s in graph.output_slots]
    # results off the default device are committed there (UOp.committed): only a committed input took it there
    self.out_committed = [graph.slots[s].device != Device.DEFAULT for s in graph.output_slots]
    self.single_output = out_tree == flatten(0)[1] and passthrough == [None] and state is None
    self.recycle = self.single_output and graph.can_reuse_outputs and RECYCLE_RESULTS
    self.last: Optional[Array] = None
    self.refs = (0, 0, 0)
    # one call at a time when calls share memory: the graph's intermediates. (Recycling needs no lock:
    # a thread reusing `last` holds a reference to it, so any other thread's count check fails.)
    self.lock = threading.Lock() if graph.has_scratch else None
    # which elements of the result a later call may take back unflattened (jit_memo.py); memo: the last
    # call's result, remembered for that
    self.result_plan = plan_for(out_tree) if state is None else None
    self.memo: Optional[ResultMemo] = None


class Lowered:
  """What `jit(f).lower(*args)` returns: the compiled kernels, without running them."""
  def __init__(self, graph: CompiledGraph): self.graph = graph
  @property
  def kernels(self) -> list: return self.graph.kernels
  def as_text(self) -> str: return self.graph.source()
  def _repr_html_(self) -> str:  # Jupyter: the kernels with highlighted source (tgfn/viz/notebook.py)
    from tgfn.viz.notebook import lowered_html
    return lowered_html(self)


def _collector_paused(fn: Callable) -> Callable:
  """`fn` with Python's cyclic garbage collector off while it runs (and its state as it was after).
  Tracing and compiling allocate tens of thousands of short-lived objects that reference counting frees,
  and the collections they trigger walk every object of the process: 25-35 ms of the MLP step's cold first
  call, a full collection most of it."""
  @functools.wraps(fn)
  def paused(*args: Any, **kwargs: Any) -> Any:
    if not gc.isenabled(): return fn(*args, **kwargs)
    gc.disable()
    try:
      return fn(*args, **kwargs)
    finally:
      gc.enable()
  return paused


class JitFunction:
  def __init__(self, fun: Callable, static_argnums: IntOrSeq = (), static_argnames: Union[str, Sequence[str]] = (),
               donate_argnums: IntOrSeq = (), beam: Optional[int] = None):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.static_argnums = _as_tuple(static_argnums)
    self.static_argnames = _as_tuple(static_argnames)
    self.donate_argnums = _as_tuple(donate_argnums)
    self.beam = beam  # the BEAM search width for this function's kernels (None: the BEAM= variable)
    self._cache: dict[Any, _Entry] = {}
    self._flat_cache: dict[tuple, _Entry] = {}  # the same entries, keyed for calls with only Array arguments
    # calls given the last call's results back (jit_memo.py): the entry that returned them, and the whole
    # call's tree structure per token of the arguments' structures
    self._last: Optional[_Entry] = None
    self._memo_trees: dict[tuple, Any] = {}
    # the entry of the last all-Array call and weak references to its arguments' nodes: a call given the very
    # same computed arrays again (a loop over one input) skips building and looking up their signature
    self._same_args: Optional[tuple[_Entry, list[weakref.ref]]] = None
    self._keys_seen: list[Any] = []
    self.trace_count = 0
    # threads whose first calls race trace and compile once; reentrant: tracing may call this function
    self._compile_lock = threading.RLock()

  def _cache_size(self) -> int: return len(self._cache)
  def clear_cache(self) -> None:
    self._cache.clear()
    self._flat_cache.clear()
    self._last = self._same_args = None
    self._memo_trees.clear()  # (its tokens name structures of the entries just dropped)

  def _static_positions(self, n_args: int) -> set[int]:
    return {i % n_args for i in self.static_argnums if -n_args <= i < n_args}

  def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
    if not (kwargs or self.static_argnums or self.static_argnames): return args, kwargs, ()
    static_nums = self._static_positions(len(args))
    static = []
    for i in sorted(static_nums): static.append(("arg", i, args[i]))
    for k in self.static_argnames:
      if k in kwargs: static.append(("kwarg", k, kwargs[k]))
    for _, name, value in static:
      try:
        hash(value)
      except TypeError:
        raise TypeError(f"jit: static argument {name!r} of {fn_name(self.fun)} must be hashable, got "
                        f"{type(value).__name__}; pass a tuple instead of a list, or make it a traced argument"
                        f"{at_user_line()}") from None
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_nums)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
    return dyn_args, dyn_kwargs, tuple(static)

  def __call__(self, *args: Any, **kwargs: Any) -> Any:
    if not kwargs:  # fast path: every argument an already-computed Array, a signature seen before
      if (same := self._same_args) is not None and len(args) == len(same[1]):
        inputs = []
        for a, node in zip(args, same[1]):
          if type(a) is not Array or (u := a.uop) is not node(): break
          inputs.append(u.buffer)
        else:
          return self._run(same[0], inputs, args)
      if (bound := _bind_computed(args)) is not None and (entry := self._flat_cache.get(bound[0])) is not None:
        self._same_args = (entry, [weakref.ref(a.uop) for a in args])
        return self._run(entry, bound[1], args)
    remembered = None
    if not kwargs and not self.static_argnums and (last := self._last) is not None and last.memo is not None:
      remembered = last.memo.flatten(args)
      if remembered is not None and (in_tree := self._memo_trees.get(remembered[1])) is not None:
        leaves = remembered[0]
        if (bound := _bind_computed(leaves)) is not None and \
            (entry := self._cache.get((in_tree, bound[0], (), _placement(bound[0])))) is not None:
          self._last = entry
          return self._run(entry, bound[1], leaves)
    dyn_args, dyn_kwargs, static = self._split(args, kwargs)
    leaves, in_tree = flatten((dyn_args, dyn_kwargs))
    if remembered is not None and len(leaves) == len(remembered[0]) and all(map(operator.is_, leaves, remembered[0])):
      self._memo_trees[remembered[1]] = in_tree  # the next call with these structures skips the flatten
    bound = _bind_leaves(leaves)
    # inside another transform's trace (grad, vmap, an outer jit) the function is one CALL of its body there
    if bound is None: return call_traced(self.fun, args, kwargs, self._static_positions(len(args)),
                                         self.static_argnames, fn_name(self.fun))
    sig, inputs = bound
    key = (in_tree, sig, static, _placement(sig))
    entry = self._cache.get(key)
    if entry is None:
      with self._compile_lock:
        if (entry := self._cache.get(key)) is None:
          entry = self._compile(key, args, kwargs, leaves, in_tree, static)
          if sig and not kwargs and not static and in_tree == flatten((tuple(range(len(args))), {}))[1]:
            self._flat_cache[sig] = entry
    self._last = entry
    return self._run(entry, inputs, leaves)

  @staticmethod
  def _run(entry: _Entry, inputs: list, leaves: Sequence[Any]) -> Any:
    if entry.input_plan is not None: inputs = [inputs[i] if dtype is None else _scalar_buffer(inputs[i], dtype)
                                               for i, dtype in entry.input_plan]
    if entry.lock is None: return JitFunction._launch(entry, inputs, leaves)
    with entry.lock: return JitFunction._launch(entry, inputs, leaves)

  @staticmethod
  def _launch(entry: _Entry, inputs: list, leaves: Sequence[Any]) -> Any:
    if entry.recycle:
      # The previous result is recycled when nothing but this cache refers to it anymore: not the Array
      # (not even a weak reference), not its BUFFER node (no lazy graph uses it), not its Buffer. Nobody
      # can see it change, and the call skips an allocation and two object constructions. Only on
      # interpreters whose reference counts are exact (RECYCLE_RESULTS).
      last = entry.last
      if last is not None and sys.getrefcount(last) == entry.refs[0] and not weakref.getweakrefcount(last) and \
          sys.getrefcount(last.uop) == entry.refs[1] and sys.getrefcount(last.uop.buffer) == entry.refs[2]:
        entry.graph.replay_into(inputs, last.uop.buffer)
        return last
      out = entry.last = _result(entry.graph(inputs)[0], entry.out_shapes[0], entry.out_committed[0])
      entry.refs = (sys.getrefcount(out), sys.getrefcount(out.uop), sys.getrefcount(out.uop.buffer))
      return out
    if entry.state is not None: inputs = inputs + _implicit_buffers(entry.state)
    results = entry.graph(inputs)
    if entry.single_output: return _result(results[0], entry.out_shapes[0], entry.out_committed[0])
    made = zip(results, entry.out_shapes, entry.out_committed)
    if entry.computes_all: outs = [_result(*out) for out in made]
    else: outs = [_result(*out) if j is None else _leaf_value(leaves[j]) for out, j in zip(made, entry.passthrough)]
    if entry.state is not None:
      _write_back(entry.state, outs, leaves)
      outs = outs[:entry.state.n_outputs]
    result = unflatten(entry.out_tree, outs)
    if entry.result_plan is not None: entry.memo = ResultMemo(entry.result_plan, result, outs)
    return result

  def _trace(self, args: tuple, kwargs: dict, leaves: list, in_tree: Any) -> tuple[list[Array], list[Array], Any,
                                                                               Optional[_StatePlan], Optional[list]]:
    """Run the function on placeholders. Returns the leaves' placeholders, the outputs, their tree, the
    Tensor state plan and the input plan (see _Entry) when there are Python scalar arguments."""
    from tgfn.tensor import Tensor
    made: dict[tuple[int, DType], UOp] = {}  # (leaf index, dtype) -> the placeholder a scalar became
    holders: list[Array] = []
    for i, x in enumerate(leaves):
      if (value := _weak_value(x)) is not None: holders.append(_traced_scalar(i, value, made))
      else:
        a = _leaf_value(x)
        holders.append(Array(placeholder(a.shape, a.dtype, a.uop.device, a.uop.committed)))
    # explicit Tensor arguments are passed as themselves; their reads give the placeholder (tensor state)
    traced_args, traced_kwargs = unflatten(in_tree, [x if isinstance(x, Tensor) else h for x, h in zip(leaves, holders)])
    it = iter(traced_args)
    static_nums = self._static_positions(len(args))
    full_args = [args[i] if i in static_nums else next(it) for i in range(len(args))]
    full_kwargs = {k: (kwargs[k] if k in self.static_argnames else traced_kwargs[k]) for k in kwargs}
    self.trace_count += 1
    with tracing_state() as st:
      for x, h in zip(leaves, holders):
        if isinstance(x, Tensor): st.bind_argument(x, h)
      out = self.fun(*full_args, **full_kwargs)
    outs, out_tree = flatten_outputs(out, fn_name(self.fun))
    arg_position = {id(x): k for k, x in enumerate(leaves) if isinstance(x, Tensor)}
    implicit = [(t, h) for key, (t, h) in st.reads.items() if key not in arg_position]
    input_plan = _input_plan(holders, made, outs) if made or any(type(h) is TracedScalar for h in holders) else None
    if not implicit and not st.writes and not st.grad_writes: return holders, outs, out_tree, None, input_plan
    target = lambda t: ("arg", arg_position[id(t)]) if id(t) in arg_position else t
    writebacks: list[tuple[str, Any, Optional[int]]] = []
    n_outputs = len(outs)
    for t, value in st.writes.values():
      writebacks.append(("data", target(t), len(outs)))
      outs.append(value)
    for t, grad in st.grad_writes.values():
      writebacks.append(("grad", target(t), None if grad is None else len(outs)))
      if grad is not None: outs.append(grad._data)
    plan = _StatePlan([t for t, _ in implicit], writebacks, n_outputs)
    return holders + [h for _, h in implicit], outs, out_tree, plan, input_plan

  @_collector_paused
  def _compile(self, key: Any, args: tuple, kwargs: dict, leaves: list, in_tree: Any, static: tuple,
               plan_cache: bool = True) -> _Entry:
    report_compile(lambda: self._explain(key), len(self._keys_seen), fn_name(self.fun), stacklevel=3)
    track_begin(f"jit {fn_name(self.fun)}", None)
    try:
      holders, outs, out_tree, plan, input_plan = self._trace(args, kwargs, leaves, in_tree)
    except BaseException:
      track_end(())  # VIZ: close the capture the failed trace opened
      raise
    track("trace", holders, outs)
    inputs, donated = [h.uop for h in holders], self._donated_leaves(args)
    if input_plan is not None:  # the leaves' inputs are the planned ones; implicit Tensor inputs follow
      inputs = [made_uop for _, _, made_uop in input_plan] + inputs[len(leaves):]
      donated = [k for k, (i, dtype, _) in enumerate(input_plan) if dtype is None and i in set(donated)]
      input_plan = [(i, dtype) for i, dtype, _ in input_plan]
    with search.beam(self.beam):
      graph = CompiledGraph(inputs, [o.uop for o in outs], donated, fn_name(self.fun), plan_cache=plan_cache)
    track_end(graph.kernels)
    # an output that is a traced input's placeholder is that input itself: keep the input's position (not
    # this call's value), so every later call returns its own argument. Implicit inputs are not leaves:
    # an output equal to one is computed (copied) instead.
    index = {h.uop: i for i, h in enumerate(holders[:len(leaves)])}
    if key not in self._cache: self._keys_seen.append(key)  # (lower() recompiles an entry from the plan cache)
    entry = self._cache[key] = _Entry(graph, out_tree, [index.get(o.uop) for o in outs], plan, input_plan)
    return entry

  def _donated_leaves(self, args: tuple) -> list[int]:
    """Indices (among the flattened traced inputs) of the leaves of the donated positional arguments."""
    n = len(args)
    static_nums = self._static_positions(n)
    donated_nums = {i % n for i in self.donate_argnums if -n <= i < n}
    out, position = [], 0
    for i in range(n):
      if i in static_nums: continue
      count = len(flatten(args[i])[0])
      if i in donated_nums: out.extend(range(position, position + count))
      position += count
    return out

  def _explain(self, key: Any) -> str:
    tree, sig, static, placement = key
    head = f"tgfn.jit: compiling {fn_name(self.fun)} for signature {list(sig)}" + (f" static={static}" if static else "")
    if not self._keys_seen: return head
    prev_tree, prev_sig, prev_static, prev_placement = self._keys_seen[-1]
    if prev_tree != tree: why = f"the input pytree changed: {prev_tree} -> {tree}"
    elif prev_static != static: why = f"a static argument changed: {prev_static} -> {static}"
    elif prev_placement != placement: why = f"the default device changed: {prev_placement} -> {placement}"
    else: why = leaf_changes(prev_sig, sig)
    return f"{head}\n  retracing because {why}"

  def lower(self, *args: Any, **kwargs: Any) -> Lowered:
    """Trace and compile for these arguments without running; `.as_text()` shows the kernels."""
    dyn_args, dyn_kwargs, static = self._split(args, kwargs)
    leaves, in_tree = flatten((dyn_args, dyn_kwargs))
    bound = _bind_leaves(leaves, compute=False)
    if bound is None: raise TypeError(f"jit(...).lower needs concrete arguments, got traced values{at_user_line()}")
    key = (in_tree, bound[0], static, _placement(bound[0]))
    with self._compile_lock:
      entry = self._cache.get(key)
      # kernels loaded from the plan cache keep only their sources: lowering shows the full kernels
      if entry is None or entry.graph.from_plan:
        entry = self._compile(key, args, kwargs, leaves, in_tree, static, plan_cache=False)
    return Lowered(entry.graph)

  def __get__(self, obj: Any, objtype: Any = None) -> Any:
    return self if obj is None else functools.partial(self, obj)


_new_object = object.__new__


def _result(buffer: Any, shape: tuple[int, ...], committed: bool) -> Array:
  """Array(buffer_uop(buffer, shape)) without the constructor's call (a BUFFER node has no source line to
  find): every result of every jit call is one."""
  x = _new_object(Array)
  x.uop = buffer_uop(buffer, shape, committed)
  return x


def _bind_computed(leaves: Sequence[Any]) -> Optional[tuple[tuple, list]]:
  """_bind_leaves when every leaf is an already-computed Array (the common call), in one pass; else None."""
  sig, buffers = [], []
  for x in leaves:
    if type(x) is not Array or (u := x.uop).op is not Ops.BUFFER: return None
    sig.append((u.arg[2], u.dtype.name, u.arg[1]))
    buffers.append(u.buffer)
  return tuple(sig), buffers


def _bind_leaves(leaves: list, compute: bool = True) -> Optional[tuple[tuple, list]]:
  """(cache-key signature, input buffers) for the flattened arguments, in one pass; None if any is
  traced. A Python int or float's signature is its weak type (its value is traced, so a new value does
  not retrace), and its Python value stands in for a buffer (the entry's input plan converts it); an
  array's is (shape, dtype, device). With compute=False lazy arguments stay lazy."""
  if (bound := _bind_computed(leaves)) is not None: return bound
  from tgfn.tensor import Tensor
  if compute: _realize_lazy_together(leaves)
  sig, buffers = [], []
  for x in leaves:
    if type(x) is Array and (u := x.uop).op is Ops.BUFFER:  # the common case first: a computed array
      sig.append((u.arg[2], u.dtype.name, u.arg[1]))
      buffers.append(u.buffer)
      continue
    if (value := _weak_value(x)) is not None:
      sig.append((type(value).__name__, Device.DEFAULT))
      buffers.append(value)
      continue
    if isinstance(x, Tensor): x = x._data  # bound by position; its reads inside are the placeholder
    if isinstance(x, Array):
      u = x.uop
      if u.op is not Ops.BUFFER:
        if is_traced(u): return None
        if not compute:
          sig.append((x.shape, x.dtype.name, u.device or Device.DEFAULT))
          continue
        u = x._value("jit argument")
      sig.append((u.arg[2], u.dtype.name, u.arg[1]))
    else:  # a Python bool or host data: copied in directly, no kernel
      u = Array.from_data(x, result_type(x) if isinstance(x, bool) else None).uop
      sig.append((u.arg[2], u.dtype.name, u.arg[1]))
    buffers.append(u.buffer)
  return tuple(sig), buffers


def _realize_lazy_together(leaves: list) -> None:
  """Compute the lazy array arguments in one schedule, their kernels compiled as one batch (a model's
  parameters fresh from their initializers are dozens of small graphs), unless the call is traced."""
  from tgfn.tensor import Tensor
  arrays = [x._data if isinstance(x, Tensor) else x for x in leaves]
  lazy = [a for a in arrays if isinstance(a, Array) and a.uop.op is not Ops.BUFFER]
  if len(lazy) > 1 and not any(is_traced(a.uop) for a in lazy): Array.realize_all(lazy)


def _placement(sig: tuple) -> Optional[str]:
  """Where a call with no array or scalar argument runs: the default device (DEV=), which is then part of
  the cache key, so `with tgfn.Context(DEV=...)` places it anew. Otherwise the arguments' devices decide."""
  return None if sig else Device.DEFAULT


def _weak_value(x: Any) -> Optional[Union[int, float]]:
  """A weakly typed scalar argument (Python int or float, or a NumPy one, as eager promotion treats them)
  as a plain int or float; None for anything else (bools are strongly typed; a complex scalar is passed as
  complex64 data, which promotes as the weak complex would with every dtype)."""
  value = _weak_scalar(x)
  if value is None or isinstance(value, (bool, complex)): return None
  return float(value) if isinstance(value, float) else int(value)


def _traced_scalar(leaf: int, value: Union[int, float], made: dict[tuple[int, DType], UOp]) -> TracedScalar:
  def materialize(dtype: DType) -> UOp:
    if (leaf, dtype) not in made: made[leaf, dtype] = placeholder((), dtype, None)
    return made[leaf, dtype]
  return TracedScalar(materialize(result_type(value)), type(value), materialize)


def _input_plan(holders: list[Array], made: dict[tuple[int, DType], UOp],
                outs: list[Array]) -> list[tuple[int, Optional[DType], UOp]]:
  """(leaf index, dtype or None, placeholder) per graph input: every array leaf, and each dtype a scalar
  leaf was used as -- only those the outputs depend on, so a value is range-checked only against the
  dtypes it really becomes (x * 2**40 with a float32 x never needs 2**40 to fit an int32)."""
  used = set(toposort([o.uop for o in outs]))
  plan: list[tuple[int, Optional[DType], UOp]] = []
  for i, h in enumerate(holders):
    if type(h) is not TracedScalar: plan.append((i, None, h.uop))
    else: plan.extend((i, dtype, u) for (leaf, dtype), u in made.items() if leaf == i and u in used)
  return plan


def _scalar_buffer(value: Union[int, float], dtype: DType) -> Any:
  """The buffer eager code's constant `Array.const(value, dtype)` would hold (same range check)."""
  _check_scalar_fits(value, dtype)
  return Array.from_data(normalize_const(value, dtype), dtype).uop.buffer


def _leaf_value(leaf: Any) -> Array:
  from tgfn.tensor import Tensor
  return leaf._data if isinstance(leaf, Tensor) else as_array(leaf)


def _implicit_buffers(plan: _StatePlan) -> list:
  out = []
  for t, (shape, dtype) in zip(plan.implicit, plan.signatures):
    value = t._data
    if value.shape != shape or value.dtype != dtype:
      raise ValueError(f"jit: a Tensor the function reads changed from {shape} {dtype.name} to {value.shape} "
                       f"{value.dtype.name} since it was traced; call clear_cache() on the jitted function{at_user_line()}")
    out.append(value._value("jit tensor state").buffer)
  return out


def _write_back(plan: _StatePlan, outs: list[Array], leaves: Sequence[Any]) -> None:
  """Give the Tensors the function assigned (or set .grad on) their new values."""
  from tgfn.tensor import Tensor
  for kind, target, index in plan.writebacks:
    tensor = leaves[target[1]] if isinstance(target, tuple) else target
    if kind == "data": tensor._data = outs[index]
    else: tensor._grad = None if index is None else Tensor(outs[index])


def jit(fun: Optional[Callable] = None, *, static_argnums: IntOrSeq = (), static_argnames: Union[str, Sequence[str]] = (),
        donate_argnums: IntOrSeq = (), beam: Optional[int] = None, in_shardings: Any = None,
        out_shardings: Any = None) -> Any:
  """Compile `fun` (also usable as `@jit` or `@jit(static_argnums=...)`). `beam=n` chooses its kernels'
  optimizations by a timed search of width n, as BEAM=n does (docs/compiler.md). With `in_shardings` /
  `out_shardings` (NamedShardings), fun is partitioned over their mesh (tgfn/sharding/partition.py)."""
  if in_shardings is not None or out_shardings is not None:
    from tgfn.sharding.partition import sharded_jit
    make = lambda f: sharded_jit(f, in_shardings, out_shardings)  # noqa: E731
    return make if fun is None else make(fun)
  if fun is None:
    return lambda f: JitFunction(f, static_argnums, static_argnames, donate_argnums, beam)
  if not callable(fun): raise TypeError(f"jit expects a function, got {type(fun).__name__}{at_user_line()}")
  if inspect.isclass(fun): raise TypeError(f"jit expects a function, got a class{at_user_line()}")
  return JitFunction(fun, static_argnums, static_argnames, donate_argnums, beam)
