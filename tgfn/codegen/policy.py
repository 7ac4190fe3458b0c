"""The float policy: which reorderings of floating-point work kernels may do (docs/compiler.md).

By default a kernel may (1) split a long reduction into blocks and sum the block results (more
accurate: the error grows with the block count plus the block size, not with the length), (2) keep
several partial accumulators (vector lanes) for a reduction and combine them at the end, and (3) fuse
the multiply and add of a reduction into one FMA. Elementwise math is never reordered or contracted:
every ALU op rounds exactly as tgfn/uop/alu.py says. `STRICT_FLOAT=1` turns (1)-(3) off, so every
reduction accumulates sequentially, one rounding per op, in the order the reference interpreter uses.
"""
from __future__ import annotations

from tgfn.helpers import settings

# a reduction longer than this is split into blocks of at most this many elements
REDUCE_BLOCK = 4096


def strict_float() -> bool: return settings.STRICT_FLOAT
