"""Pytrees, on optree, with JAX's conventions: tuples, lists, dicts (sorted keys), namedtuples,
OrderedDicts and registered classes are nodes; None is an empty node (not a leaf); anything else
is a leaf. Use `tgfn.tree.map`, `flatten`, `unflatten`, `leaves`, `structure`, and register your
own containers with `register_node` or `register_dataclass`."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Optional

import optree

NAMESPACE = "tgfn"
PyTreeDef = optree.PyTreeSpec


def flatten(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> tuple[list[Any], PyTreeDef]:
  return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
  return optree.tree_unflatten(treedef, list(leaves))


def leaves(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> list[Any]:
  return flatten(tree, is_leaf)[0]


def structure(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> PyTreeDef:
  return flatten(tree, is_leaf)[1]


def map(fn: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> Any:
  """Apply `fn` leaf-wise; `rest` trees must have the same structure as `tree` (or it as a prefix)."""
  return optree.tree_map(fn, tree, *rest, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def broadcast_prefix(prefix: Any, tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> list[Any]:
  """The leaves of `prefix` repeated to match `tree`'s leaves (as JAX does for in_axes)."""
  return optree.broadcast_prefix(prefix, tree, is_leaf, none_is_leaf=True, namespace=NAMESPACE)


def register_node(cls: type, flatten_fn: Callable[[Any], tuple[Iterable[Any], Any]],
                  unflatten_fn: Callable[[Any, Iterable[Any]], Any]) -> type:
  """Make `cls` a pytree node: flatten_fn(x) -> (children, aux_data); unflatten_fn(aux_data, children) -> x."""
  optree.register_pytree_node(cls, flatten_fn, unflatten_fn, namespace=NAMESPACE)
  return cls


def register_dataclass(cls: type, data_fields: Optional[list[str]] = None,
                       meta_fields: Optional[list[str]] = None) -> type:
  """Register a dataclass as a node. By default every field is a child; name `meta_fields` for
  static (hashable, non-array) fields that belong to the tree structure instead."""
  if not dataclasses.is_dataclass(cls): raise TypeError(f"register_dataclass needs a dataclass, got {cls!r}")
  meta = list(meta_fields or [])
  data = list(data_fields) if data_fields is not None else [f.name for f in dataclasses.fields(cls) if f.name not in meta]

  def flatten_fn(x: Any) -> tuple[list[Any], tuple, tuple]:
    # the third item names each child, so paths (and state_dict names) read "layer.weight", not "layer.0"
    return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta), tuple(data)

  def unflatten_fn(aux: tuple, children: Iterable[Any]) -> Any:
    return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))

  return register_node(cls, flatten_fn, unflatten_fn)


# the names JAX users know from jax.tree_util
tree_flatten, tree_unflatten, tree_leaves, tree_structure, tree_map = flatten, unflatten, leaves, structure, map
