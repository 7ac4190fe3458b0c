"""Whole jitted functions on disk: a warm process replays a compiled graph without scheduling.

A kernel's binary is cached on disk by its source (tgfn/device.py), and a batch's sources by their
ASTs (batch_cache.py), but both keys need the kernels' ASTs, so every new process still schedules,
lowers and keys each kernel before it finds them. This cache keys one step earlier: on the traced
graph itself. `graph_key` spells the graph (every node's op, dtype, arg and sources, with the
inputs by position and captured constants by order of appearance, never by object identity), the
donated inputs, the switches codegen reads, the default device's compiler identity (its flags, CPU
model and -march=native macros) and the identity of tgfn's own source files. Under that key a `Plan`
holds everything a CompiledGraph needs to run: its buffer slots, which slots the captured constants
fill, each kernel's device, function name, C source (the driver's own disk cache holds the
binaries) and DEBUG=2 name and bytes moved, the launch steps over slots, the output slots and the donation plan.

A damaged, truncated or unreadable entry is a miss (its hash check or `Plan.parse` rejects it) and is
rewritten, as is (with a warning) one whose kernels cannot be loaded; entries are written to a
temporary file and renamed, so concurrent writers never tear one.
Graphs with a loop, branch or host call (a CALL or HOST node), or with an argument that has no stable
spelling, are not kept. TGFN_DISABLE_PLAN_CACHE=1 turns it off; SPEC=1, DEBUG=3 and up, DEBUG_NANS,
VIZ and process-replay capture bypass it, since they look at the graphs and kernels being built.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from tgfn import helpers
from tgfn.helpers import settings
from tgfn.codegen.opts import Opt, OptOps
from tgfn.codegen.search import beam_width
from tgfn.device import Device, cache_read, cache_write, warn_once
from tgfn.dtype import DType, dtype_from_name
from tgfn.uop.ops import Ops, UOp, toposort

PLAN_FORMAT = 2   # bump when the stored layout changes
_NOT_KEPT = (Ops.CALL, Ops.HOST)  # their args are Python objects (bodies, functions) the plan cannot name


class Counters:
  """Plan cache events in this process (tests assert on them)."""
  hits = 0
  misses = 0
  stores = 0


def enabled() -> bool:
  """Whether jit compiles consult the cache now (see the module doc for what bypasses it)."""
  s = settings
  if s.TGFN_DISABLE_PLAN_CACHE or s.TGFN_DISABLE_COMPILER_CACHE or s.SPEC or s.DEBUG >= 3 or s.DEBUG_NANS: return False
  return helpers.tracker is None and not s.TGFN_CAPTURE


class _Unkeyable(Exception):
  """An argument without a spelling that is the same in every process."""


def _spell(arg: Any) -> str:
  if arg is None or isinstance(arg, (bool, int, float, complex, str)): return repr(arg)
  if isinstance(arg, tuple): return "(" + ",".join(_spell(a) for a in arg) + ")"
  if isinstance(arg, DType): return arg.name
  if isinstance(arg, enum.Enum): return f"{type(arg).__name__}.{arg.name}"
  raise _Unkeyable(type(arg).__name__)


@functools.cache
def _source_identity() -> str:
  """Path, size and modification time of every Python file of tgfn and its drivers: any edit, install or
  upgrade changes it (a stat per file, under a millisecond, where hashing the contents takes ten). One
  scandir per folder, one hash update at the end: os.walk's per-file Python cost was half of it."""
  tgfn_root = Path(__file__).resolve().parent.parent
  folders, lines = [str(tgfn_root.parent / "tgfn_drivers"), str(tgfn_root)], []
  while folders:
    try:
      with os.scandir(folders.pop()) as found: entries = sorted(found, key=lambda e: e.name)
    except OSError:
      continue  # (a folder that is not there: sources not in folders, e.g. a zip import)
    for entry in entries:
      if entry.name.endswith(".py"):
        st = entry.stat()
        lines.append(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}")
      elif entry.name != "__pycache__" and entry.is_dir(): folders.append(entry.path)
  return hashlib.sha256("\0".join(lines).encode()).hexdigest() if lines else ""  # '': no plans


def compiler_key(device: str) -> str:
  """The device's compiler identity (for the CPU: command, flags, CPU model, -march=native macros)."""
  return _compiler_key(Device.backend(device), os.environ.get("CC"))


@functools.lru_cache(maxsize=None)
def _compiler_key(backend: str, cc: Optional[str]) -> str:  # once per process (the CPU's reads /proc/cpuinfo)
  return getattr(Device[backend].compiler, "cachekey", "")


@dataclass
class GraphKey:
  key: str
  captured: list[UOp]  # the graph's BUFFER nodes (captured constants), in the order the key numbers them


def graph_key(inputs: Sequence[UOp], outputs: Sequence[UOp], donated: Sequence[int]) -> Optional[GraphKey]:
  """The disk key of compiling `outputs` over the placeholders `inputs`, or None if the graph cannot be kept."""
  if any(p.op is not Ops.PLACEHOLDER for p in inputs): return None
  position = {p: i for i, p in enumerate(inputs)}
  captured: list[UOp] = []
  index: dict[UOp, int] = {}
  lines = [f"inputs {[(p.op.name, p.dtype.name, _spell(p.arg[1:])) for p in inputs]}"]
  try:
    for u in toposort(list(outputs)):
      if u.op in _NOT_KEPT: return None
      if u.op is Ops.PLACEHOLDER:
        if u not in position: return None  # another trace's placeholder: not an input of this graph
        arg = f"input {position[u]}"
      elif u.op is Ops.BUFFER:  # (unique id, device, shape): the id is this process's
        arg = f"captured {len(captured)} {_spell(u.arg[1:])}"
        captured.append(u)
      else: arg = _spell(u.arg)
      index[u] = len(lines)
      lines.append(f"{u.op.name} {u.dtype.name if u.dtype is not None else None} {arg} {[index[s] for s in u.src]}")
  except _Unkeyable:
    return None
  if not (code := _source_identity()): return None
  default = Device.DEFAULT
  lines += [f"outputs {[index[o] for o in outputs]}", f"donated {sorted(donated)}",
            f"switches {settings.code_key!r} beam {beam_width()} device {default}",
            f"compiler {compiler_key(default)}", f"code {code} format {PLAN_FORMAT}",
            f"python {sys.implementation.cache_tag}"]
  return GraphKey(hashlib.sha256("\n".join(lines).encode()).hexdigest(), captured)


@dataclass
class StoredKernel:
  name: str
  device: str
  symbol: str          # the function's name in its binary
  source: str
  flops: int
  opts: list[Opt]
  label: str           # its DEBUG=2 name, without the '#n' that tells kernels of one process apart
  nbytes: int          # bytes of the buffers it reads and writes (DEBUG=2's GB/s)


@dataclass
class Plan:
  """A CompiledGraph without its objects: slots (device, size, dtype, shape), captured constants as
  slot -> index into GraphKey.captured, kernels, steps (kernel index or -1 for a copy, slots, number of
  outputs), output slots, donation (output slot -> donated input slot), compiler identity per device."""
  slots: list[tuple[str, int, DType, tuple[int, ...]]]
  captured: dict[int, int]
  kernels: list[StoredKernel]
  steps: list[tuple[int, tuple[int, ...], int]]
  outputs: list[int]
  donation: dict[int, int]
  compilers: dict[str, str]
  programs: list[Callable[..., None]] = field(default_factory=list)  # the kernels' programs, once loaded

  def to_json(self) -> bytes:
    return json.dumps({
      "format": PLAN_FORMAT, "compilers": self.compilers,
      "slots": [[d, size, dt.name, list(shape)] for d, size, dt, shape in self.slots],
      "captured": sorted(self.captured.items()),
      "kernels": [[k.name, k.device, k.symbol, k.source, k.flops, [[o.op.name, o.axis, o.amount] for o in k.opts],
                   k.label, k.nbytes] for k in self.kernels],
      "steps": [[k, list(slots), n] for k, slots, n in self.steps],
      "outputs": self.outputs, "donation": sorted(self.donation.items())}).encode()

  @staticmethod
  def parse(payload: bytes, n_inputs: int, n_captured: int) -> Plan:
    """The plan in `payload`; ValueError (or KeyError, TypeError, IndexError) if it is not a consistent one."""
    d = json.loads(payload)
    if d["format"] != PLAN_FORMAT: raise ValueError("another plan format")
    slots = [(str(dev), int(size), dtype_from_name(dt), tuple(int(n) for n in shape))
             for dev, size, dt, shape in d["slots"]]
    kernels = [StoredKernel(str(name), str(dev), str(sym), str(src), int(flops),
                            [Opt(OptOps[o], int(a), int(n)) for o, a, n in opts], str(label), int(nbytes))
               for name, dev, sym, src, flops, opts, label, nbytes in d["kernels"]]
    steps = [(int(k), tuple(int(s) for s in step_slots), int(n)) for k, step_slots, n in d["steps"]]
    plan = Plan(slots, {int(s): int(c) for s, c in d["captured"]}, kernels, steps, [int(s) for s in d["outputs"]],
                {int(o): int(i) for o, i in d["donation"]}, {str(k): str(v) for k, v in d["compilers"].items()})
    n = len(slots)
    in_range = lambda ss: all(0 <= s < n for s in ss)  # noqa: E731
    ok = n >= n_inputs and all(0 <= c < n_captured and n_inputs <= s < n for s, c in plan.captured.items())
    ok = ok and all(in_range(ss) and (0 <= k < len(kernels) and 1 <= n_out <= len(ss) or k == -1 and n_out == 1 and
                                      len(ss) == 2) for k, ss, n_out in steps)
    ok = ok and in_range(plan.outputs) and all(o in plan.outputs and 0 <= i < n_inputs for o, i in plan.donation.items())
    if not ok: raise ValueError("slot numbers out of range")
    return plan


def load(key: GraphKey, n_inputs: int, parsed: Optional[Callable[[Plan], None]] = None) -> Optional[Plan]:
  """The plan stored under `key` with its kernels loaded, or None: missing, damaged, made for another
  compiler, or its kernels cannot be loaded (then with a warning). `parsed(plan)`, if given, runs once the
  plan is read and checked, before its kernels load (work that does not need them can start meanwhile)."""
  if (payload := cache_read("plans", key.key)) is None:
    Counters.misses += 1
    return None
  try:
    plan = Plan.parse(payload, n_inputs, len(key.captured))
    if any(compiler_key(device) != ck for device, ck in plan.compilers.items()): raise ValueError("another compiler")
  except (ValueError, KeyError, TypeError, IndexError, AttributeError):
    Counters.misses += 1
    return None
  if parsed is not None: parsed(plan)
  try:
    plan.programs = load_programs(plan.kernels)
  except Exception as e:  # parsed, but names a device this process lacks, or a function its binary lacks
    warn_once("jit plan", f"ignoring a jit plan cache entry whose kernels could not be loaded ({e!r}); compiling "
                          f"the function again")
    Counters.misses += 1
    return None
  Counters.hits += 1
  return plan


def store(key: GraphKey, plan: Plan) -> None:
  cache_write("plans", key.key, plan.to_json())
  Counters.stores += 1


def load_programs(kernels: list[StoredKernel]) -> list[Callable[..., None]]:
  """Each stored kernel's program. Kernels of one device build as one batch, as compile_kernels would have
  built them in a fresh process, so the driver finds the same compilation units in its disk cache."""
  programs: list[Any] = [None] * len(kernels)
  by_device: dict[str, list[int]] = {}
  for i, k in enumerate(kernels): by_device.setdefault(k.device, []).append(i)
  for device, group in by_device.items():
    dev = Device[device]
    symbols = {kernels[i].symbol for i in group}
    if dev.build_many is None or len(group) == 1 or beam_width() or len(symbols) < len(group):
      for i in group: programs[i] = dev.runtime(kernels[i].symbol, dev.compiler.compile_cached(kernels[i].source))
    else:
      for i, program in zip(group, dev.build_many([(kernels[i].symbol, kernels[i].source) for i in group])):
        programs[i] = program
  return programs
