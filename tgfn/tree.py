"""Pytrees, on optree, with JAX's conventions: tuples, lists, dicts (sorted keys), namedtuples,
OrderedDicts and registered classes are nodes; None is an empty node (not a leaf); anything else
is a leaf. Use `tgfn.tree.map`, `flatten`, `unflatten`, `leaves`, `structure`, `reduce`, `all`,
`flatten_with_path`, and register your own containers with `register_node` or `register_dataclass`.
`tgfn.tree_util` has the same functions under jax.tree_util's names."""
from __future__ import annotations

import builtins
import dataclasses
import functools
import operator
from typing import Any, Callable, Iterable, Optional

import optree

NAMESPACE = "tgfn"
PyTreeDef = optree.PyTreeSpec
# frozen dataclasses registered as nodes: a jitted function's results built of them cannot change after it
# returns (tgfn/transforms/jit_memo.py)
FROZEN_NODE_TYPES: set[type] = set()


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


_NO_INITIALIZER = object()


def reduce(fn: Callable[[Any, Any], Any], tree: Any, initializer: Any = _NO_INITIALIZER,
           is_leaf: Optional[Callable[[Any], bool]] = None) -> Any:
  """functools.reduce over the leaves, left to right."""
  items = leaves(tree, is_leaf)
  if initializer is _NO_INITIALIZER: return functools.reduce(fn, items)
  return functools.reduce(fn, items, initializer)


def all(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> bool:
  """True when every leaf is truthy (an empty tree is True)."""
  return builtins.all(leaves(tree, is_leaf))


@dataclasses.dataclass(frozen=True)
class SequenceKey:
  idx: int
  def __str__(self) -> str: return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
  key: Any
  def __str__(self) -> str: return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
  name: str
  def __str__(self) -> str: return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
  key: int
  def __str__(self) -> str: return f"[<flat index {self.key}>]"


def _path_key(entry: Any) -> Any:
  """JAX's key object for one optree accessor entry."""
  if isinstance(entry, (optree.NamedTupleEntry, optree.DataclassEntry)): return GetAttrKey(entry.field)
  if isinstance(entry, optree.SequenceEntry): return SequenceKey(entry.index)
  if isinstance(entry, optree.MappingEntry): return DictKey(entry.key)
  if isinstance(entry, optree.GetAttrEntry): return GetAttrKey(entry.name)
  return FlattenedIndexKey(entry.entry)


def flatten_with_path(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> tuple[list[tuple[tuple, Any]], PyTreeDef]:
  """([(path, leaf), ...], treedef); a path is a tuple of SequenceKey/DictKey/GetAttrKey/FlattenedIndexKey."""
  accessors, items, treedef = optree.tree_flatten_with_accessor(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)
  return [(tuple(_path_key(e) for e in acc), leaf) for acc, leaf in zip(accessors, items)], treedef


def leaves_with_path(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> list[tuple[tuple, Any]]:
  return flatten_with_path(tree, is_leaf)[0]


def map_with_path(fn: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> Any:
  """Like `map`, with each leaf's path as the first argument of `fn`."""
  pairs, treedef = flatten_with_path(tree, is_leaf)
  others = [treedef.flatten_up_to(r) for r in rest]
  return unflatten(treedef, [fn(path, leaf, *(o[i] for o in others)) for i, (path, leaf) in enumerate(pairs)])


def keystr(path: tuple) -> str:
  """A path as text, e.g. "['a'][0].weight"."""
  return "".join(str(k) for k in path)


def broadcast_prefix(prefix: Any, tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None) -> list[Any]:
  """The leaves of `prefix` repeated to match `tree`'s leaves (as JAX does for in_axes)."""
  return optree.broadcast_prefix(prefix, tree, is_leaf, none_is_leaf=True, namespace=NAMESPACE)


def register_node(cls: type, flatten_fn: Callable[[Any], tuple[Iterable[Any], Any]],
                  unflatten_fn: Callable[[Any, Iterable[Any]], Any]) -> type:
  """Make `cls` a pytree node: flatten_fn(x) -> (children, aux_data); unflatten_fn(aux_data, children) -> x."""
  optree.register_pytree_node(cls, flatten_fn, unflatten_fn, namespace=NAMESPACE)
  return cls


def _fields_getter(names: list[str]) -> Callable[[Any], tuple]:
  """x -> the tuple of its attributes `names`."""
  if not names: return lambda x: ()
  if len(names) == 1:
    name = names[0]
    return lambda x: (getattr(x, name),)
  return operator.attrgetter(*names)


def register_dataclass(cls: type, data_fields: Optional[list[str]] = None,
                       meta_fields: Optional[list[str]] = None, *, rebuild_fields_only: bool = False) -> type:
  """Register a dataclass as a node (usable as a decorator). By default every field is a child except
  those declared `field(metadata=dict(static=True))`; name `meta_fields` for static (hashable,
  non-array) fields that belong to the tree structure instead.

  With `rebuild_fields_only`, unflattening sets the fields without calling `__init__` (nor
  `__post_init__`): for a class whose `__post_init__` only normalizes values that a flattened instance
  already holds normalized (tgfn's layers; jit rebuilds its outputs on every call)."""
  if not dataclasses.is_dataclass(cls): raise TypeError(f"register_dataclass needs a dataclass, got {cls!r}")
  if meta_fields is None and data_fields is None:
    meta_fields = [f.name for f in dataclasses.fields(cls) if f.metadata.get("static", False)]
  meta = list(meta_fields or [])
  data = list(data_fields) if data_fields is not None else [f.name for f in dataclasses.fields(cls) if f.name not in meta]

  # jit flattens its arguments and rebuilds its results on every call: the field lookups are prepared once
  names = tuple(data)
  get_data = _fields_getter(data)
  get_meta = _fields_getter(meta)
  fields = [f for f in dataclasses.fields(cls) if f.init]
  # the constructor takes children and aux by position when they are its parameters, in order
  positional = [f.name for f in fields] == data + meta and not any(getattr(f, "kw_only", False) for f in fields)

  def flatten_fn(x: Any) -> tuple[tuple, tuple, tuple]:
    # the third item names each child, so paths (and state_dict names) read "layer.weight", not "layer.0"
    return get_data(x), get_meta(x), names

  if rebuild_fields_only:
    if [f.name for f in dataclasses.fields(cls)] != [f.name for f in fields]:
      raise TypeError(f"{cls.__name__}: rebuild_fields_only needs every field to be an __init__ field")
    new = object.__new__

    def unflatten_fn(aux: tuple, children: Iterable[Any]) -> Any:
      x = new(cls)
      values = x.__dict__
      values.update(zip(data, children))
      if aux: values.update(zip(meta, aux))
      return x
  else:
    def unflatten_fn(aux: tuple, children: Iterable[Any]) -> Any:
      if positional: return cls(*children, *aux)
      return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))

  if cls.__dataclass_params__.frozen: FROZEN_NODE_TYPES.add(cls)  # type: ignore[attr-defined]
  return register_node(cls, flatten_fn, unflatten_fn)


# the names JAX users know from jax.tree_util
tree_flatten, tree_unflatten, tree_leaves, tree_structure, tree_map = flatten, unflatten, leaves, structure, map
