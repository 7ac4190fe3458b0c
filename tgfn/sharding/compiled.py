"""pmap, shard_map and jit with shardings compiled once per input structure, as jit is.

A mapped function's whole call -- cutting the inputs into per-device blocks, tracing f on one block,
unrolling it over the devices with its collectives, assembling the outputs -- is traced once on
placeholders and compiled into one CompiledGraph (tgfn/engine/jit.py). The cache key is the input
pytree structure and each leaf's (shape, dtype, device), plus what the caller adds (the devices a pmap
maps over, the processes of the job). A sharded array (tgfn/sharding/named.py) is keyed by its sharding
instead of a device: its blocks are the graph's inputs, and a sharded output comes back as one, its blocks
the graph's outputs. A second call with the same key binds the inputs' buffers and replays the kernels: f
is not called again. A compile is reported as jit reports its own (TGFN_LOG_COMPILES, RetraceWarning).
A graph that spans several devices replays each device's steps on that device's queue, so the devices
compute concurrently (tgfn/engine/queues.py).

Called with traced inputs (inside grad, vmap or jit), the mapped function is not compiled: it builds its
unrolled graph in the enclosing trace, which that transform then handles like any other graph.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from tgfn.array import Array, as_array
from tgfn.engine.jit import CompiledGraph
from tgfn.engine.queues import replay_on_queues
from tgfn.engine.realize import buffer_uop
from tgfn.sharding.named import NamedSharding, ShardedArray
from tgfn.transforms.jit import leaf_changes, report_compile
from tgfn.transforms.trace import flatten_outputs, fn_name, is_traced, placeholder
from tgfn.tree import flatten, unflatten
from tgfn.uop.ops import Ops

Layout = Optional[tuple[NamedSharding, tuple[int, ...]]]  # a sharded value's sharding and whole shape, or None


@dataclass
class _Entry:
  graph: CompiledGraph
  out_tree: Any
  out_shapes: list[tuple[int, ...]]  # of the graph's outputs: a sharded output's blocks one by one
  out_layouts: list[Layout]          # of the output leaves
  multi_device: bool
  lock: Optional[threading.Lock]  # the graph's intermediates are its own: one call at a time (None: none)


def _parts(x: Array) -> list[Array]:
  """What an array is to the graph: a sharded array's blocks, any other array itself."""
  return list(x.blocks) if isinstance(x, ShardedArray) else [x]


def _signature(x: Array) -> tuple:
  return (x.shape, x.dtype.name, x.sharding if isinstance(x, ShardedArray) else x.uop.device)


def _buffers(arrays: list[Array]) -> list:
  """The arrays' buffers, computing the lazy ones together."""
  Array.realize_all(arrays)
  return [x._value("a mapped function's argument").buffer for x in arrays]


class CompiledMap:
  """`run(*args)` (a pmap's, shard_map's or sharded jit's whole call) compiled per input structure; `kind`
  names the transform in compile reports, `label` the graph in DEBUG lines."""

  def __init__(self, run: Callable[..., Any], fun: Callable, kind: str, label: str = "mapped"):
    self.run, self.name, self.kind, self.label = run, fn_name(fun), kind, label
    self._entries: dict[tuple, _Entry] = {}
    self._keys_seen: list[tuple] = []
    self._lock = threading.Lock()

  def __call__(self, args: tuple, extra_key: tuple = ()) -> Any:
    leaves, in_tree = flatten(args)
    if any(isinstance(x, Array) and x.uop.op is not Ops.BUFFER and is_traced(x.uop) for x in leaves):
      return self.run(*args)  # inside another transform's trace: its graph, handled by that transform
    arrays = [as_array(x) for x in leaves]
    inputs = _buffers([p for a in arrays for p in _parts(a)])
    entry = self._entry(arrays, in_tree, extra_key)
    if entry.lock is None: buffers = self._replay(entry, inputs)
    else:
      with entry.lock: buffers = self._replay(entry, inputs)
    return unflatten(entry.out_tree, self._outputs(entry, buffers))

  def graph(self, args: tuple, extra_key: tuple = ()) -> CompiledGraph:
    """The compiled graph for these (concrete) arguments, compiling it if this structure is new."""
    leaves, in_tree = flatten(args)
    return self._entry([as_array(x) for x in leaves], in_tree, extra_key).graph

  def _entry(self, arrays: list[Array], in_tree: Any, extra_key: tuple) -> _Entry:
    key = (in_tree, tuple(_signature(a) for a in arrays), extra_key)
    if (entry := self._entries.get(key)) is None:
      with self._lock:
        if (entry := self._entries.get(key)) is None: entry = self._entries[key] = self._compile(key, arrays, in_tree)
    return entry

  @staticmethod
  def _replay(entry: _Entry, inputs: list) -> list:
    return replay_on_queues(entry.graph, inputs) if entry.multi_device else entry.graph(inputs)

  @staticmethod
  def _outputs(entry: _Entry, buffers: list) -> list[Array]:
    """The output leaves from the graph's output buffers (a sharded leaf takes one per block), each committed
    to the device it was computed on, as the mapped function's layout says."""
    values = iter([Array(buffer_uop(b, s, committed=True)) for b, s in zip(buffers, entry.out_shapes)])
    out = []
    for layout in entry.out_layouts:
      if layout is None: out.append(next(values))
      else:
        sharding, shape = layout
        out.append(ShardedArray([next(values) for _ in sharding.mesh.device_names], sharding, shape))
    return out

  def _compile(self, key: tuple, arrays: list[Array], in_tree: Any) -> _Entry:
    report_compile(lambda: self._explain(key), len(self._keys_seen), self.name, stacklevel=5)
    self._keys_seen.append(key)
    holders = [self._holder(a) for a in arrays]
    outs, out_tree = flatten_outputs(self.run(*unflatten(in_tree, holders)), self.name)
    inputs, outputs = [p.uop for h in holders for p in _parts(h)], [p.uop for o in outs for p in _parts(o)]
    graph = CompiledGraph(inputs, outputs, name=f"{self.label} {self.name}")
    devices = {info.device for info in graph.slots}
    layouts = [(o.sharding, o.shape) if isinstance(o, ShardedArray) else None for o in outs]
    return _Entry(graph, out_tree, [u.shape for u in outputs], layouts, len(devices) > 1,
                  threading.Lock() if graph.has_scratch else None)

  @staticmethod
  def _holder(x: Array) -> Array:
    """A placeholder standing for x (a sharded one of placeholder blocks)."""
    if not isinstance(x, ShardedArray): return Array(placeholder(x.shape, x.dtype, x.uop.device))
    return ShardedArray([Array(placeholder(b.shape, b.dtype, b.uop.device)) for b in x.blocks], x.sharding, x.shape)

  def _explain(self, key: tuple) -> str:
    tree, sig, extra = key
    head = f"tgfn.{self.kind}: compiling {self.name} for signature {list(sig)}"
    if not self._keys_seen: return head
    prev_tree, prev_sig, prev_extra = self._keys_seen[-1]
    if prev_tree != tree: why = f"the input pytree changed: {prev_tree} -> {tree}"
    elif prev_extra != extra: why = f"the devices or processes changed: {prev_extra} -> {extra}"
    else: why = leaf_changes(prev_sig, sig)
    return f"{head}\n  retracing because {why}"
