"""One traced program, many devices: the per-device copies of a graph, with its collectives carried out
between the copies. shard_map and pmap trace their function once, on one device's block, then call
`unroll`, which builds one graph per device of the mesh: each placeholder becomes that device's block,
each computed node is rebuilt over that device's sources, and each collective over mesh axes becomes
array math over the values of its group (the devices that differ only along the collective's axes),
copied to the device that needs them. Every member sums (or gathers) in the same order, so a replicated
result is bitwise the same on each device.

The result is ordinary lazy Arrays, one graph per device: realized together, each device's kernels run
on its own queue (tgfn/engine/queues.py), and grad, jit and vmap apply to them as to any graph.
"""
from __future__ import annotations

from typing import Sequence

import tgfn.numpy as tnp
from tgfn.array import Array, device_put
from tgfn.dtype import DType
from tgfn.sharding.mesh import Mesh
from tgfn.uop.ops import Ops, UOp, toposort


def to_device(x: Array, device: str) -> Array:
  """x on `device`; a value of no device yet (constants only) stays as it is."""
  return x if x.uop.device in (None, device) else device_put(x, device)


def _chunk(x: Array, dim: int, index: int, count: int) -> Array:
  size = x.shape[dim] // count
  return x[(slice(None),) * dim + (slice(index * size, (index + 1) * size),)]


def _combine_members(kind: str, values: list[Array], dtype: DType) -> Array:
  """psum, pmax or pmin of the members' values. A sum adds them one by one, in member order; the extremum
  is one max (or min) over the stacked values, whose derivative tied members share equally (a chain of
  pairwise maximums would halve it at each tie, favouring the last members)."""
  if kind == "pmax": return tnp.stack(values).max(0)
  if kind == "pmin": return tnp.stack(values).min(0)
  result = values[0]
  for v in values[1:]: result = (result + v).astype(dtype)
  return result


def _lower(node: UOp, srcs: list[UOp], mesh: Mesh) -> list[UOp]:
  """A collective over mesh axes: each device's result from the values of its group."""
  if mesh.processes > 1: return _lower_across_processes(node, srcs, mesh)
  spec, out = node.arg, []
  for d, device in enumerate(mesh.device_names):
    group = mesh.group(d, spec.axes)
    me = group.index(d)
    values = [Array(srcs[m]) for m in group] if srcs else []
    here = [to_device(v, device) for v in values]
    kind = spec.kind
    if kind == "axis_index": result = Array.const(me, node.dtype)
    elif kind in ("psum", "pmax", "pmin"): result = _combine_members(kind, here, node.dtype)
    elif kind == "all_gather": result = tnp.concatenate(here, axis=spec.params[0])
    elif kind == "psum_scatter":  # copy only the block this device keeps, then sum
      dim = spec.params[0]
      blocks = [to_device(_chunk(v, dim, me, spec.size), device) for v in values]
      result = blocks[0]
      for b in blocks[1:]: result = (result + b).astype(node.dtype)
    elif kind == "all_to_all":
      split, concat = spec.params
      result = tnp.concatenate([to_device(_chunk(v, split, me, spec.size), device) for v in values], axis=concat)
    elif kind == "ppermute":
      source = {dst: src for src, dst in spec.params}.get(me)
      result = to_device(values[source], device) if source is not None else tnp.zeros(spec.shape, node.dtype)
    else: raise NotImplementedError(f"no per-device lowering of the collective {kind}")
    out.append(to_device(result, device).uop)
  return out


def _lower_across_processes(node: UOp, srcs: list[UOp], mesh: Mesh) -> list[UOp]:
  """A collective over an axis that spans processes (a pmap after tgfn.distributed.initialize()): this
  process's devices are members process_index * n ... + n - 1. Combine them here, on the first device,
  then across the processes with one MPI call; every device gets a copy."""
  from tgfn.distributed import process_index
  from tgfn.lax.cross_process import allgather_processes, allreduce_processes
  spec, first = node.arg, mesh.device_names[0]
  if spec.kind == "axis_index":
    return [Array.const(process_index() * mesh.size + d, node.dtype).uop for d in range(mesh.size)]
  here = [to_device(Array(u), first) for u in srcs]
  if spec.kind in ("psum", "pmax", "pmin", "psum_scatter"):
    local = _combine_members("psum" if spec.kind == "psum_scatter" else spec.kind, here, node.dtype)
    total = allreduce_processes(local, {"pmax": "max", "pmin": "min"}.get(spec.kind, "sum"))
  elif spec.kind == "all_gather":
    total = allgather_processes(tnp.concatenate(here, axis=spec.params[0]), spec.params[0])
  else:
    raise NotImplementedError(f"{spec.kind} across processes: psum, pmean, pmax, pmin, all_gather, psum_scatter and "
                              "axis_index span processes; run the others within one process's devices")
  if spec.kind == "psum_scatter":  # the whole sum, of which each member keeps its block
    members = range(process_index() * mesh.size, (process_index() + 1) * mesh.size)
    return [to_device(_chunk(total, spec.params[0], m, spec.size), device).uop for m, device in zip(members, mesh.device_names)]
  return [to_device(total, device).uop for device in mesh.device_names]


def unroll(outputs: Sequence[UOp], inputs: dict[UOp, list[Array]], mesh: Mesh) -> list[list[Array]]:
  """The per-device values of `outputs` (a graph traced on the placeholders in `inputs`), given each
  placeholder's block on every device of `mesh` (row-major order)."""
  devices, n = mesh.device_names, mesh.size
  values: dict[UOp, list[UOp]] = {}
  for node in toposort(list(outputs)):
    if node in inputs: values[node] = [a.uop for a in inputs[node]]
    elif node.op is Ops.COLLECTIVE and all(a in mesh.axis_names for a in node.arg.axes):
      values[node] = _lower(node, [values[s][d] for s in node.src for d in range(n)], mesh)
    elif node.op in (Ops.BUFFER, Ops.PLACEHOLDER):  # data from outside the function: a copy per device
      values[node] = [to_device(Array(node), dev).uop for dev in devices]
    elif not node.src: values[node] = [node] * n
    else: values[node] = [node.replace(src=tuple(values[s][d] for s in node.src)) for d in range(n)]
  return [[Array(u) for u in values[o]] for o in outputs]
