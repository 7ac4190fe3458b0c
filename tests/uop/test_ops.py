"""The IR itself: hash-consing, the pattern matcher, and rewriting deep graphs."""
import pytest

from tgfn.dtype import dtypes
from tgfn.uop.ops import Ops, PatternMatcher, UOp, UPat, graph_rewrite, substitute, toposort


def test_hash_consing_gives_identical_objects():
  a = UOp.const(dtypes.int32, 3) + UOp.const(dtypes.int32, 4)
  b = UOp.const(dtypes.int32, 3) + UOp.const(dtypes.int32, 4)
  assert a is b
  assert UOp.const(dtypes.int32, 3) is not UOp.const(dtypes.int64, 3)


def test_nan_constants_are_hash_consed():
  # NaN != NaN: without one canonical NaN every graph holding a NaN constant was new, and its kernel was
  # compiled again at every realization
  nan = UOp.const(dtypes.float32, float("nan"))
  assert nan is UOp.const(dtypes.float32, float("nan"))
  assert UOp.const(dtypes.float32, 1.0) + nan is UOp.const(dtypes.float32, 1.0) + UOp.const(dtypes.float32, float("nan"))


def test_threads_building_equal_new_nodes_get_one_object():
  """A miss builds the node and publishes it with one atomic setdefault: of threads racing to build equal
  nodes, every one returns the node published first (identity stays equality)."""
  import sys
  import threading
  threads, rounds = 8, 300
  barrier, built = threading.Barrier(threads), [[] for _ in range(threads)]
  def build(i: int) -> None:
    barrier.wait()
    built[i] = [UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("race", n)) for n in range(rounds)]
  switch = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)  # switch threads as often as possible
  try:
    workers = [threading.Thread(target=build, args=(i,)) for i in range(threads)]
    for w in workers: w.start()
    for w in workers: w.join()
  finally:
    sys.setswitchinterval(switch)
  assert all(a is b for nodes in built[1:] for a, b in zip(built[0], nodes))


def test_a_collected_node_leaves_the_table_and_can_be_built_again():
  import gc
  from tgfn.uop.ops import _nodes
  node = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("collected", 1))
  key = next(k for k, ref in _nodes.items() if ref() is node)
  del node
  gc.collect()
  assert key not in _nodes  # its weakref callback dropped the entry
  again = UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("collected", 1))
  assert _nodes[key]() is again and again is UOp(Ops.DEFINE_VAR, dtypes.int32, (), ("collected", 1))


def test_uops_are_immutable():
  with pytest.raises(AttributeError, match="immutable"):
    UOp.const(dtypes.int32, 1).arg = 2


def test_unhashable_arg_is_a_clear_error():
  with pytest.raises(TypeError, match="hashable"):
    UOp(Ops.CONST, dtypes.int32, (), [1])


def test_pattern_matcher_binds_names_and_tries_both_orders_for_lists():
  x = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0)
  pm = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("x"), UPat.cvar("c")]), lambda x, c: x * (c.arg + 1))])
  assert pm.rewrite(UOp.const(dtypes.int32, 2) + x) is x * 3
  assert pm.rewrite(x + UOp.const(dtypes.int32, 2)) is x * 3
  assert pm.rewrite(x * 2) is None


def test_a_rule_is_matched_only_on_a_node_whose_sources_have_its_ops(monkeypatch):
  """A rule whose sources are matched in order is not tried on a node whose sources have other ops or
  another count: nothing is matched there, and the rules after it still fire."""
  x, c = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0), UOp.const(dtypes.int32, 2)
  pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.cvar("c"), UPat.var("x"))), lambda c, x: x),
                       (UPat(Ops.ADD, name="a"), lambda a: a.src[0])])
  matched = []
  real_match = UPat.match
  monkeypatch.setattr(UPat, "match", lambda self, uop, store: (matched.append(uop), real_match(self, uop, store))[1])
  assert pm.rewrite(x + x) is x and matched == [x + x]  # the first rule is skipped without matching
  assert pm.rewrite(UOp(Ops.ADD, dtypes.int32, (c, x))) is x  # the first rule fires where it fits
  assert pm.rewrite(UOp(Ops.ADD, dtypes.int32, (x, x, c))) is x  # another number of sources: the second


def test_graph_rewrite_handles_graphs_deeper_than_the_recursion_limit():
  x = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0)
  node = x
  for _ in range(5000): node = node + UOp.const(dtypes.int32, 0)
  strip_zero = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("y"), UPat.cvar("c", dtypes.int32))),
                                lambda y, c: y if c.arg == 0 else None)])
  assert graph_rewrite(node, strip_zero) is x
  assert len(toposort([node])) == 5000 * 1 + 2


def test_toposort_lists_each_node_once_after_its_sources_in_depth_first_order():
  a, b = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0), UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 1)
  ab = a + b
  top = (ab * a) - b
  assert toposort([top]) == [a, b, ab, ab * a, top]
  assert toposort([b, top, ab]) == [b, a, ab, ab * a, top]  # roots in order; one reached earlier is not repeated
  assert toposort([top], lambda u: u.src[:1]) == [a, ab, ab * a, top]  # children as the caller defines them


def test_substitute_shares_a_memo_between_calls_with_the_same_mapping():
  x, y = UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 0), UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), 1)
  shared = (x * 4) + y
  first, second = shared + 1, shared * shared
  mapping = {x: UOp.const(dtypes.int32, 3)}
  memo: dict = {}
  assert substitute(first, mapping, memo) is substitute(first, mapping)
  assert memo[shared] is (UOp.const(dtypes.int32, 3) * 4) + y
  memo[shared] = y  # a memoized subgraph is taken from the memo, not walked again
  assert substitute(second, mapping, memo) is y * y
  assert substitute(second, mapping) is substitute(shared, mapping) * substitute(shared, mapping)


def test_const_values_wrap_to_their_dtype():
  assert UOp.const(dtypes.uint8, 300).arg == 44
  assert UOp.const(dtypes.int8, 200).arg == -56
  assert UOp.const(dtypes.bool, 5).arg is True
