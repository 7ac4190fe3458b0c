"""Index simplification: known folds, and a property check that simplifying never changes a value."""
import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tgfn.dtype import dtypes
from tgfn.uop.alu import exec_alu
from tgfn.uop.ops import Ops, UOp, toposort
from tgfn.uop.symbolic import simplify

I = dtypes.int32


def rng(n: int, i: int) -> UOp: return UOp(Ops.RANGE, I, (UOp.const(I, n),), i)


def evaluate(u: UOp, env: dict) -> int:
  vals: dict = {}
  for n in toposort([u]):
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.RANGE: vals[n] = env[n]
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src), tuple(s.dtype for s in n.src))
  return vals[u]


def test_reshape_round_trips_fold_away():
  i, j = rng(3, 0), rng(4, 1)
  lin = i * 4 + j
  assert simplify(lin // 4) is i
  assert simplify(lin % 4) is j
  assert simplify((lin // 4) * 4 + lin % 4) is simplify(lin)
  assert simplify((i * 12 + j * 3) // 3 % 4) is j


def test_bounds_decide_comparisons():
  i = rng(5, 0)
  assert simplify(i.lt(5)).arg is True
  assert simplify(i.lt(0)).arg is False


leaves = st.sampled_from(["i", "j", "k"]) | st.integers(0, 9)
exprs = st.recursive(leaves, lambda inner: st.tuples(st.sampled_from(["+", "*", "//", "%"]), inner,
                                                     st.integers(1, 7)), max_leaves=6)


def build(e, env):
  if isinstance(e, str): return env[e]
  if isinstance(e, int): return UOp.const(I, e)
  op, a, c = e
  a = build(a, env)
  return {"+": a + c, "*": a * c, "//": a // c, "%": a % c}[op]


@settings(max_examples=200)
@given(exprs)
def test_simplify_preserves_values(e):
  env = {"i": rng(3, 0), "j": rng(4, 1), "k": rng(5, 2)}
  expr = build(e, env)
  simple = simplify(expr)
  for vi, vj, vk in itertools.product(range(3), range(4), range(5)):
    point = {env["i"]: vi, env["j"]: vj, env["k"]: vk}
    assert evaluate(simple, point) == evaluate(expr, point), (e, vi, vj, vk)


# ---- negative ranges: `//` truncates toward zero and `%` takes the dividend's sign (tgfn/uop/alu.py), so
# the rules that rely on 0 <= x (e.g. (i*4 + j) // 4 -> i) must not fire when an operand can be negative
signed_leaves = st.sampled_from(["i", "j", "k"]) | st.integers(-9, 9)
signed_terms = st.recursive(
  signed_leaves,
  lambda inner: st.one_of(st.tuples(st.sampled_from(["+", "*", "//", "%"]), inner, st.integers(-7, 7)),
                          st.tuples(st.just("add"), inner, inner)),  # sums of two subexpressions: affine forms
  max_leaves=8)


def build_signed(e, env):
  if isinstance(e, str): return env[e]
  if isinstance(e, int): return UOp.const(I, e)
  op, a, b = e
  a = build_signed(a, env)
  if op == "add": return a + build_signed(b, env)
  return {"+": a + b, "*": a * b, "//": a // b, "%": a % b}[op]


@settings(max_examples=300)
@given(signed_terms, st.sampled_from([(-3, 2), (-5, -1), (0, 3)]), st.integers(-12, 12))
@example(("//", ("add", ("*", "j", 4), "k"), 4), (0, 3), 0)  # 4*j - k >= 0, but its remainder part -k is not
def test_simplify_preserves_values_on_negative_ranges(e, offsets, threshold):
  """Each loop variable shifted by a constant (i - 3 ranges over -3..-1): affine index expressions over
  negative bounds, divided and reduced by positive, negative and zero constants; and a comparison, which
  the simplifier decides from the bounds (vmin/vmax) of `//` and `%`."""
  i, j, k = rng(3, 0), rng(4, 1), rng(5, 2)
  env = {"i": i + offsets[0], "j": j + offsets[1], "k": k * -1 + offsets[0]}
  expr = build_signed(e, env)
  simple, compared = simplify(expr), simplify(expr.lt(threshold))
  for vi, vj, vk in itertools.product(range(3), range(4), range(5)):
    point = {i: vi, j: vj, k: vk}
    value = evaluate(expr, point)
    assert evaluate(simple, point) == value, (e, offsets, vi, vj, vk)
    assert evaluate(compared, point) == (value < threshold), (e, offsets, threshold, vi, vj, vk)


def test_a_simplified_graph_is_not_matched_again():
  """symbolic marks the nodes it leaves unchanged: rewriting a simplified graph, or one that only adds nodes
  on top of it, tries no rule on the simplified part; a matcher that does not mark tries every node."""
  from tgfn.uop.ops import PatternMatcher, graph_rewrite
  from tgfn.uop.symbolic import symbolic
  i, j = rng(16, 0), rng(8, 1)
  index = ((i * 8 + j) * 4 + 3) // 2 + (i * 16) % 7
  tried = []
  counting = PatternMatcher([(pat, (lambda fn: lambda **kw: (tried.append(1), fn(**kw))[1])(fn)) for pat, fn in symbolic.rules],
                            marks_fixed_points=True)
  once = graph_rewrite(index, counting)
  first = len(tried)
  assert graph_rewrite(once, counting) is once and len(tried) == first  # nothing tried on a marked graph
  graph_rewrite(once + 1, counting)
  assert 0 < len(tried) - first < first / 2  # the new ADD and what its rules build, not the marked graph
  plain = PatternMatcher(counting.rules)
  tried.clear()
  assert graph_rewrite(once, plain) is once and len(tried) >= 5
  assert graph_rewrite(index, symbolic) is once  # the same simplification as without marks


def _split_by_walking(x: UOp):
  """split_sum's definition: walk the whole sum (right operands first), merge like terms in order of first
  appearance, drop the ones that cancel."""
  terms, const, stack = {}, 0, [(x, 1)]
  while stack:
    node, coeff = stack.pop()
    if node.op is Ops.ADD: stack.extend((s, coeff) for s in node.src)
    elif node.op is Ops.CONST: const += node.arg * coeff
    elif node.op is Ops.MUL and node.src[1].op is Ops.CONST: stack.append((node.src[0], coeff * node.src[1].arg))
    else: terms[node] = terms.get(node, 0) + coeff
  return [(t, c) for t, c in terms.items() if c != 0], const


sums = st.recursive(leaves | st.sampled_from(["i//2", "j%3"]),
                    lambda inner: st.tuples(st.sampled_from(["+", "*"]), inner, inner | st.integers(-3, 3)), max_leaves=12)


def build_sum_expr(e, env):
  if isinstance(e, int): return UOp.const(I, e)
  if isinstance(e, str): return env[e]
  op, a, b = e
  a, b = build_sum_expr(a, env), (UOp.const(I, b) if isinstance(b, int) else build_sum_expr(b, env))
  return a + b if op == "+" or b.op is not Ops.CONST else a * b


@settings(max_examples=300)
@given(sums, st.sampled_from(["none", "bottom-up", "top"]))
def test_split_sum_reads_kept_sub_sums_exactly_as_a_walk(e, first):
  """A sum's decomposition is kept on its node and read by the sums above it: the terms, their order and
  the constant are what walking the whole sum gives, whichever sub-sums were split before."""
  from tgfn.uop.symbolic import split_sum
  i, j, k = rng(6, 10), rng(7, 11), rng(9, 12)
  x = build_sum_expr(e, {"i": i, "j": j, "k": k, "i//2": i // 2, "j%3": j % 3})
  if first == "bottom-up":
    for node in toposort([x]): split_sum(node)
  elif first == "top": split_sum(x)
  assert split_sum(x) == _split_by_walking(x)
  for node in toposort([x]): assert split_sum(node) == _split_by_walking(node)


def test_a_long_sum_keeps_no_decomposition():
  from tgfn.uop.symbolic import _KEPT_SUM_TERMS, split_sum
  ranges = [rng(4, 100 + n) for n in range(_KEPT_SUM_TERMS + 2)]
  short, long = ranges[0], ranges[0]
  for r in ranges[1:_KEPT_SUM_TERMS]: short = short + r
  for r in ranges[1:]: long = long + r
  split_sum(short), split_sum(long)
  assert "_sum_parts" in short.__dict__ and "_sum_parts" not in long.__dict__
  assert split_sum(long) == ([(r, 1) for r in reversed(ranges)], 0)
