"""Complex values become pairs of real values, so no renderer ever sees a complex dtype.

A complex buffer holds interleaved (re, im) pairs, as NumPy's, so inside a kernel it is a buffer of the
real dtype twice as long: a complex LOAD at element i becomes real loads at 2i and 2i+1, a complex STORE
two real stores, and every complex ALU op its formula on the parts. The pass runs first in codegen, on
the kernel AST, before anything folds or vectorizes it.

A part may be *known zero* (None here): the imaginary part of a real value cast to complex, or a zero
part of a constant. Arithmetic skips the terms it multiplies, so `complex(re, im) = re + im * 1j`,
`imag(z) = real(z * -1j)` and `conj` are exact (no `0 * inf = NaN` creeping into the other part), and
mixed real/complex arithmetic costs what the real arithmetic does. Ops with no complex form here
(ordering comparisons, MAX, transcendentals, integer ops) raise NotImplementedError: the public surface
builds complex exp/log/sqrt/abs from the parts instead (tgfn/ops/complex_math.py).
"""
from __future__ import annotations

import math
from typing import Optional

from tgfn.dtype import DType, dtypes, real_dtype
from tgfn.uop.ops import Ops, UOp, toposort

Part = Optional[UOp]            # a real value, or None for an exact zero
Pair = tuple[Part, Part]


def _is_complex(u: UOp) -> bool: return u.dtype is not None and u.dtype.is_complex


def lower_complex(ast: UOp) -> UOp:
  """The kernel `ast` with every complex value computed as two real ones (unchanged if it has none)."""
  nodes = toposort([ast])
  if not any(_is_complex(u) for u in nodes): return ast
  return _Lowering().run(nodes)


class _Lowering:
  def __init__(self) -> None:
    self.real: dict[UOp, UOp] = {}    # a real (or bool, int, index) node -> its lowered form
    self.pair: dict[UOp, Pair] = {}   # a complex node -> its (re, im) parts

  def run(self, nodes: list[UOp]) -> UOp:
    for u in nodes:
      if u.op is Ops.DEFINE_GLOBAL: self.real[u] = u.replace(dtype=real_dtype(u.dtype))
      elif u.op is Ops.STORE and _is_complex(u.src[2]): continue  # two stores, made by the SINK
      elif _is_complex(u): self.pair[u] = self._complex(u)
      else: self.real[u] = self._real(u)
    return self.real[nodes[-1]]

  # ---- real-valued nodes: rebuilt over lowered sources; a few read complex ones
  def _real(self, u: UOp) -> UOp:
    if u.op is Ops.SINK:
      stores: list[UOp] = []
      for s in u.src: stores.extend(self._stores(s) if s.op is Ops.STORE and _is_complex(s.src[2]) else [self.real[s]])
      return u.replace(src=tuple(stores))
    if any(_is_complex(s) for s in u.src):
      if u.op is Ops.CAST: return self._from_complex(u)
      if u.op is Ops.CMPNE: return _not_equal(self.pair[u.src[0]], self.pair[u.src[1]])
      raise NotImplementedError(f"complex {u.op.name} has no definition in kernels (only == and != compare "
                                f"complex values, and casts take the real part)")
    new = tuple(self.real[s] for s in u.src)
    return u if new == u.src else u.replace(src=new)

  def _stores(self, store: UOp) -> list[UOp]:
    glob, idx, value = store.src
    g, at = self.real[glob], self.real[idx] * 2
    re, im = (_materialize(p, g.dtype) for p in self.pair[value])
    return [store.replace(src=(g, at, re)), store.replace(src=(g, at + 1, im))]

  def _from_complex(self, u: UOp) -> UOp:
    re, im = self.pair[u.src[0]]
    if u.dtype is dtypes.bool: return _or(_nonzero(re), _nonzero(im))  # NumPy: bool(z) is z != 0
    return _materialize(re, real_dtype(u.src[0].dtype)).cast(u.dtype)  # NumPy: the real part

  # ---- complex-valued nodes
  def _complex(self, u: UOp) -> Pair:
    part = real_dtype(u.dtype)
    op = u.op
    if op is Ops.CONST:
      value = complex(u.arg)
      return _const_part(value.real, part), _const_part(value.imag, part)
    if op is Ops.LOAD:
      g, at = self.real[u.src[0]], self.real[u.src[1]] * 2
      gate = tuple(self.real[s] for s in u.src[2:])
      return UOp(Ops.LOAD, part, (g, at) + gate), UOp(Ops.LOAD, part, (g, at + 1) + gate)
    if op is Ops.CAST:
      src = u.src[0]
      if _is_complex(src): return tuple(_cast(p, part) for p in self.pair[src])  # type: ignore[return-value]
      return self.real[src].cast(part), None
    if op is Ops.WHERE:
      cond = self.real[u.src[0]]
      (a, b), (c, d) = self.pair[u.src[1]], self.pair[u.src[2]]
      return _select(cond, a, c, part), _select(cond, b, d, part)
    if op is Ops.REDUCE:
      if u.arg is not Ops.ADD:
        raise NotImplementedError(f"complex REDUCE {u.arg.name} has no definition in kernels (only sums do)")
      values = [self.pair[v] for v in u.reduce_values]
      ranges = tuple(self.real[r] for r in u.reduce_ranges)
      return tuple(None if all(v[k] is None for v in values) else  # type: ignore[return-value]
                   UOp(Ops.REDUCE, part, tuple(_materialize(v[k], part) for v in values) + ranges, Ops.ADD)
                   for k in (0, 1))
    if op in _ARITHMETIC: return _ARITHMETIC[op](*(self.pair[s] for s in u.src), part)
    raise NotImplementedError(f"complex {op.name} has no definition in kernels; the complex ops are "
                              f"+ - * / negation, ==, !=, where, casts and sums")


# ---- arithmetic on parts, skipping known zeros
def _const_part(value: float, dtype: DType) -> Part:
  return None if value == 0 and math.copysign(1.0, value) > 0 else UOp.const(dtype, value)


def _materialize(p: Part, dtype: DType) -> UOp: return UOp.const(dtype, 0.0) if p is None else p
def _cast(p: Part, dtype: DType) -> Part: return None if p is None else p.cast(dtype)
def _neg(p: Part) -> Part: return None if p is None else -p
def _mul(x: Part, y: Part) -> Part: return None if x is None or y is None else x * y


def _add(x: Part, y: Part) -> Part:
  if x is None: return y
  return x if y is None else x + y


def _sub(x: Part, y: Part) -> Part:
  if y is None: return x
  return -y if x is None else x - y


def _select(cond: UOp, x: Part, y: Part, dtype: DType) -> Part:
  if x is None and y is None: return None
  return cond.where(_materialize(x, dtype), _materialize(y, dtype))


def _nonzero(p: Part) -> Optional[UOp]: return None if p is None else p.ne(UOp.const(p.dtype, 0.0))


def _or(x: Optional[UOp], y: Optional[UOp]) -> UOp:
  if x is None: return y if y is not None else UOp.const(dtypes.bool, False)
  return x if y is None else x.alu(Ops.OR, y)


def _not_equal(p: Pair, q: Pair) -> UOp:
  def part_ne(x: Part, y: Part) -> Optional[UOp]:
    if x is None and y is None: return None
    if x is None or y is None: return _nonzero(x if y is None else y)
    return x.ne(y)
  return _or(part_ne(p[0], q[0]), part_ne(p[1], q[1]))


def _complex_mul(p: Pair, q: Pair, dtype: DType) -> Pair:
  (a, b), (c, d) = p, q
  return _sub(_mul(a, c), _mul(b, d)), _add(_mul(a, d), _mul(b, c))


def _complex_div(p: Pair, q: Pair, dtype: DType) -> Pair:
  """p / q. A real or imaginary divisor divides the parts; otherwise Smith's algorithm, which scales by the
  larger part of the divisor so |q|^2 is never formed (it would overflow or underflow long before q does),
  with NumPy's rule for a zero divisor."""
  (a, b), (c, d) = p, q
  if c is None and d is None:  # division by an exact zero: as the real formula, (a/0, b/0)
    c = UOp.const(dtype, 0.0)
  if d is None: return _div(a, c, dtype), _div(b, c, dtype)  # type: ignore[arg-type]
  if c is None: return _div(b, d, dtype), _neg(_div(a, d, dtype))
  wide = _abs(c).alu(Ops.CMPLT, _abs(d)).ne(True)   # |c| >= |d| (also when either is NaN: either branch is NaN)
  r1, r2 = d.alu(Ops.FDIV, c), c.alu(Ops.FDIV, d)
  den1, den2 = c + d * r1, c * r2 + d
  re1, im1 = _add(a, _mul(b, r1)), _sub(b, _mul(a, r1))
  re2, im2 = _add(_mul(a, r2), b), _sub(_mul(b, r2), a)
  # a zero divisor gives (a/0, b/0), infinities as NumPy's, where the ratios above would be 0/0 = NaN
  nonzero = _or(_nonzero(c), _nonzero(d))
  by_zero = lambda x: _div(x, UOp.const(dtype, 0.0), dtype)  # noqa: E731
  pick = lambda x, y, z: nonzero.where(wide.where(_materialize(x, dtype), _materialize(y, dtype)), z)  # noqa: E731
  return (pick(_div(re1, den1, dtype), _div(re2, den2, dtype), by_zero(a)),
          pick(_div(im1, den1, dtype), _div(im2, den2, dtype), by_zero(b)))


def _div(x: Part, y: UOp, dtype: DType) -> Part:
  # 0 / y stays a known zero only if y cannot be 0 or NaN, which is not known here: divide a real zero
  return _materialize(x, dtype).alu(Ops.FDIV, y)


def _abs(x: UOp) -> UOp: return x.alu(Ops.MAX, -x)


_ARITHMETIC = {
  Ops.ADD: lambda p, q, dt: (_add(p[0], q[0]), _add(p[1], q[1])),
  Ops.SUB: lambda p, q, dt: (_sub(p[0], q[0]), _sub(p[1], q[1])),
  Ops.NEG: lambda p, dt: (_neg(p[0]), _neg(p[1])),
  Ops.MUL: _complex_mul,
  Ops.FDIV: _complex_div,
  Ops.RECIP: lambda p, dt: _complex_div((UOp.const(dt, 1.0), None), p, dt),
}
