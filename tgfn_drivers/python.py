"""PYTHON: the reference interpreter. It runs the linearized kernel one scalar op at a time with the
exact semantics of tgfn/uop/alu.py. Slow by design; every other driver is checked against it."""
from __future__ import annotations

import ast
from typing import Any, Sequence

import numpy as np

from tgfn.device import Compiled, Compiler, HostAllocator
from tgfn.dtype import DType, dtype_from_name, dtypes
from tgfn.renderer import Renderer
from tgfn.uop.alu import bf16_bits_to_float, exec_alu, float_to_bf16_bits
from tgfn.uop.ops import AxisType, Ops, UOp


def _encode_arg(arg: Any) -> Any:
  if isinstance(arg, (Ops, AxisType)): return arg.name
  if isinstance(arg, tuple): return tuple(_encode_arg(a) for a in arg)
  if isinstance(arg, float): return ("float", float(arg).hex())
  return arg


class PythonRenderer(Renderer):
  """The 'source' is a readable listing: one (op, dtype, source positions, arg) tuple per line."""
  def render(self, name: str, program: list[UOp], buffer_dtypes: list[DType], param_dtypes: Sequence[DType] = ()) -> str:
    pos = {u: i for i, u in enumerate(program)}
    lines = [repr((name, [d.name for d in buffer_dtypes], [d.name for d in param_dtypes]))]
    for u in program:
      lines.append(repr((u.op.name, u.dtype.name if u.dtype else None, tuple(pos[s] for s in u.src if s in pos),
                         _encode_arg(u.arg))))
    return "\n".join(lines)


class PythonCompiler(Compiler):
  cachekey = "python-interpreter"
  def compile(self, src: str) -> bytes: return src.encode()
  def compile_cached(self, src: str) -> bytes: return self.compile(src)


def _decode(line: str) -> tuple:
  op, dtype, srcs, arg = ast.literal_eval(line)
  if isinstance(arg, tuple) and len(arg) == 2 and arg[0] == "float": arg = float.fromhex(arg[1])
  if op == "ASSIGN": arg = Ops[arg]
  return Ops[op], dtype_from_name(dtype) if dtype else None, srcs, arg


class PythonProgram:
  def __init__(self, name: str, lib: bytes):
    lines = lib.decode().splitlines()
    _, buffer_dtypes, param_dtypes = ast.literal_eval(lines[0])
    self.buffer_dtypes = [dtype_from_name(d) for d in buffer_dtypes]
    self.n_args = len(buffer_dtypes) + len(param_dtypes)
    self.instrs = [_decode(line) for line in lines[1:]]
    self.loop_end: dict[int, int] = {}
    open_loops: list[int] = []
    for i, (op, _, srcs, _) in enumerate(self.instrs):
      if op is Ops.RANGE: open_loops.append(i)
      elif op is Ops.ENDRANGE: self.loop_end[open_loops.pop()] = i

  def __call__(self, *args: Any) -> None:
    """`args`: the buffers (NumPy arrays), then the scalar parameters (Python values)."""
    if len(args) != self.n_args: raise TypeError(f"kernel takes {self.n_args} arguments, got {len(args)}")
    buffers, params = args[:len(self.buffer_dtypes)], args[len(self.buffer_dtypes):]
    views = [b.view(np.uint16 if d is dtypes.bfloat16 else d.np) for b, d in zip(buffers, self.buffer_dtypes)]
    instrs, vals = self.instrs, [None] * len(self.instrs)
    dts = [ins[1] for ins in instrs]
    pc = 0
    with np.errstate(all="ignore"):
      while pc < len(instrs):
        op, dtype, srcs, arg = instrs[pc]
        if op is Ops.CONST: vals[pc] = exec_alu(Ops.CAST, dtype, (arg,), (dtype,)) if dtype.is_float else arg
        elif op is Ops.DEFINE_GLOBAL: vals[pc] = arg
        # a scalar parameter takes its dtype exactly as a constant of that value would
        elif op is Ops.DEFINE_VAR: vals[pc] = exec_alu(Ops.CAST, dtype, (params[arg],), (dtype,)) if dtype.is_float else params[arg]
        elif op is Ops.RANGE:
          if vals[srcs[0]] <= 0:
            pc = self.loop_end[pc] + 1
            continue
          vals[pc] = 0
        elif op is Ops.ENDRANGE:
          start = srcs[0]
          vals[start] += 1
          if vals[start] < vals[instrs[start][2][0]]:
            pc = start + 1
            continue
        elif op is Ops.DEFINE_ACC: vals[pc] = vals[srcs[0]]
        elif op is Ops.ASSIGN:
          acc, value = srcs
          vals[acc] = exec_alu(arg, dts[acc], (vals[acc], vals[value]), (dts[acc], dts[acc]))
        elif op is Ops.LOAD:
          if len(srcs) == 3 and not vals[srcs[2]]: vals[pc] = exec_alu(Ops.CAST, dtype, (0,), (dtypes.int32,))
          else: vals[pc] = self._load(views[vals[srcs[0]]], vals[srcs[1]], dtype)
        elif op is Ops.STORE:
          buf = vals[srcs[0]]
          self._store(views[buf], vals[srcs[1]], vals[srcs[2]], self.buffer_dtypes[buf])
        else: vals[pc] = exec_alu(op, dtype, tuple(vals[s] for s in srcs), tuple(dts[s] for s in srcs))
        pc += 1

  @staticmethod
  def _load(view: np.ndarray, index: int, dtype: DType) -> Any:
    raw = view[index]
    if dtype is dtypes.bfloat16: return bf16_bits_to_float(raw)
    if dtype.is_float: return raw
    return bool(raw) if dtype.is_bool else int(raw)

  @staticmethod
  def _store(view: np.ndarray, index: int, value: Any, dtype: DType) -> None:
    view[index] = float_to_bf16_bits(value) if dtype is dtypes.bfloat16 else value


DEVICE = Compiled("PYTHON", HostAllocator(), PythonRenderer(), PythonCompiler(), PythonProgram)
