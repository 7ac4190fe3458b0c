"""Abstract evaluation: `ShapeDtypeStruct`, `eval_shape` (the output shapes and dtypes of a function,
found by tracing it on placeholders, so no kernel runs) and `block_until_ready` for pytrees."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from tgfn.array import Array, as_array
from tgfn.dtype import DType, to_dtype
from tgfn.transforms.trace import fn_name, flatten_outputs, is_traced, placeholder
from tgfn.tree import flatten, leaves as tree_leaves, map as tree_map, unflatten
from tgfn.uop.ops import Ops


@dataclass(frozen=True, init=False)
class ShapeDtypeStruct:
  """The shape and dtype of an array, with no data (what `eval_shape` returns and accepts)."""
  shape: tuple[int, ...]
  dtype: DType
  device: Optional[str] = field(compare=False)  # where it would live; not part of equality

  def __init__(self, shape: Any, dtype: Any, device: Optional[str] = None):
    object.__setattr__(self, "shape", tuple(int(n) for n in shape))
    object.__setattr__(self, "dtype", to_dtype(dtype))
    object.__setattr__(self, "device", device)

  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def size(self) -> int: return math.prod(self.shape)

  def __repr__(self) -> str: return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"


def abstract_inputs(args: tuple) -> tuple[Any, list[Array]]:
  """`args` with every array leaf (Array, NumPy array, Python scalar, ShapeDtypeStruct) replaced by an
  unbound placeholder of its shape and dtype; also the placeholders, in leaf order."""
  leaves, tree = flatten(args)
  holders = []
  for leaf in leaves:
    if isinstance(leaf, ShapeDtypeStruct): shape, dt, device = leaf.shape, leaf.dtype, leaf.device
    else: shape, dt, device = (a := as_array(leaf)).shape, a.dtype, a.uop.device
    holders.append(Array(placeholder(shape, dt, device)))
  return unflatten(tree, holders), holders


def eval_shape(f: Callable, *args: Any, **kwargs: Any) -> Any:
  """f's output as a pytree of ShapeDtypeStruct, computed by tracing: no kernel runs. Keyword
  arguments are passed through as they are."""
  traced, _ = abstract_inputs(args)
  outs, out_tree = flatten_outputs(f(*traced, **kwargs), fn_name(f))
  return unflatten(out_tree, [ShapeDtypeStruct(o.shape, o.dtype, o.uop.device) for o in outs])


def block_until_ready(tree: Any) -> Any:
  """Compute every Array in the pytree now, the lazy ones in one schedule (their kernels compile as one
  batch); returns the tree (other leaves pass through)."""
  lazy = [x for x in tree_leaves(tree) if isinstance(x, Array) and x.uop.op is not Ops.BUFFER and not is_traced(x.uop)]
  if len(lazy) > 1: Array.realize_all(lazy)
  return tree_map(lambda x: x.block_until_ready() if isinstance(x, Array) else x, tree)
