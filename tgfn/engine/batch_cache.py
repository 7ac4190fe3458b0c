"""The prepared kernels of a batch (a jitted function's kernels), kept on disk and keyed by their ASTs.

A process that compiles a function another process already compiled finds, under one key, each
kernel's function name, C source, flop count and opts, so it skips codegen entirely: it hands the
sources to the driver, whose own disk cache (keyed by source) holds the binaries.

The key covers everything codegen's output depends on: each kernel's AST (as text: op, dtype, arg and
sources of every node), name and buffer dtypes; the opts asked for; the codegen switches read from the
environment; the compiler's identity (flags, CPU model, -march=native macros); and a hash of the code
that turns ASTs into sources, so a changed codegen never hands back an old source.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tgfn.codegen.opts import Opt, OptOps
from tgfn.device import cache_read, cache_write
from tgfn.helpers import settings
from tgfn.schedule.kernelize import LoweredKernel
from tgfn.uop.ops import UOp

_CODEGEN_PACKAGES = ("codegen", "renderer", "uop")
_CODEGEN_FILES = ("dtype.py", "engine/realize.py", "engine/batch_cache.py")


@dataclass
class PreparedRecord:
  symbol: str          # the function's name in the batch's binary (distinct within the batch)
  source: str
  flops: int
  opts: list[Opt]


@functools.cache
def _code_hash(driver_file: str) -> str:
  """SHA-256 of the codegen, renderer and IR sources, and of the driver's (which configures its renderer)."""
  root = Path(__file__).resolve().parent.parent
  files = sorted(p for pkg in _CODEGEN_PACKAGES for p in (root / pkg).glob("*.py"))
  files += [root / f for f in _CODEGEN_FILES] + [Path(driver_file)]
  digest = hashlib.sha256()
  for path in files:
    digest.update(str(path.relative_to(root.parent) if root.parent in path.parents else path.name).encode())
    digest.update(path.read_bytes())
  return digest.hexdigest()


def ast_text(ast: UOp) -> Optional[str]:
  """The AST spelled node by node (sources by position), the same in every process; None if some
  argument has no stable spelling (its repr names a memory address)."""
  index: dict[UOp, int] = {}
  lines = []
  for u in ast.toposort():
    arg = repr(u.arg)
    if " at 0x" in arg: return None
    index[u] = len(lines)
    lines.append(f"{u.op.name} {u.dtype!r} {arg} {[index[s] for s in u.src]}")
  return "\n".join(lines)


def batch_key(device: str, renderer: object, compiler_key: str, kernels: list[LoweredKernel],
              opts: list[Optional[list[Opt]]]) -> Optional[str]:
  """The disk key of a batch, or None when it cannot be keyed (an AST without a stable spelling)."""
  driver = sys.modules[type(renderer).__module__].__file__ or ""
  parts = [device, compiler_key, _code_hash(driver), repr(settings.code_key)]
  for kernel, chosen in zip(kernels, opts):
    if (text := ast_text(kernel.ast)) is None: return None
    parts += [kernel.name, repr([b.dtype for b in kernel.buffers]), repr(chosen), text]
  return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def load(key: str, count: int) -> Optional[list[PreparedRecord]]:
  """The `count` records stored under `key`, or None (missing, damaged, or not of that length)."""
  if (payload := cache_read("batches", key)) is None: return None
  try:
    records = [PreparedRecord(r["symbol"], r["source"], r["flops"], [Opt(OptOps[o], a, n) for o, a, n in r["opts"]])
               for r in json.loads(payload)]
  except (ValueError, KeyError, TypeError):
    return None
  return records if len(records) == count else None


def store(key: str, records: list[PreparedRecord]) -> None:
  payload = [{"symbol": r.symbol, "source": r.source, "flops": r.flops,
              "opts": [[o.op.name, o.axis, o.amount] for o in r.opts]} for r in records]
  cache_write("batches", key, json.dumps(payload).encode())
