"""`pmap(f, axis_name=)`: f mapped over an axis of its inputs, one member per device (member i on the
mesh's device i), with collectives over `axis_name` combining the members. The same program as
`vmap(f, axis_name=)` computes, run as per-device copies (tgfn/transforms/spmd.py). After
tgfn.distributed.initialize(), as in JAX's multi-process pmap, each process maps over its own devices and
the axis spans all processes: its size is the devices of all of them, and collectives combine them all.
Compiled once per input structure (tgfn/sharding/compiled.py): a repeat call only launches."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import numpy as np

import tgfn.numpy as tnp
from tgfn.array import Array, as_array
from tgfn.distributed import process_count
from tgfn.lax.collectives import axis_env
from tgfn.sharding.compiled import CompiledMap
from tgfn.sharding.mesh import Mesh
from tgfn.transforms.spmd import to_device, unroll
from tgfn.transforms.trace import flatten_outputs, fn_name, placeholder
from tgfn.tree import broadcast_prefix, flatten, unflatten


def pmap(f: Callable, axis_name: Optional[str] = None, *, in_axes: Any = 0, out_axes: Any = 0,
         devices: Optional[Sequence[Any]] = None) -> Callable:
  """Map f over axis `in_axes` of its inputs (None: the same value for every member), one member per
  device of `devices` (default: this process's devices, as many as the mapped axis is long); stack the
  members' outputs along `out_axes` on the first device."""
  axis = axis_name if axis_name is not None else "_pmap"  # an unnamed map still needs a name for its mesh

  def unrolled(*args: Any) -> Any:
    from tgfn.instances import local_devices
    leaves, in_tree = flatten(args)
    try:
      axes = broadcast_prefix(tuple(in_axes) if isinstance(in_axes, list) else in_axes, args)
    except ValueError as e:
      raise ValueError(f"pmap in_axes {in_axes!r} does not match the arguments' structure: {e}") from None
    arrays = [as_array(x) for x in leaves]
    sizes = {x.shape[ax % x.ndim] for x, ax in zip(arrays, axes) if ax is not None}
    if len(sizes) != 1:
      raise ValueError(f"pmap needs mapped inputs of one size along in_axes, got sizes {sorted(sizes) or 'none'}")
    n = sizes.pop()
    pool = list(devices) if devices is not None else local_devices()
    if n > len(pool):
      raise ValueError(f"pmap over {n} members needs {n} devices, but only {len(pool)} are available (set "
                       "TGFN_CPU_DEVICES=n before starting for n CPU devices)")
    mesh = Mesh(np.array(pool[:n], dtype=object), (axis,))
    mesh.processes = process_count()  # after tgfn.distributed.initialize(), the axis spans every process
    per_member = []
    for x, ax in zip(arrays, axes):
      if ax is None: per_member.append([to_device(x, dev) for dev in mesh.device_names])
      else:  # member i's slice: a view (basic indexing), not a gather
        index = (slice(None),) * (ax % x.ndim)
        per_member.append([to_device(x[index + (i,)], dev) for i, dev in enumerate(mesh.device_names)])
    holders = [Array(placeholder(m[0].shape, x.dtype, None)) for x, m in zip(arrays, per_member)]
    with axis_env([(axis, n * mesh.processes)]):
      out = f(*unflatten(in_tree, holders))
    outs, out_tree = flatten_outputs(out, fn_name(f))
    values = unroll([o.uop for o in outs], {h.uop: m for h, m in zip(holders, per_member)}, mesh)
    try:
      out_spec = broadcast_prefix(out_axes, unflatten(out_tree, outs))
    except ValueError as e:
      raise ValueError(f"pmap out_axes {out_axes!r} does not match the output structure: {e}") from None
    results = []
    for members, ax in zip(values, out_spec):
      if ax is None: results.append(to_device(members[0], mesh.device_names[0]))
      else:
        here = [to_device(m, mesh.device_names[0]) for m in members]
        results.append(tnp.stack(here, axis=ax))
    return unflatten(out_tree, results)

  compiled = CompiledMap(unrolled, f, "pmap")

  @functools.wraps(f)
  def mapped(*args: Any) -> Any:
    from tgfn.instances import local_devices
    pool = tuple(str(d) for d in (devices if devices is not None else local_devices()))
    return compiled(args, (pool, process_count()))
  return mapped
