"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, psum_scatter, all_to_all, ppermute,
axis_index. Each is one IR op, `Ops.COLLECTIVE`, whose arg (a `Collective`) names the kind, the axes and
their size. They only mean something inside a transform that binds those names -- `shard_map`, `pmap`,
or `vmap(..., axis_name=)` -- which replaces every COLLECTIVE on its axes before anything runs: vmap by
array math along the batch axis (the batching rule below), shard_map and pmap by the same math between the
per-device copies of the program (tgfn/transforms/spmd.py). Outside one, a collective is a NameError.

Derivatives follow JAX's per-device convention. The output of psum/pmean/pmax/pmin is the same on every
member (invariant), and its cotangent is taken as that one value: the transpose of psum is the identity on
each member (a broadcast), of pmean a division by the axis size. all_gather, psum_scatter, all_to_all and
ppermute map member-varying values to member-varying values: all_gather transposes to psum_scatter and
back, all_to_all to all_to_all with its axes swapped, ppermute to the inverse permutation.
The non-tiled forms of all_gather, psum_scatter and all_to_all are the tiled ones around a reshape.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence, Union

from tgfn.array import Array, as_array
from tgfn.dtype import dtypes
from tgfn.tree import map as tree_map
from tgfn.uop.ops import Ops, UOp

AxisName = Union[str, tuple]
KINDS = ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all", "ppermute", "axis_index")


@dataclass(frozen=True)
class Collective:
  """The arg of a COLLECTIVE node. `size` is the number of members (the product of the axes' sizes);
  `params`: all_gather (axis,), psum_scatter (dimension,), all_to_all (split_axis, concat_axis), ppermute
  ((source, destination), ...) pairs of member indices; `shape` is the result's shape."""
  kind: str
  axes: tuple[str, ...]
  size: int
  params: tuple
  shape: tuple[int, ...]

  def __repr__(self) -> str: return f"{self.kind}[axes={self.axes} size={self.size} params={self.params}]"


# ---- the axis environment: the named axes bound by the transforms being traced, innermost last
_axis_env: list[tuple[str, int]] = []


@contextlib.contextmanager
def axis_env(names_and_sizes: Sequence[tuple[str, int]]) -> Iterator[None]:
  """Bind axis names to sizes while a transform traces its function."""
  _axis_env.extend(names_and_sizes)
  try:
    yield
  finally:
    del _axis_env[len(_axis_env) - len(names_and_sizes):]


def _axes(axis_name: AxisName) -> tuple[tuple[str, ...], int]:
  """The axis names as a tuple and the number of members they span; NameError for an unbound name."""
  names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
  size = 1
  for name in names:
    found = next((n for bound, n in reversed(_axis_env) if bound == name), None)
    if found is None:
      bound = sorted({b for b, _ in _axis_env})
      raise NameError(f"unbound axis name: {name!r}. Collectives work inside shard_map, pmap or vmap(..., "
                      f"axis_name=...) that name the axis; " + (f"bound here: {bound}" if bound else "none is bound here"))
    size *= found
  if len(set(names)) != len(names): raise ValueError(f"axis names repeat: {names}")
  return names, size


def _node(kind: str, x: Optional[Array], axes: tuple[str, ...], size: int, params: tuple = (),
          shape: Optional[tuple[int, ...]] = None) -> Array:
  shape = x.shape if shape is None else shape
  dtype = dtypes.int32 if x is None else x.dtype
  return Array(UOp(Ops.COLLECTIVE, dtype, () if x is None else (x.uop,), Collective(kind, axes, size, params, shape)))


def _axis(axis: int, ndim: int, what: str) -> int:
  if not -ndim <= axis < ndim: raise ValueError(f"{what} {axis} is out of range for an operand with {ndim} dims")
  return axis % ndim


def _divisible(x: Array, dim: int, size: int, what: str) -> None:
  if x.shape[dim] % size:
    raise ValueError(f"{what}: dimension {dim} of shape {x.shape} ({x.shape[dim]}) must be divisible by the axis "
                     f"size {size}")


# ---- builders from a Collective's fields (the rules use these: no axis environment needed)
def bind_all_gather(x: Array, axes: tuple[str, ...], size: int, axis: int) -> Array:
  shape = x.shape[:axis] + (x.shape[axis] * size,) + x.shape[axis + 1:]
  return _node("all_gather", x, axes, size, (axis,), shape)


def bind_psum_scatter(x: Array, axes: tuple[str, ...], size: int, dim: int) -> Array:
  _divisible(x, dim, size, "psum_scatter")
  return _node("psum_scatter", x, axes, size, (dim,), x.shape[:dim] + (x.shape[dim] // size,) + x.shape[dim + 1:])


def bind_all_to_all(x: Array, axes: tuple[str, ...], size: int, split: int, concat: int) -> Array:
  _divisible(x, split, size, "all_to_all")
  shape = list(x.shape)
  shape[split] //= size
  shape[concat] *= size
  return _node("all_to_all", x, axes, size, (split, concat), tuple(shape))


def bind_ppermute(x: Array, axes: tuple[str, ...], size: int, perm: tuple) -> Array:
  return _node("ppermute", x, axes, size, perm)


# ---- the public collectives (JAX's signatures; x may be a pytree for the reductions and ppermute)
def psum(x: Any, axis_name: AxisName) -> Any:
  """The sum of x over the members of the named axis (or axes), the same on every member."""
  axes, size = _axes(axis_name)
  return tree_map(lambda v: _node("psum", as_array(v), axes, size), x)


def pmean(x: Any, axis_name: AxisName) -> Any:
  """The mean of x over the members of the named axis (float for integer input, as JAX)."""
  _, size = _axes(axis_name)
  return tree_map(lambda s: s / size, psum(x, axis_name))


def pmax(x: Any, axis_name: AxisName) -> Any:
  axes, size = _axes(axis_name)
  return tree_map(lambda v: _node("pmax", as_array(v), axes, size), x)


def pmin(x: Any, axis_name: AxisName) -> Any:
  axes, size = _axes(axis_name)
  return tree_map(lambda v: _node("pmin", as_array(v), axes, size), x)


def all_gather(x: Any, axis_name: AxisName, *, axis: int = 0, tiled: bool = False) -> Array:
  """Every member's x, stacked along a new `axis` (tiled: concatenated along the existing `axis`)."""
  axes, size = _axes(axis_name)
  x = as_array(x)
  if tiled: return bind_all_gather(x, axes, size, _axis(axis, x.ndim, "all_gather axis"))
  axis = _axis(axis, x.ndim + 1, "all_gather axis")
  return bind_all_gather(x._reshape(x.shape[:axis] + (1,) + x.shape[axis:]), axes, size, axis)


def psum_scatter(x: Any, axis_name: AxisName, *, scatter_dimension: int = 0, tiled: bool = False) -> Array:
  """The psum of x, of which member i keeps block i along `scatter_dimension` (not tiled: that dimension
  must be the axis size, and is removed)."""
  axes, size = _axes(axis_name)
  x = as_array(x)
  dim = _axis(scatter_dimension, x.ndim, "psum_scatter scatter_dimension")
  if not tiled and x.shape[dim] != size:
    raise ValueError(f"psum_scatter: dimension {dim} of shape {x.shape} must equal the axis size {size} "
                     "(or pass tiled=True)")
  out = bind_psum_scatter(x, axes, size, dim)
  return out if tiled else out._reshape(out.shape[:dim] + out.shape[dim + 1:])


def all_to_all(x: Any, axis_name: AxisName, split_axis: int, concat_axis: int, *, tiled: bool = False) -> Array:
  """Member i sends block j of x along split_axis to member j, and concatenates what it receives along
  concat_axis in member order. Not tiled: split_axis must equal the axis size and is removed, and the
  received blocks are stacked along a new concat_axis, an axis of the output (as in JAX; with
  split_axis == concat_axis that transposes the member axis and that axis)."""
  axes, size = _axes(axis_name)
  x = as_array(x)
  split = _axis(split_axis, x.ndim, "all_to_all split_axis")
  if tiled: return bind_all_to_all(x, axes, size, split, _axis(concat_axis, x.ndim, "all_to_all concat_axis"))
  if x.shape[split] != size:
    raise ValueError(f"all_to_all: split_axis {split} of shape {x.shape} must equal the axis size {size} "
                     "(or pass tiled=True)")
  concat = _axis(concat_axis, x.ndim, "all_to_all concat_axis")
  new_axis = concat + (split < concat)  # concat_axis counts the output's axes, which lack split_axis
  grown = x._reshape(x.shape[:new_axis] + (1,) + x.shape[new_axis:])
  split_grown = split + (split >= new_axis)
  out = bind_all_to_all(grown, axes, size, split_grown, new_axis)
  return out._reshape(out.shape[:split_grown] + out.shape[split_grown + 1:])


def ppermute(x: Any, axis_name: AxisName, perm: Sequence[tuple[int, int]]) -> Any:
  """Member `source` sends x to member `destination` for each pair of `perm`; a member nobody sends to
  gets zeros."""
  axes, size = _axes(axis_name)
  pairs = tuple((int(s), int(d)) for s, d in perm)
  for what, ends in (("source", [s for s, _ in pairs]), ("destination", [d for _, d in pairs])):
    if len(set(ends)) != len(ends): raise ValueError(f"ppermute: a {what} appears twice in {list(pairs)}")
    if any(not 0 <= e < size for e in ends): raise ValueError(f"ppermute: {what}s must be in [0, {size}), got {list(pairs)}")
  return tree_map(lambda v: bind_ppermute(as_array(v), axes, size, pairs), x)


def axis_index(axis_name: AxisName) -> Array:
  """This member's index along the named axis (row-major over several names), an int32 scalar."""
  axes, size = _axes(axis_name)
  return _node("axis_index", None, axes, size, (), ())


def axis_size(axis_name: AxisName) -> int:
  return _axes(axis_name)[1]


# ---- derivative rules, registered in the transforms' tables
def _same(kind: str, t: Array, spec: Collective) -> Array:
  return Array(UOp(Ops.COLLECTIVE, t.dtype, (t.uop,), spec))


def _pick_mask(y: UOp) -> tuple[Array, Array]:
  """Where a member holds the extremum, and how many members do (ties share the derivative)."""
  x = Array(y.src[0])
  hit = (x == Array(y)).astype(y.dtype)
  return hit, _same("psum", hit, Collective("psum", y.arg.axes, y.arg.size, (), hit.shape))


def collective_jvp(y: UOp, tangents: Sequence[Optional[Array]]) -> Optional[Array]:
  spec, t = y.arg, tangents[0] if tangents else None
  if t is None: return None
  if spec.kind in ("pmax", "pmin"):
    hit, count = _pick_mask(y)
    return _same("psum", t * hit, Collective("psum", spec.axes, spec.size, (), spec.shape)) / count
  return _same(spec.kind, t, spec)


def collective_vjp(ct: Array, y: UOp) -> tuple[Optional[Array], ...]:
  spec = y.arg
  if spec.kind == "axis_index": return ()
  if spec.kind == "psum": return (ct,)  # the invariant result's cotangent, on every member
  if spec.kind in ("pmax", "pmin"):
    hit, count = _pick_mask(y)
    return (ct * hit / count,)
  if spec.kind == "all_gather": return (bind_psum_scatter(ct, spec.axes, spec.size, spec.params[0]),)
  if spec.kind == "psum_scatter": return (bind_all_gather(ct, spec.axes, spec.size, spec.params[0]),)
  if spec.kind == "all_to_all":
    split, concat = spec.params
    return (bind_all_to_all(ct, spec.axes, spec.size, concat, split),)
  if spec.kind == "ppermute": return (bind_ppermute(ct, spec.axes, spec.size, tuple((d, s) for s, d in spec.params)),)
  raise NotImplementedError(f"no VJP rule for the collective {spec.kind}")


def _register() -> None:
  from tgfn.transforms.grad import VJP_RULES
  from tgfn.transforms.jvp import JVP_RULES
  from tgfn.transforms.vmap import BATCH_RULES
  from tgfn.lax.collective_batching import collective_batch
  VJP_RULES[Ops.COLLECTIVE] = collective_vjp
  JVP_RULES[Ops.COLLECTIVE] = collective_jvp
  BATCH_RULES[Ops.COLLECTIVE] = collective_batch


_register()
__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all", "ppermute", "axis_index",
           "axis_size"]
