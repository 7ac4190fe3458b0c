"""`shard_map(f, mesh=, in_specs=, out_specs=)`: f written for one device's block, run on every device of
the mesh. Each input is cut into blocks by its PartitionSpec (a dimension split over mesh axes gets one
block per position along them; dimensions and mesh axes not named are replicated), f is traced once on
a block's shape with the mesh axes bound (so collectives over them work) and unrolled over the devices
(tgfn/transforms/spmd.py). Each output is assembled from the blocks by its out_spec; along mesh axes an
out_spec does not name, the output must be replicated, and the block of the first device along them is
taken (as JAX with check_rep=False: a value that differs between those devices is not detected).
Compiled once per input structure (tgfn/sharding/compiled.py): a repeat call only launches.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.lax.collectives import axis_env
from tgfn.sharding.compiled import CompiledMap
from tgfn.sharding.mesh import Mesh, PartitionSpec
from tgfn.transforms.spmd import to_device, unroll
from tgfn.transforms.trace import flatten_outputs, fn_name, placeholder
from tgfn.tree import broadcast_prefix, flatten, unflatten


def _is_spec(x: Any) -> bool: return x is None or isinstance(x, PartitionSpec)


def _specs(specs: Any, tree: Any, what: str) -> list[PartitionSpec]:
  try:
    out = broadcast_prefix(specs, tree, is_leaf=_is_spec)
  except ValueError as e:
    raise ValueError(f"shard_map {what} {specs!r} does not match the structure: {e}") from None
  return [PartitionSpec() if s is None else s for s in out]


def _check_spec(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh, what: str) -> None:
  if len(spec) > len(shape): raise ValueError(f"shard_map {what} {spec} has more entries than the array has dims {shape}")
  used = [n for dim in range(len(spec)) for n in spec.names(dim)]
  mesh.check_names(used, f"shard_map {what} {spec}")
  if len(set(used)) != len(used): raise ValueError(f"shard_map {what} {spec} uses a mesh axis twice")
  for dim in range(len(spec)):
    count = math.prod(mesh.shape[n] for n in spec.names(dim))
    if shape[dim] % count:
      raise ValueError(f"shard_map {what} {spec}: dimension {dim} of shape {shape} ({shape[dim]}) is not divisible "
                       f"by the {count} devices of mesh axes {spec.names(dim)}")


def block(x: Array, spec: PartitionSpec, mesh: Mesh, d: int) -> Array:
  """Device d's block of x under spec (on device d)."""
  index = []
  for dim in range(x.ndim):
    pos, count = mesh.index_along(d, spec.names(dim))
    size = x.shape[dim] // count
    index.append(slice(pos * size, (pos + 1) * size))
  return to_device(x[tuple(index)] if any(s.stop - s.start != n for s, n in zip(index, x.shape)) else x,
                   mesh.device_names[d])


def assemble(blocks: list[Array], spec: PartitionSpec, mesh: Mesh, device: Optional[str] = None) -> Array:
  """The global array whose block on device d is blocks[d], gathered on `device` (default the mesh's first)."""
  device = device or mesh.device_names[0]
  named = {n for dim in range(len(spec)) for n in spec.names(dim)}
  ndim = blocks[0].ndim
  by_position: dict[tuple[int, ...], Array] = {}
  for d in range(mesh.size):
    if any(c for n, c in zip(mesh.axis_names, mesh.coords(d)) if n not in named): continue  # a replica
    by_position[tuple(mesh.index_along(d, spec.names(dim))[0] for dim in range(ndim))] = to_device(blocks[d], device)
  counts = [math.prod(mesh.shape[n] for n in spec.names(dim)) for dim in range(ndim)]

  def build(prefix: tuple[int, ...]) -> Array:
    if len(prefix) == ndim: return by_position[prefix]
    dim = len(prefix)
    parts = [build(prefix + (i,)) for i in range(counts[dim])]
    return parts[0] if len(parts) == 1 else tnp.concatenate(parts, axis=dim)
  return build(())


def shard_map(f: Callable, mesh: Mesh, in_specs: Any, out_specs: Any, check_rep: bool = False,
              check_vma: bool = False) -> Callable:
  """Run f on each device's block of its inputs (see the module docstring); collectives in f over the
  mesh's axis names combine the devices. check_rep / check_vma are accepted for JAX's signature; the
  replication they would check is not checked."""
  if not isinstance(mesh, Mesh): raise TypeError(f"shard_map needs a tgfn.sharding.Mesh, got {type(mesh).__name__}")

  def unrolled(*args: Any) -> Any:
    leaves, in_tree = flatten(args)
    arrays = [as_array(x) for x in leaves]
    specs = _specs(tuple(in_specs) if isinstance(in_specs, list) else in_specs, args, "in_specs")
    for x, spec in zip(arrays, specs): _check_spec(spec, x.shape, mesh, "in_specs")
    blocks = [[block(x, spec, mesh, d) for d in range(mesh.size)] for x, spec in zip(arrays, specs)]
    holders = [Array(placeholder(b[0].shape, x.dtype, None)) for x, b in zip(arrays, blocks)]
    with axis_env(list(mesh.shape.items())):
      out = f(*unflatten(in_tree, holders))
    outs, out_tree = flatten_outputs(out, fn_name(f))
    per_device = unroll([o.uop for o in outs], {h.uop: b for h, b in zip(holders, blocks)}, mesh)
    out_spec_list = _specs(out_specs, unflatten(out_tree, outs), "out_specs")
    results = []
    for o, spec, values in zip(outs, out_spec_list, per_device):
      _check_spec(spec, tuple(n * math.prod(mesh.shape[a] for a in spec.names(k)) for k, n in enumerate(o.shape)),
                  mesh, "out_specs")
      results.append(assemble(values, spec, mesh))
    return unflatten(out_tree, results)

  compiled = CompiledMap(unrolled, f, "shard_map")

  @functools.wraps(f)
  def mapped(*args: Any) -> Any: return compiled(args)
  return mapped
