"""Products: matmul, dot, vdot, inner, outer, tensordot, einsum, and the diagonal/trace movement ops.

Every contraction is the same two primitives: the operands, reshaped so that each index has one axis
of a common broadcast shape, are multiplied elementwise and the contracted axes are summed with one
REDUCE_AXIS. The scheduler inlines the broadcast product into the reduction's loop, so `a @ b` is a
single kernel that never materializes the (n, k, m) product.

Dtypes follow JAX: operands are promoted to their common dtype (Python scalars weakly typed) and the
arithmetic, accumulation included, is done in that dtype -- integer products wrap like NumPy's and
JAX's do. Bool contractions are logical (an "or" of "and"s), as in NumPy.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Union

import numpy as np

from tgfn.array import Array, TracedScalar, _promotion_type, as_array, broadcast_shapes, promote
from tgfn.dtype import result_type
from tgfn.ops.axes import normalize_axis
from tgfn.ops.reduction import sum as _sum
from tgfn.uop.ops import Ops
from tgfn.viz.locations import at_user_line

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "trace", "diagonal"]


def _is_py_scalar(x: Any) -> bool: return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _operands(*xs: Any) -> list[Array]:
  """`xs` as Arrays of their common dtype (JAX promotion, Python scalars weak), each keeping its shape."""
  arrays = [x if _is_py_scalar(x) or type(x) is TracedScalar else as_array(x) for x in xs]
  dtype = result_type(*[x if _is_py_scalar(x) else _promotion_type(x) for x in arrays])
  return [as_array(x, dtype) for x in arrays]


def _contract(operands: Sequence[Array], sum_axes: Sequence[int]) -> Array:
  """The product of `operands` (one dtype; shapes broadcast together, right-aligned) summed over
  `sum_axes` (non-negative axes of the broadcast shape), which are dropped from the result."""
  ops = promote(*operands)  # broadcasts, and rejects operands on different devices
  is_bool = ops[0].dtype.is_bool
  product = functools.reduce(lambda x, y: x._alu(Ops.AND if is_bool else Ops.MUL, y), ops)
  # bool: "or" is MAX over {False, True}, and an empty sum is False, as NumPy's
  out = product._reduce(Ops.MAX if is_bool else Ops.ADD, tuple(sum_axes))
  return out._reshape(tuple(n for i, n in enumerate(out.shape) if i not in sum_axes))


def _axis(name: str, axis: int, ndim: int, which: str) -> int:
  try:
    return normalize_axis(axis, ndim)
  except ValueError:
    raise ValueError(f"{name}: axis {axis} is out of bounds for {which}, "
                     f"which has {ndim} dimensions") from None


def _tensordot(name: str, a: Array, b: Array, axes_a: Sequence[int], axes_b: Sequence[int]) -> Array:
  """Sum a * b over the paired axes `axes_a[i]` of a and `axes_b[i]` of b (any sign; errors quote them
  as given). The result has a's other axes, then b's other axes, each in their original order."""
  if len(axes_a) != len(axes_b):
    raise ValueError(f"{name}: got {len(axes_a)} axes of a {tuple(axes_a)} but {len(axes_b)} axes of b "
                     f"{tuple(axes_b)}; they are contracted in pairs")
  ca = [_axis(name, ax, a.ndim, f"a of shape {a.shape}") for ax in axes_a]
  cb = [_axis(name, ax, b.ndim, f"b of shape {b.shape}") for ax in axes_b]
  for which, axes in (("a", ca), ("b", cb)):
    if len(set(axes)) != len(axes): raise ValueError(f"{name}: repeated axis in the axes of {which} {axes}")
  for ax_a, ax_b, ia, ib in zip(axes_a, axes_b, ca, cb):
    if a.shape[ia] != b.shape[ib]:
      raise ValueError(f"{name}: shapes {a.shape} and {b.shape} are not aligned: "
                       f"{a.shape[ia]} (axis {ax_a} of a) != {b.shape[ib]} (axis {ax_b} of b){at_user_line()}")
  free_a = [i for i in range(a.ndim) if i not in ca]
  free_b = [i for i in range(b.ndim) if i not in cb]
  summed = tuple(a.shape[i] for i in ca)
  # common axis order: a's free axes, b's free axes, then the contracted ones
  lhs_shape = tuple(a.shape[i] for i in free_a) + (1,) * len(free_b) + summed
  lhs = a._permute(tuple(free_a + ca))._reshape(lhs_shape)
  rhs = b._permute(tuple(free_b + cb))
  first_sum = len(free_a) + len(free_b)
  return _contract([lhs, rhs], range(first_sum, first_sum + len(summed)))


def matmul(a: Any, b: Any) -> Array:
  """Matrix product with NumPy's rules: the last two axes are the matrices, leading (batch) axes
  broadcast; a 1-D a is a row vector and a 1-D b a column vector, and that added axis is removed from
  the result. 0-d operands are rejected (use `multiply`). Bool operands give the logical product."""
  a, b = _operands(a, b)
  if a.ndim == 0 or b.ndim == 0:
    raise ValueError(f"matmul: operands must have at least 1 dimension, got shapes {a.shape} and {b.shape}; "
                     f"use multiply (*) for scalars")
  a2 = a._reshape((1,) + a.shape) if a.ndim == 1 else a  # (..., n, k)
  b2 = b._reshape(b.shape + (1,)) if b.ndim == 1 else b  # (..., k, m)
  if a2.shape[-1] != b2.shape[-2]:
    raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned: {a2.shape[-1]} (axis -1 of a)"
                     f" != {b2.shape[-2]} (axis {-2 if b.ndim > 1 else -1} of b){at_user_line()}")
  try:
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
  except ValueError:
    raise ValueError(f"matmul: the batch dimensions {a2.shape[:-2]} of a {a.shape} and {b2.shape[:-2]} of b "
                     f"{b.shape} cannot be broadcast together") from None
  # (batch..., n, k, 1) * (batch..., 1, k, m), summed over k
  out = _contract([a2._reshape(a2.shape + (1,)), b2._reshape(b2.shape[:-2] + (1,) + b2.shape[-2:])],
                  (len(batch) + 1,))
  keep = out.shape[:-2] + (() if a.ndim == 1 else out.shape[-2:-1]) + (() if b.ndim == 1 else out.shape[-1:])
  return out._reshape(keep)


def dot(a: Any, b: Any) -> Array:
  """NumPy's dot: a 0-d operand multiplies elementwise; otherwise the last axis of a is summed against
  the only axis of a 1-D b, or the second-to-last axis of an N-D b. The result's shape is
  a.shape[:-1] + b.shape[:-2] + b.shape[-1:] (no batch broadcasting, unlike matmul)."""
  a, b = _operands(a, b)
  if a.ndim == 0 or b.ndim == 0: return _contract([a, b], ())
  return _tensordot("dot", a, b, (-1,), (-2 if b.ndim > 1 else 0,))


def vdot(a: Any, b: Any) -> Array:
  """The dot product of a and b flattened (a 0-d result); the sizes must be equal. A complex `a` is
  conjugated first, as NumPy's."""
  a, b = _operands(a, b)
  if a.dtype.is_complex:
    from tgfn.ops.complex_math import conj
    a = conj(a)
  if a.size != b.size:
    raise ValueError(f"vdot: arrays of shapes {a.shape} and {b.shape} have different sizes "
                     f"{a.size} and {b.size}")
  return _contract([a._reshape((a.size,)), b._reshape((b.size,))], (0,))


def inner(a: Any, b: Any) -> Array:
  """Sum over the last axes of a and b: shape a.shape[:-1] + b.shape[:-1]. A 0-d operand multiplies."""
  a, b = _operands(a, b)
  if a.ndim == 0 or b.ndim == 0: return _contract([a, b], ())
  return _tensordot("inner", a, b, (-1,), (-1,))


def outer(a: Any, b: Any) -> Array:
  """out[i, j] = a.ravel()[i] * b.ravel()[j], of shape (a.size, b.size)."""
  a, b = _operands(a, b)
  return _contract([a._reshape((a.size, 1)), b._reshape((1, b.size))], ())


def tensordot(a: Any, b: Any, axes: Union[int, Sequence[Any]] = 2) -> Array:
  """Sum products over paired axes. `axes=N` pairs the last N axes of a with the first N of b, in order;
  `axes=(axes_a, axes_b)` (two sequences, or two ints) pairs axes_a[i] with axes_b[i]. The result has
  a's remaining axes followed by b's remaining axes."""
  a, b = _operands(a, b)
  if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
    n = int(axes)
    if not 0 <= n <= min(a.ndim, b.ndim):
      raise ValueError(f"tensordot: axes={n} must be between 0 and the smaller number of dimensions of "
                       f"shapes {a.shape} and {b.shape}")
    return _tensordot("tensordot", a, b, tuple(range(a.ndim - n, a.ndim)), tuple(range(n)))
  if not isinstance(axes, Sequence) or isinstance(axes, str) or len(axes) != 2:
    raise TypeError(f"tensordot: axes must be an int or a pair (axes of a, axes of b), got {axes!r}")
  pair = [tuple(int(x) for x in ax) if isinstance(ax, Sequence) else (int(ax),) for ax in axes]
  return _tensordot("tensordot", a, b, pair[0], pair[1])


# ---- diagonal and trace
def _diagonal(x: Array, offset: int, axis1: int, axis2: int) -> Array:
  """NumPy's diagonal on normalized, distinct axes: both axes removed, the diagonal appended last."""
  rest = tuple(i for i in range(x.ndim) if i not in (axis1, axis2))
  x = x._permute(rest + (axis1, axis2))
  lead, (rows, cols) = x.shape[:-2], x.shape[-2:]
  # the diagonal starts at row -offset (offset < 0) or column offset (offset > 0), and is d long
  r0, c0 = max(-offset, 0), max(offset, 0)
  d = max(0, min(rows - r0, cols - c0))
  if d == 0: r0 = c0 = 0
  keep = tuple((0, n) for n in lead)
  square = x._shrink(keep + ((r0, r0 + d), (c0, c0 + d)))
  # in a d x d block flattened, the diagonal sits at positions i * (d + 1): pad the flat block by d
  # elements, view it as d rows of d + 1, and the diagonal is column 0. Movement ops only, no gather.
  flat = square._reshape(lead + (d * d,))._pad(tuple((0, 0) for _ in lead) + ((0, d),))
  return flat._reshape(lead + (d, d + 1))._shrink(keep + ((0, d), (0, 1)))._reshape(lead + (d,))


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
  """The diagonal x[..., i, i + offset] over axes axis1 and axis2, as NumPy: those two axes are removed
  and the diagonal becomes the last axis (empty when offset is past the edge)."""
  x = as_array(x)
  if x.ndim < 2: raise ValueError(f"diagonal: needs an array of at least 2 dimensions, got shape {x.shape}")
  a1 = _axis("diagonal", axis1, x.ndim, f"an array of shape {x.shape}")
  a2 = _axis("diagonal", axis2, x.ndim, f"an array of shape {x.shape}")
  if a1 == a2:
    raise ValueError(f"diagonal: axis1 ({axis1}) and axis2 ({axis2}) are the same axis of shape {x.shape}")
  return _diagonal(x, int(offset), a1, a2)


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None) -> Array:
  """The sum of `diagonal(x, offset, axis1, axis2)`; the dtype follows `sum` (small ints and bool
  accumulate in 32 bits, as JAX's trace) unless `dtype` is given."""
  return _sum(diagonal(x, offset, axis1, axis2), -1, dtype=dtype)


# ---- einsum
_ELLIPSIS = "..."


def _parse_term(term: str, where: str) -> list[str]:
  """The labels of one subscripts term, in order, with '...' as one item."""
  labels: list[str] = []
  i = 0
  while i < len(term):
    if term.startswith(_ELLIPSIS, i):
      if _ELLIPSIS in labels: raise ValueError(f"einsum: {where} has more than one '...'")
      labels.append(_ELLIPSIS)
      i += 3
      continue
    c = term[i]
    if c == ".": raise ValueError(f"einsum: {where} has a '.' that is not part of an ellipsis '...'")
    if not (c.isascii() and c.isalpha()):
      raise ValueError(f"einsum: invalid label {c!r} in {where}; labels are letters a-z and A-Z")
    labels.append(c)
    i += 1
  return labels


def _ellipsis_labels(n: int) -> list[str]:
  # '...' dimensions are right-aligned across operands, so they are named from the right: '...1' is the last
  return [f"{_ELLIPSIS}{n - j}" for j in range(n)]


def _expand_ellipsis(labels: list[str], x: Array, k: int, term: str) -> list[str]:
  """One label per axis of operand k: '...' stands for however many axes the letters leave over."""
  letters = len(labels) - (_ELLIPSIS in labels)
  if _ELLIPSIS not in labels:
    if letters != x.ndim:
      raise ValueError(f"einsum: operand {k} has {x.ndim} dimensions (shape {x.shape}) but its subscripts "
                       f"{term!r} have {letters} labels")
    return labels
  if letters > x.ndim:
    raise ValueError(f"einsum: operand {k} has {x.ndim} dimensions (shape {x.shape}) but its subscripts "
                     f"{term!r} have {letters} labels besides '...'")
  at = labels.index(_ELLIPSIS)
  return labels[:at] + _ellipsis_labels(x.ndim - letters) + labels[at + 1:]


def _distinct_labels(x: Array, labels: list[str], k: int, term: str) -> tuple[Array, list[str]]:
  """Operand k with each label repeated within it ('ii') replaced by the diagonal over those axes."""
  for lb in dict.fromkeys(labels):
    while labels.count(lb) > 1:
      p = labels.index(lb)
      q = labels.index(lb, p + 1)
      if x.shape[p] != x.shape[q]:
        raise ValueError(f"einsum: label {lb!r} repeats in operand {k} ({term!r}, shape {x.shape}) "
                         f"on axes of different sizes {x.shape[p]} and {x.shape[q]}")
      x = _diagonal(x, 0, p, q)
      labels = [other for i, other in enumerate(labels) if i not in (p, q)] + [lb]
  return x, labels


def _label_sizes(xs: list[Array], labels: list[list[str]], terms: list[str]) -> dict[str, int]:
  """The size of every label, in order of first appearance. Sizes must agree across operands, except
  that size 1 broadcasts."""
  sizes: dict[str, tuple[int, int]] = {}  # label -> (size, the operand that set it)
  for k, (x, ls) in enumerate(zip(xs, labels)):
    for lb, n in zip(ls, x.shape):
      have, src = sizes.get(lb, (1, k))
      if n != have and have != 1 and n != 1:
        if lb.startswith(_ELLIPSIS):
          raise ValueError(f"einsum: the '...' dimensions of operand {src} (shape {xs[src].shape}) and "
                           f"operand {k} (shape {x.shape}) cannot be broadcast together")
        raise ValueError(f"einsum: label {lb!r} has size {have} in operand {src} ({terms[src]!r}) "
                         f"but size {n} in operand {k} ({terms[k]!r})")
      if have == 1: sizes[lb] = (n, k)
  return {lb: n for lb, (n, _) in sizes.items()}


def _output_labels(output: Optional[str], written: list[list[str]], n_ellipsis: int) -> list[str]:
  """The labels of the result's axes: as `output` says, or NumPy's implicit order when it is None."""
  if output is None:
    letters = [lb for ls in written for lb in ls if not lb.startswith(_ELLIPSIS)]
    return _ellipsis_labels(n_ellipsis) + sorted(lb for lb in set(letters) if letters.count(lb) == 1)
  where = f"the output {'->' + output!r}"
  out = _parse_term(output, where)
  inputs = {lb for ls in written for lb in ls}
  for lb in out:
    if out.count(lb) > 1: raise ValueError(f"einsum: output label {lb!r} appears more than once in {where}")
    if lb != _ELLIPSIS and lb not in inputs:
      raise ValueError(f"einsum: output label {lb!r} in {where} does not appear in any input")
  if _ELLIPSIS not in out:
    if n_ellipsis:
      raise ValueError(f"einsum: operands have {n_ellipsis} '...' dimension(s) but {where} has no '...' "
                       f"to put them in")
    return out
  at = out.index(_ELLIPSIS)
  return out[:at] + _ellipsis_labels(n_ellipsis) + out[at + 1:]


def einsum(subscripts: str, *operands: Any) -> Array:
  """Einstein summation, as NumPy's `einsum(subscripts, *operands)`.

  Each comma-separated term labels the axes of one operand with letters; '...' stands for any run of
  axes, and those broadcast across operands right-aligned. A label repeated within one operand takes
  that operand's diagonal ('ii->i'). A label's size must agree across operands, or be 1 (which
  broadcasts). With '->' the output is as written and labels missing from it are summed; if any
  operand has '...' axes the output must have '...' too (as NumPy; JAX would sum them). Without '->'
  the output is the '...' axes, then the labels written exactly once, in alphabetical order (upper
  case first).

  All operands are multiplied in one broadcast product and reduced once (no pairwise contraction
  order), so the work is the product of all label sizes: fine for two operands or small arrays.
  The interleaved (operand, sublist) calling form is not supported.
  """
  if not isinstance(subscripts, str):
    raise TypeError(f"einsum: subscripts must be a string like 'ij,jk->ik', got "
                    f"{type(subscripts).__name__}; the interleaved (operand, sublist) form is not supported")
  spec = "".join(subscripts.split())
  if spec.count("->") > 1: raise ValueError(f"einsum: subscripts {subscripts!r} have more than one '->'")
  inputs, arrow, output = spec.partition("->")
  terms = inputs.split(",")
  if len(terms) != len(operands):
    raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operand(s) "
                     f"but {len(operands)} were given")
  xs = _operands(*operands)
  written = [_expand_ellipsis(_parse_term(t, f"the subscripts of operand {k} {t!r}"), x, k, t)
             for k, (t, x) in enumerate(zip(terms, xs))]
  n_ellipsis = max(sum(lb.startswith(_ELLIPSIS) for lb in ls) for ls in written)
  out_labels = _output_labels(output if arrow else None, written, n_ellipsis)
  distinct = [_distinct_labels(x, ls, k, t) for k, (x, ls, t) in enumerate(zip(xs, written, terms))]
  xs, labels = [x for x, _ in distinct], [ls for _, ls in distinct]
  sizes = _label_sizes(xs, labels, terms)

  # every label gets one axis: the output's first, in output order, then the summed ones
  order = out_labels + [lb for lb in sizes if lb not in out_labels]
  aligned = []
  for x, ls in zip(xs, labels):
    mine = sorted(ls, key=order.index)
    x = x._permute(tuple(ls.index(lb) for lb in mine))
    aligned.append(x._reshape(tuple(x.shape[mine.index(lb)] if lb in ls else 1 for lb in order)))
  return _contract(aligned, range(len(out_labels), len(order)))
