"""Simplification rules for kernel-level graphs: constant folding and integer index arithmetic.

Index expressions come out of the scheduler as sums of `range * stride` terms pushed through the
`//` and `%` that reshapes introduce. These rules fold them back, using the value bounds of every
node (`vmin`/`vmax`): e.g. `(i*4 + j) // 4 -> i` and `(i*4 + j) % 4 -> j` when `0 <= j < 4`.
Float arithmetic is only constant-folded (with exact dtype semantics), never reassociated.
"""
from __future__ import annotations

import math
from typing import Optional

from tgfn.dtype import DType, dtypes
from tgfn.uop.alu import exec_alu
from tgfn.uop.ops import GroupOp, Ops, PatternMatcher, UOp, UPat, graph_rewrite


def _is_int(u: UOp) -> bool: return u.dtype is not None and u.dtype.is_int


def fold_constants(alu: UOp) -> Optional[UOp]:
  if alu.op not in GroupOp.ALU: return None
  for s in alu.src:  # (a loop, not all() over a generator: this rule is tried on every ALU node)
    if s.op is not Ops.CONST: return None
  value = exec_alu(alu.op, alu.dtype, tuple(s.arg for s in alu.src), tuple(s.dtype for s in alu.src))
  return UOp.const(alu.dtype, value)


# ---- sums as (term, coefficient) lists

# A sum of at most this many terms keeps its decomposition on its node. Rewriting is bottom-up, so each ADD
# of an index sum is split once its sources are, and its parent's split starts from that instead of walking
# the whole sum again (the MLP step's codegen split 2,000 sums). Longer sums (a fused kernel adding many
# integer arrays) are walked each time rather than keep a table per node.
_KEPT_SUM_TERMS = 16


def _sum_parts(x: UOp) -> tuple[dict[UOp, int], int, int]:
  """x's terms (in order of first appearance, zero coefficients kept), its constant, and how many operands
  its ADDs have (the nodes under x reached through ADDs only). The right operand of an ADD is walked first.
  A node's kept decomposition stands for its walk: the same terms, in the same order."""
  if (kept := x.__dict__.get("_sum_parts")) is not None: return kept
  terms: dict[UOp, int] = {}
  const = operands = 0
  stack = [(x, 1, True)]  # (node, coefficient, reached through ADDs only)
  while stack:
    node, coeff, top = stack.pop()
    if node.op is Ops.ADD:
      if (kept := node.__dict__.get("_sum_parts")) is None:
        stack.extend((s, coeff, top) for s in node.src)
        continue
      for term, c in kept[0].items(): terms[term] = terms.get(term, 0) + c * coeff
      const += kept[1] * coeff
      if top: operands += kept[2]
      continue
    if top: operands += 1
    if node.op is Ops.CONST: const += node.arg * coeff
    elif node.op is Ops.MUL and node.src[1].op is Ops.CONST: stack.append((node.src[0], coeff * node.src[1].arg, False))
    else: terms[node] = terms.get(node, 0) + coeff
  parts = (terms, const, operands)
  if x.op is Ops.ADD and len(terms) <= _KEPT_SUM_TERMS: x.__dict__["_sum_parts"] = parts
  return parts


def split_sum(x: UOp) -> tuple[list[tuple[UOp, int]], int]:
  """x == sum(term * coeff) + const, for an integer expression built from ADD and MUL-by-constant."""
  terms, const, _ = _sum_parts(x)
  return [(t, c) for t, c in terms.items() if c != 0], const


def build_sum(terms: list[tuple[UOp, int]], const: int, dtype: DType) -> UOp:
  out: Optional[UOp] = None
  for term, coeff in terms:
    part = term if coeff == 1 else term * UOp.const(dtype, coeff)
    out = part if out is None else out + part
  if out is None: return UOp.const(dtype, const)
  return out if const == 0 else out + UOp.const(dtype, const)


def _nonneg(u: UOp) -> bool: return u.vmin >= 0


def simplify_div(x: UOp, d: UOp) -> Optional[UOp]:
  div = d.arg
  if div <= 0 or not _nonneg(x): return None
  if x.vmax < div: return UOp.const(x.dtype, 0)
  if x.op is Ops.IDIV and x.src[1].op is Ops.CONST and x.src[1].arg > 0:  # (y//a)//b -> y//(a*b)
    return x.src[0] // (x.src[1].arg * div)
  terms, const = split_sum(x)
  whole = [(t, c // div) for t, c in terms if c % div == 0]
  rest = [(t, c) for t, c in terms if c % div != 0]
  if not whole and const < div: return None
  rest_expr = build_sum(rest, const % div, x.dtype)
  if not _nonneg(rest_expr) or not all(_nonneg(t) for t, _ in whole): return None
  quotient = build_sum(whole, const // div, x.dtype)
  return quotient if rest_expr.vmax < div else quotient + rest_expr // div


def _common_factor(terms: list[tuple[UOp, int]], const: int, div: int):
  """(g, big, small) with x == g*big + small and 0 <= small < g, for the largest useful g dividing
  `div` (g > 1), e.g. (a*8 + b) with 0 <= b < 8 and div 16: g = 8, big = a, small = b. Else None."""
  coeffs = [c for _, c in terms if c > 1 and c % div]
  if not coeffs: return None
  g = math.gcd(div, *coeffs)
  if g <= 1: return None
  big = [(t, c // g) for t, c in terms if c % g == 0]
  small = build_sum([(t, c) for t, c in terms if c % g], const % g, terms[0][0].dtype)
  if not all(_nonneg(t) for t, _ in big) or small.vmin < 0 or small.vmax >= g: return None
  return g, build_sum(big, const // g, terms[0][0].dtype), small


def split_by_common_factor_div(x: UOp, d: UOp) -> Optional[UOp]:
  """(g*big + small) // div -> big // (div/g) when g divides div and 0 <= small < g."""
  if d.arg <= 0 or not _nonneg(x): return None
  terms, const = split_sum(x)
  if not terms or (found := _common_factor(terms, const, d.arg)) is None: return None
  g, big, _ = found
  return big // (d.arg // g)


def split_by_common_factor_mod(x: UOp, d: UOp) -> Optional[UOp]:
  """(g*big + small) % div -> (big % (div/g))*g + small when g divides div and 0 <= small < g."""
  if d.arg <= 0 or not _nonneg(x): return None
  terms, const = split_sum(x)
  if not terms or (found := _common_factor(terms, const, d.arg)) is None: return None
  g, big, small = found
  return (big % (d.arg // g)) * g + small


def simplify_mod(x: UOp, d: UOp) -> Optional[UOp]:
  mod = d.arg
  if mod <= 0 or not _nonneg(x): return None
  if x.vmax < mod: return x
  if x.op is Ops.MOD and x.src[1].op is Ops.CONST and x.src[1].arg % mod == 0:  # (y % (k*m)) % m
    return x.src[0] % mod
  terms, const = split_sum(x)
  kept = [(t, c % mod) for t, c in terms if c % mod != 0]
  if len(kept) == len(terms) and const < mod and all(c == k for (_, c), (_, k) in zip(terms, kept)): return None
  if not all(_nonneg(t) for t, _ in terms): return None
  return build_sum(kept, const % mod, x.dtype) % mod


def combine_sum(x: UOp) -> Optional[UOp]:
  """Merge like terms and constants of an integer sum; fires only when that makes it shorter."""
  terms, const = split_sum(x)
  rebuilt = len(terms) + (1 if const else 0)
  if rebuilt >= _sum_parts(x)[2]: return None
  return build_sum(terms, const, x.dtype)


def divmod_recombine(a: UOp, d: UOp, x: UOp) -> Optional[UOp]:
  """(x // d) * d + x % d -> x"""
  return x if a.src[0] is x and a.src[1] is d else None


def compare_by_bounds(x: UOp, y: UOp) -> Optional[UOp]:
  if not (_is_int(x) and _is_int(y)): return None
  if x.vmax < y.vmin: return UOp.const(dtypes.bool, True)
  if x.vmin >= y.vmax: return UOp.const(dtypes.bool, False)
  return None


symbolic = PatternMatcher([
  (UPat(GroupOp.ALU, name="alu"), fold_constants),
  # move constants right in commutative ops
  (UPat(GroupOp.Commutative, src=(UPat.cvar("c"), UPat.var("x")), name="alu"),
   lambda alu, c, x: alu.replace(src=(x, c)) if x.op is not Ops.CONST else None),
  # identities (integer-only where floats differ: x*0 is NaN for x=inf)
  (UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if c.arg == 0 and _is_int(x) else None),
  (UPat(Ops.SUB, src=(UPat.var("x"), UPat.cvar("c"))),
   lambda x, c: x + UOp.const(x.dtype, -c.arg) if _is_int(x) else None),
  (UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c"))),
   lambda x, c: x if c.arg == 1 else (UOp.const(x.dtype, 0) if c.arg == 0 and _is_int(x) else None)),
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if c.arg == 1 else None),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: UOp.const(x.dtype, 0) if c.arg == 1 else None),
  (UPat(Ops.AND, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: x if c.arg is True else None),
  (UPat(Ops.WHERE, src=(UPat.cvar("c"), UPat.var("a"), UPat.var("b"))), lambda c, a, b: a if c.arg else b),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat.var("a"), UPat.var("a"))), lambda c, a: a),
  (UPat(Ops.CAST, name="x"), lambda x: x.src[0] if x.src[0].dtype == x.dtype else None),
  # integer reassociation and distribution, so index sums reach a canonical form
  (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
   lambda x, c1, c2: x * UOp.const(x.dtype, c1.arg * c2.arg) if _is_int(x) else None),
  (UPat(Ops.MUL, src=(UPat(Ops.ADD, name="s"), UPat.cvar("c"))),
   lambda s, c: s.src[0] * c + s.src[1] * c if _is_int(s) else None),
  (UPat(Ops.ADD, name="x"), lambda x: combine_sum(x) if _is_int(x) else None),
  (UPat(Ops.ADD, src=[UPat(Ops.MUL, src=(UPat(Ops.IDIV, name="a"), UPat.cvar("d"))),
                      UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("d")))]), divmod_recombine),
  # division and modulo by positive constants
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: simplify_div(x, d) if _is_int(x) else None),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: simplify_mod(x, d) if _is_int(x) else None),
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: split_by_common_factor_div(x, d) if _is_int(x) else None),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: split_by_common_factor_mod(x, d) if _is_int(x) else None),
  (UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.var("y"))), compare_by_bounds),
], marks_fixed_points=True)


def simplify(u: UOp) -> UOp:
  return graph_rewrite(u, symbolic)  # an analysis's helper (bounds, index forms): not a recorded pass
