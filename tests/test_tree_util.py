import collections
import dataclasses

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import tree_util as tu


def test_flatten_unflatten_roundtrip_and_none_is_empty():
  tree = {"b": [1, (2, None)], "a": 3}
  leaves, treedef = tu.tree_flatten(tree)
  assert leaves == [3, 1, 2]                       # dicts by sorted key, None is not a leaf
  assert tu.tree_unflatten(treedef, [4, 5, 6]) == {"b": [5, (6, None)], "a": 4}
  assert tu.tree_structure(tree) == treedef and tu.tree_leaves(tree) == leaves
  assert tu.treedef_is_leaf(tu.tree_structure(1.0)) and not tu.treedef_is_leaf(treedef)


def test_tree_map_many_trees_and_is_leaf():
  a, b = {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)}
  assert tu.tree_map(lambda u, v: u + v, a, b) == {"x": 11, "y": (22, 33)}
  got = tu.tree_map(lambda t: sum(t), {"x": (1, 2), "y": [(3, 4)]}, is_leaf=lambda t: isinstance(t, tuple))
  assert got == {"x": 3, "y": [7]}
  with pytest.raises(ValueError):
    tu.tree_map(lambda u, v: u, a, {"x": 1})


def test_reduce_and_all():
  assert tu.tree_reduce(lambda u, v: u + v, {"a": 1, "b": [2, 3]}) == 6
  assert tu.tree_reduce(lambda u, v: u * v, [], 7) == 7
  assert tu.tree_all([True, {"a": 1}]) and not tu.tree_all([True, (0,)]) and tu.tree_all([])


def test_register_pytree_node_and_class():
  class Pair:
    def __init__(self, a, b): self.a, self.b = a, b

  tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, ch: Pair(*ch))
  doubled = tu.tree_map(lambda v: v * 2, Pair(1, [2]))
  assert (doubled.a, doubled.b) == (2, [4])

  @tu.register_pytree_node_class
  class Scaled:
    def __init__(self, value, scale): self.value, self.scale = value, scale
    def tree_flatten(self): return (self.value,), self.scale
    @classmethod
    def tree_unflatten(cls, scale, children): return cls(children[0], scale)

  leaves, treedef = tu.tree_flatten(Scaled(3.0, "s"))
  assert leaves == [3.0] and tu.tree_unflatten(treedef, [4.0]).scale == "s"
  g = tgfn.grad(lambda s: s.value * s.value)(Scaled(tnp.array(3.0), "s"))
  assert float(g.value) == 6.0 and g.scale == "s"


def test_register_dataclass_jax_signature_and_static_metadata():
  @dataclasses.dataclass
  class Layer:
    w: float
    name: str

  tu.register_dataclass(Layer, data_fields=["w"], meta_fields=["name"])
  assert tu.tree_leaves(Layer(1.0, "n")) == [1.0]

  @tu.register_dataclass
  @dataclasses.dataclass
  class Other:
    w: float
    act: str = dataclasses.field(default="relu", metadata=dict(static=True))

  leaves, treedef = tu.tree_flatten(Other(2.0))
  assert leaves == [2.0] and tu.tree_unflatten(treedef, [5.0]) == Other(5.0)


def test_register_dataclass_rebuilds_fields_in_any_order_and_keyword_only():
  @dataclasses.dataclass
  class Swapped:  # the static field first: the children and aux are not the constructor's order
    name: str
    w: float
    b: float

  tu.register_dataclass(Swapped, data_fields=["b", "w"], meta_fields=["name"])
  leaves, treedef = tu.tree_flatten(Swapped("s", 1.0, 2.0))
  assert leaves == [2.0, 1.0] and tu.tree_unflatten(treedef, [4.0, 3.0]) == Swapped("s", 3.0, 4.0)

  @tu.register_dataclass
  @dataclasses.dataclass(kw_only=True)
  class KeywordOnly:
    w: float
    b: float

  leaves, treedef = tu.tree_flatten(KeywordOnly(w=1.0, b=2.0))
  assert leaves == [1.0, 2.0] and tu.tree_unflatten(treedef, [3.0, 4.0]) == KeywordOnly(w=3.0, b=4.0)


def test_rebuild_fields_only_sets_the_fields_without_calling_init():
  @dataclasses.dataclass(frozen=True)
  class Layer:
    name: str
    w: float
    b: float

    def __post_init__(self):
      object.__setattr__(self, "name", self.name.upper())

  tgfn.tree.register_dataclass(Layer, meta_fields=["name"], rebuild_fields_only=True)
  leaves, treedef = tu.tree_flatten(Layer("dense", 1.0, 2.0))
  assert leaves == [1.0, 2.0]
  rebuilt = tu.tree_unflatten(treedef, [3.0, 4.0])
  assert rebuilt == Layer("DENSE", 3.0, 4.0) and rebuilt.name == "DENSE"  # normalized once, by the first build

  @dataclasses.dataclass
  class Derived:
    w: float
    cache: float = dataclasses.field(init=False, default=0.0)

  with pytest.raises(TypeError, match="every field"):
    tgfn.tree.register_dataclass(Derived, data_fields=["w"], rebuild_fields_only=True)


def test_jit_rebuilds_its_layer_results_without_their_constructors(monkeypatch):
  from tgfn import nn
  model = nn.Sequential([nn.Linear(tnp.ones((2, 3)), tnp.zeros(2)), nn.relu])
  step = tgfn.jit(lambda m: tgfn.tree.map(lambda w: w * 2, m))
  step(model)
  for cls in (nn.Sequential, nn.Linear, nn.Lambda):
    monkeypatch.setattr(cls, "__init__", lambda self, *a, **k: pytest.fail(f"{type(self).__name__}.__init__ called"))
  out = step(model)
  assert [type(lay) for lay in out.layers] == [nn.Linear, nn.Lambda]
  np.testing.assert_array_equal(np.asarray(out.layers[0].weight), np.full((2, 3), 2.0, np.float32))
  np.testing.assert_array_equal(np.asarray(out(tnp.ones(3))), np.full(2, 6.0, np.float32))


def test_partial_is_a_pytree_through_transforms():
  p = tu.Partial(lambda x, y: x * y, tnp.array(2.0))
  assert tu.tree_leaves(p)[0] is p.args[0]
  g = tgfn.grad(lambda f: f(tnp.array(3.0)))(p)      # differentiate w.r.t. the bound argument
  assert isinstance(g, tu.Partial) and float(g.args[0]) == 3.0
  assert float(tgfn.jit(lambda f, x: f(x))(p, tnp.array(4.0))) == 8.0


def test_paths_and_keystr():
  NT = collections.namedtuple("NT", "u v")
  pairs, _ = tu.tree_flatten_with_path({"a": [1, NT(2, 3)]})
  assert [tu.keystr(p) for p, _ in pairs] == ["['a'][0]", "['a'][1].u", "['a'][1].v"]
  assert [leaf for _, leaf in pairs] == [1, 2, 3]
  got = tu.tree_map_with_path(lambda p, x: tu.keystr(p) + str(x), {"z": 1, "b": (2,)})
  assert got == {"z": "['z']1", "b": ("['b'][0]2",)}


def test_tgfn_tree_namespace_keeps_working():
  assert tgfn.tree.map(lambda x: x + 1, [1, (2,)]) == [2, (3,)]
  assert tgfn.tree.tree_leaves({"a": 1}) == [1] and tgfn.tree.reduce(max, [3, 9, 2]) == 9
  assert np.asarray(tgfn.tree_util.tree_map(lambda a: a * 2, tnp.arange(3))).tolist() == [0, 2, 4]
