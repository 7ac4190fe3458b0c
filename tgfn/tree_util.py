"""`tgfn.tree_util`: jax.tree_util's names over `tgfn.tree` (one registry, JAX's conventions: None is an
empty node, dicts flatten by sorted key)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

from tgfn.tree import (DictKey, FlattenedIndexKey, GetAttrKey, PyTreeDef, SequenceKey, keystr,  # noqa: F401
                       register_dataclass, register_node)
from tgfn.tree import all as tree_all  # noqa: F401
from tgfn.tree import flatten as tree_flatten  # noqa: F401
from tgfn.tree import flatten_with_path as tree_flatten_with_path  # noqa: F401
from tgfn.tree import leaves as tree_leaves  # noqa: F401
from tgfn.tree import leaves_with_path as tree_leaves_with_path  # noqa: F401
from tgfn.tree import map as tree_map  # noqa: F401
from tgfn.tree import map_with_path as tree_map_with_path  # noqa: F401
from tgfn.tree import reduce as tree_reduce  # noqa: F401
from tgfn.tree import structure as tree_structure  # noqa: F401
from tgfn.tree import unflatten as tree_unflatten  # noqa: F401


def register_pytree_node(nodetype: type, flatten_func: Callable[[Any], tuple[Iterable[Any], Any]],
                         unflatten_func: Callable[[Any, Iterable[Any]], Any]) -> type:
  """flatten_func(x) -> (children, aux_data); unflatten_func(aux_data, children) -> x."""
  return register_node(nodetype, flatten_func, unflatten_func)


def register_pytree_node_class(cls: type) -> type:
  """Class decorator: `cls.tree_flatten(self) -> (children, aux)` and the classmethod
  `cls.tree_unflatten(aux, children)` define the node."""
  for name in ("tree_flatten", "tree_unflatten"):
    if not hasattr(cls, name): raise TypeError(f"register_pytree_node_class: {cls.__name__} has no method {name}")
  return register_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
  return treedef.num_nodes == 1 and treedef.num_leaves == 1


class Partial(functools.partial):
  """functools.partial as a pytree: the bound arguments are children, the function is static, so a
  Partial can be passed through grad, vmap and jit."""

  def __new__(cls, func: Callable, *args: Any, **kwargs: Any) -> "Partial":
    return super().__new__(cls, func, *args, **kwargs)


register_node(Partial, lambda p: ((p.args, p.keywords), p.func),
              lambda func, children: Partial(func, *children[0], **children[1]))
