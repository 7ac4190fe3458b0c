"""pmap and shard_map compiled once per input structure, as jit is.

A mapped function's whole call -- cutting the inputs into per-device blocks, tracing f on one block,
unrolling it over the devices with its collectives, assembling the outputs -- is traced once on
placeholders and compiled into one CompiledGraph (tgfn/engine/jit.py). The cache key is the input
pytree structure and each leaf's (shape, dtype, device), plus what the caller adds (the devices a pmap
maps over, the processes of the job). A second call with the same key binds the inputs' buffers and
replays the kernels: f is not called again. A graph that spans several devices replays each device's
steps on that device's queue, so the devices compute concurrently (tgfn/engine/queues.py).

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
from tgfn.transforms.trace import flatten_outputs, fn_name, is_traced, placeholder
from tgfn.tree import flatten, unflatten
from tgfn.uop.ops import Ops


@dataclass
class _Entry:
  graph: CompiledGraph
  out_tree: Any
  out_shapes: list[tuple[int, ...]]
  multi_device: bool
  lock: Optional[threading.Lock]  # the graph's intermediates are its own: one call at a time (None: none)


def _concrete(leaf: Any) -> Array:
  """The leaf as a computed Array (a BUFFER node), computing a lazy one."""
  x = as_array(leaf)
  return x if x.uop.op is Ops.BUFFER else Array(x._value("a mapped function's argument"))


class CompiledMap:
  """`run(*args)` (a pmap's or shard_map's whole unrolled call) compiled per input structure."""

  def __init__(self, run: Callable[..., Any], fun: Callable):
    self.run, self.name = run, fn_name(fun)
    self._entries: dict[tuple, _Entry] = {}
    self._lock = threading.Lock()

  def __call__(self, args: tuple, extra_key: tuple = ()) -> Any:
    leaves, in_tree = flatten(args)
    if any(isinstance(x, Array) and x.uop.op is not Ops.BUFFER and is_traced(x.uop) for x in leaves):
      return self.run(*args)  # inside another transform's trace: its graph, handled by that transform
    arrays = [_concrete(x) for x in leaves]
    key = (in_tree, tuple((a.shape, a.dtype, a.uop.device) for a in arrays), extra_key)
    entry = self._entries.get(key)
    if entry is None:
      with self._lock:
        if (entry := self._entries.get(key)) is None: entry = self._entries[key] = self._compile(arrays, in_tree)
    inputs = [a.uop.buffer for a in arrays]
    if entry.lock is None: buffers = self._replay(entry, inputs)
    else:
      with entry.lock: buffers = self._replay(entry, inputs)
    # each result is committed to the device it was computed on, as the mapped function's layout says
    return unflatten(entry.out_tree, [Array(buffer_uop(b, s, committed=True)) for b, s in zip(buffers, entry.out_shapes)])

  @staticmethod
  def _replay(entry: _Entry, inputs: list) -> list:
    return replay_on_queues(entry.graph, inputs) if entry.multi_device else entry.graph(inputs)

  def _compile(self, arrays: list[Array], in_tree: Any) -> _Entry:
    holders = [Array(placeholder(a.shape, a.dtype, a.uop.device)) for a in arrays]
    outs, out_tree = flatten_outputs(self.run(*unflatten(in_tree, holders)), self.name)
    graph = CompiledGraph([h.uop for h in holders], [o.uop for o in outs], name=f"mapped {self.name}")
    devices = {info.device for info in graph.slots}
    return _Entry(graph, out_tree, [o.shape for o in outs], len(devices) > 1,
                  threading.Lock() if graph.has_scratch else None)
