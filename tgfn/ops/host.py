"""Host-side kernels: a NumPy function (LAPACK through `numpy.linalg`, as JAX does on the CPU) run on
realized buffers, as one node of the graph.

A HOST node's arg is `(name, params, shape)`: the registered function's name, its static parameters
(sorted `(key, value)` pairs, so the node stays hashable) and its shape. Its sources are the inputs,
all with the same leading batch axes (NumPy's linalg functions loop over them). A function may have
several outputs (eigh's w and v, svd's u, s, vh): they are packed into one buffer, each flattened
along the last axis, `shape = batch + (sum of the outputs' core sizes,)`, and `host_call` slices them
back out with SHRINK and RESHAPE. One node, one buffer keeps the schedule, the engine and the jit
replay unchanged apart from "run this function here", and lets every transform see one primitive:

- jvp: the function's registered rule, given the inputs, the unpacked outputs and the input tangents,
  returns the output tangents, written with ordinary ops (and host calls on the *primal* values only,
  never on tangents), which are packed the same way;
- grad: that rule is linear in the tangents and built from primitives, so reverse mode transposes it
  (differentiating it with respect to placeholder tangents), as JAX derives VJPs from JVPs;
- vmap: the batch axis is one more leading axis of every input and of the output.

A function whose JVP rule calls host functions on the tangents (an FFT: it is linear) brings its own
`vjp` instead, since transposing such a rule would need the VJP being defined. The output dtype is the
first input's, or what `out_dtype` makes of it (a real FFT turns float32 into complex64 and back).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

from tgfn.uop.ops import Ops, UOp
from tgfn.viz import debug

from tgfn.dtype import DType

if TYPE_CHECKING:
  from tgfn.array import Array
  from tgfn.device import Buffer

Shape = tuple[int, ...]


@dataclass(frozen=True)
class HostFunction:
  name: str
  core_dims: tuple[int, ...]   # how many trailing axes of each input one call works on (2 for a matrix)
  impl: Callable[..., tuple[np.ndarray, ...]]          # NumPy arrays with leading batch axes -> outputs
  out_shapes: Callable[..., list[Shape]]              # (input core shapes, **params) -> output core shapes
  jvp: Callable[..., list[Optional[Array]]]          # (inputs, outputs, tangents or None, **params)
  vjp: Optional[Callable[..., list[Optional[Array]]]] = None  # (inputs, outputs, cotangents, **params)
  out_dtype: Callable[[DType], DType] = lambda dt: dt  # the first input's dtype -> the output dtype
  any_dtype: bool = False  # takes integers and bools too, not only floats (an MPI collective moves any value)


HOST_FUNCTIONS: dict[str, HostFunction] = {}


def register(fn: HostFunction) -> HostFunction:
  HOST_FUNCTIONS[fn.name] = fn
  return fn


def _parts(node: UOp) -> tuple[HostFunction, dict[str, Any], Shape, list[Shape]]:
  """The function, its params, the batch shape and the output core shapes of a HOST node."""
  name, params, _ = node.arg
  fn = HOST_FUNCTIONS[name]
  kw = dict(params)
  batch = node.src[0].shape[:len(node.src[0].shape) - fn.core_dims[0]]
  cores = [s.shape[len(s.shape) - k:] for s, k in zip(node.src, fn.core_dims)]
  return fn, kw, batch, fn.out_shapes(cores, **kw)


def check_host_node(node: UOp) -> Optional[str]:
  """What is wrong with a HOST node (for the spec checker), or None."""
  arg = node.arg
  if not (isinstance(arg, tuple) and len(arg) == 3 and isinstance(arg[0], str) and isinstance(arg[1], tuple)):
    return "HOST needs (name, params, shape)"
  if arg[0] not in HOST_FUNCTIONS: return f"no host function named {arg[0]!r}"
  fn = HOST_FUNCTIONS[arg[0]]
  if len(node.src) != len(fn.core_dims): return f"{arg[0]} takes {len(fn.core_dims)} inputs, got {len(node.src)}"
  if node.dtype is not fn.out_dtype(node.src[0].dtype):
    return f"dtype must be {fn.out_dtype(node.src[0].dtype).name}, the output dtype of {arg[0]}"
  if not (fn.any_dtype or node.dtype.is_inexact):
    return f"{arg[0]} takes float or complex values, got {node.dtype.name}"
  batches = {s.shape[:len(s.shape) - k] for s, k in zip(node.src, fn.core_dims)}
  if len(batches) != 1: return f"inputs have different batch shapes {sorted(batches)}"
  _, _, batch, outs = _parts(node)
  if arg[2] != batch + (sum(math.prod(c) for c in outs),):
    return f"shape {arg[2]} is not batch {batch} + packed outputs {outs}"
  return None


def run_host(node: UOp, out: Buffer, inputs: Sequence[Buffer]) -> None:
  """Compute a HOST node: read its inputs' buffers, call the NumPy function, write the packed outputs."""
  started = debug.clock()
  fn, kw, batch, cores = _parts(node)
  arrays = [b.numpy().reshape(s.shape) for b, s in zip(inputs, node.src)]
  results = fn.impl(*arrays, **kw)
  packed = [np.asarray(r, dtype=node.dtype.np).reshape(batch + (math.prod(c),)) for r, c in zip(results, cores)]
  out.copyin(np.concatenate(packed, axis=-1) if packed else np.zeros(node.shape, node.dtype.np))
  if started: debug.host_called(node, out, inputs, started)


# ---- the Array level


def host_call(name: str, inputs: Sequence[Array], **params: Any) -> list[Array]:
  """Call the host function `name` on `inputs` (same dtype, same batch axes); its outputs as Arrays."""
  from tgfn.array import Array
  fn = HOST_FUNCTIONS[name]
  batch = inputs[0].shape[:inputs[0].ndim - fn.core_dims[0]]
  cores = fn.out_shapes([x.shape[x.ndim - k:] for x, k in zip(inputs, fn.core_dims)], **params)
  shape = batch + (sum(math.prod(c) for c in cores),)
  node = UOp(Ops.HOST, fn.out_dtype(inputs[0].dtype), tuple(x.uop for x in inputs),
             (name, tuple(sorted(params.items())), shape))
  return _unpack(Array(node), batch, cores)


def _unpack(packed: Array, batch: Shape, cores: Sequence[Shape]) -> list[Array]:
  outs, offset = [], 0
  for core in cores:
    n = math.prod(core)
    part = packed._shrink(tuple((0, b) for b in batch) + ((offset, offset + n),))
    outs.append(part._reshape(batch + tuple(core)))
    offset += n
  return outs


def _pack(parts: Sequence[Array], batch: Shape) -> Array:
  from tgfn.ops.shape import concatenate
  flat = [p._reshape(batch + (math.prod(p.shape[len(batch):]),)) for p in parts]
  return flat[0] if len(flat) == 1 else concatenate(flat, axis=-1)


def host_jvp(y: UOp, tangents: Sequence[Optional[Array]]) -> Optional[Array]:
  """The tangent of a HOST node's packed output, from its registered rule."""
  from tgfn.array import Array
  fn, kw, batch, cores = _parts(y)
  outs = _unpack(Array(y), batch, cores)
  out_tangents = fn.jvp([Array(s) for s in y.src], outs, list(tangents), **kw)
  if all(t is None for t in out_tangents): return None
  parts = [t if t is not None else Array.const(0, y.dtype, o.shape) for t, o in zip(out_tangents, outs)]
  return _pack([p.astype(y.dtype) for p in parts], batch)


def host_vjp(ct: Array, y: UOp) -> tuple[Optional[Array], ...]:
  """Reverse mode: the transpose of the (linear) JVP rule applied to `ct`."""
  from tgfn.array import Array
  from tgfn.transforms.grad import backward
  from tgfn.transforms.trace import placeholder
  fn, kw, batch, cores = _parts(y)
  if fn.vjp is not None:
    outs = _unpack(Array(y), batch, cores)
    cts = _unpack(ct, batch, cores)
    return tuple(fn.vjp([Array(s) for s in y.src], outs, cts, **kw))
  holders = [placeholder(s.shape, s.dtype, s.device) for s in y.src]
  tangent = host_jvp(y, [Array(h) for h in holders])
  if tangent is None: return (None,) * len(y.src)
  return tuple(backward([tangent.uop], [ct], holders))


def host_batch(y: UOp, srcs: Sequence[tuple[Array, bool]], size: int) -> Array:
  """vmap: every input gets the batch as one more leading axis, and so does the packed output."""
  from tgfn.array import Array
  from tgfn.transforms.vmap import _lead
  name, params, shape = y.arg
  inputs = tuple(_lead(a, b, size).uop for a, b in srcs)
  return Array(UOp(Ops.HOST, y.dtype, inputs, (name, params, (size,) + shape)))
