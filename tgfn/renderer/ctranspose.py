"""Square blocks transposed in registers, written as a network of two-vector shuffles.

A transposing copy, after tgfn/codegen/transposed_loads.py, loads W rows of a block as W-lane vectors
and builds each column as VECTORIZE(GEP(row 0, u), ..., GEP(row W-1, u)). Written lane by lane that is
W*W element picks, which gcc's instruction combiner spends most of its time on (60% of an 8x8 block
kernel's compile). The same W columns are log2(W) rounds of W shuffles: each round swaps the off-diagonal
h x h blocks of every 2h x 2h block (h = W/2, ..., 1), row i with row i + h. An 8x8 float block is 24
shuffles, which gcc maps to unpack / shuffle / 128-bit permute instructions: a quarter of the compile
time of the element picks, and as fast (a 512x512 transpose: 88 us either way on one AVX-512 core).
"""
from __future__ import annotations

from typing import Callable, Optional

from tgfn.dtype import dtypes
from tgfn.uop.ops import Ops, UOp

_MASK_INT = {4: dtypes.int32, 8: dtypes.int64}
Block = tuple[tuple[UOp, ...], int]  # the rows, and which column


def block_columns(program: list[UOp]) -> dict[UOp, Block]:
  """The VECTORIZEs of `program` that are the columns of a whole square block of loaded rows, all in one
  loop scope: each -> (the block's rows, its column)."""
  by_rows: dict[tuple[UOp, ...], dict[int, UOp]] = {}
  scope: dict[UOp, Optional[UOp]] = {}
  open_loops: list[Optional[UOp]] = [None]
  for u in program:
    if u.op is Ops.ENDRANGE: open_loops.pop()
    scope[u] = open_loops[-1]
    if u.op is Ops.RANGE: open_loops.append(u)
    if u.op is not Ops.VECTORIZE or not all(s.op is Ops.GEP for s in u.src): continue
    rows, width = tuple(s.src[0] for s in u.src), len(u.src)
    if width & (width - 1) or width < 2 or u.src[0].arg >= width or any(s.arg != u.src[0].arg for s in u.src): continue
    if len(set(rows)) != width or any(r.op is not Ops.LOAD or r.dtype.count != width for r in rows): continue
    by_rows.setdefault(rows, {})[u.src[0].arg] = u
  out: dict[UOp, Block] = {}
  for rows, columns in by_rows.items():
    if len(columns) == len(rows) and len({scope[c] for c in columns.values()}) == 1:
      out.update((column, (rows, i)) for i, column in columns.items())
  return out


def transpose(rows: list[str], shuffle: Callable[[str, str, list[int]], str], declare: Callable[[str], str]) -> list[str]:
  """The columns of the block whose rows are named `rows`: `declare(expr)` names each shuffle's result."""
  width = len(rows)
  h = width // 2
  while h >= 1:
    nxt = list(rows)
    for i in range(width):
      if i & h: continue
      a, b = rows[i], rows[i + h]
      nxt[i] = declare(shuffle(a, b, [p if not p & h else width + p - h for p in range(width)]))
      nxt[i + h] = declare(shuffle(a, b, [p + h if not p & h else width + p for p in range(width)]))
    rows, h = nxt, h // 2
  return rows


def shuffler(compiler: str, itemsize: int) -> Callable[[str, str, list[int]], str]:
  """A two-vector shuffle of lanes of `itemsize` bytes: GCC's takes its indices as a vector of same-size ints,
  clang's as constants."""
  if compiler == "clang": return lambda a, b, idx: f"__builtin_shufflevector({a}, {b}, {', '.join(map(str, idx))})"
  mask = _MASK_INT[itemsize]
  return lambda a, b, idx: f"__builtin_shuffle({a}, {b}, (({mask.vec(len(idx)).cname}){{{', '.join(map(str, idx))}}}))"
