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
