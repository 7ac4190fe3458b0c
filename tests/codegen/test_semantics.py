"""tgfn/codegen/semantics.py: every op it lowers keeps its exact value (tgfn/uop/alu.py), and every op left
after it is defined in C, OpenCL C and CUDA C on the values that reach it -- evaluated as a printed kernel
runs, every branch of a select computed."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tgfn.codegen.semantics import lower_alu, lower_semantics
from tgfn.dtype import DType, dtypes
from tgfn.uop.alu import exec_alu
from tgfn.uop.ops import Ops, UOp, toposort

INTS = [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64]
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]


def int_edges(dtype: DType) -> list[int]:
  raw = [dtype.min, dtype.min + 1, -2, -1, 0, 1, 2, 7, dtype.bits - 1, dtype.bits, dtype.bits + 1, dtype.max - 1, dtype.max]
  return sorted({v for v in raw if dtype.min <= v <= dtype.max})


FLOAT_EDGES = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 255.9, 256.0, -128.5,
               65535.5, 2.0 ** 31, 2.0 ** 31 - 128, -2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 1e30,
               -1e30, 1e-40]


def run(root: UOp, env: dict[UOp, object]) -> object:
  """Evaluate a lowered graph as a printed kernel does: every node, both sides of every select, checking
  that each op gets values on which the C family defines it."""
  vals: dict[UOp, object] = {}
  for u in toposort([root]):
    if u.op is Ops.DEFINE_VAR: vals[u] = env[u]
    elif u.op is Ops.CONST: vals[u] = exec_alu(Ops.CAST, u.dtype, (u.arg,), (u.dtype,)) if u.dtype.is_float else u.arg
    else:
      srcs = [vals[s] for s in u.src]
      if u.op in (Ops.IDIV, Ops.MOD):
        assert srcs[1] != 0 and not (u.dtype.kind == "i" and srcs[1] == -1), f"{u.op} by {srcs[1]} reached a printer"
      if u.op in (Ops.SHL, Ops.SHR): assert 0 <= srcs[1] < u.dtype.bits, f"shift by {srcs[1]} reached a printer"
      if u.op is Ops.CAST and u.src[0].dtype.is_float and u.dtype.is_int:
        assert float(u.dtype.min) <= float(srcs[0]) < float(u.dtype.max) + 1, f"cast of {srcs[0]} to {u.dtype} reached a printer"
      assert not (u.op is Ops.MAX and u.dtype.is_float), "a float MAX reached a printer"
      vals[u] = exec_alu(u.op, u.dtype, tuple(srcs), tuple(s.dtype for s in u.src))
  return vals[root]


def same(a: object, b: object) -> bool:
  if isinstance(a, (float, np.floating)): return np.float64(a).tobytes() == np.float64(b).tobytes() or (a != a and b != b)
  return a == b


def check(op: Ops, dtype: DType, srcs: list[tuple[DType, list]]) -> None:
  leaves = [UOp(Ops.DEFINE_VAR, dt, (), i) for i, (dt, _) in enumerate(srcs)]
  original = UOp(op, dtype, tuple(leaves))
  lowered = lower_alu(original)
  for values in np.array(np.meshgrid(*[np.arange(len(v)) for _, v in srcs])).T.reshape(-1, len(srcs)):
    args = [srcs[k][1][i] for k, i in enumerate(values)]
    with np.errstate(over="ignore"):  # a value past float16's range is inf there
      env = {leaf: exec_alu(Ops.CAST, leaf.dtype, (a,), (dtypes.float64,)) if leaf.dtype.is_float else a
             for leaf, a in zip(leaves, args)}
    want = exec_alu(op, dtype, tuple(env[l] for l in leaves), tuple(l.dtype for l in leaves))
    got = run(lowered, env)
    assert same(got, want), f"{op} {dtype} {args}: lowered gives {got}, alu.py {want}"


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD])
def test_division(op, dtype):
  check(op, dtype, [(dtype, int_edges(dtype))] * 2)


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("op", [Ops.SHL, Ops.SHR])
def test_shift(op, dtype):
  check(op, dtype, [(dtype, int_edges(dtype)), (dtype, int_edges(dtype))])


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("dst", INTS, ids=str)
def test_float_to_int(src, dst):
  check(Ops.CAST, dst, [(src, FLOAT_EDGES)])


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64], ids=str)
def test_max_propagates_nan(dtype):
  check(Ops.MAX, dtype, [(dtype, FLOAT_EDGES)] * 2)


def test_constant_operands_need_no_guard():
  x = UOp(Ops.DEFINE_VAR, dtypes.int32, (), 0)
  assert lower_alu(x // UOp.const(dtypes.int32, 7)).op is Ops.IDIV
  assert lower_alu(x.alu(Ops.SHL, UOp.const(dtypes.int32, 3))).op is Ops.SHL
  assert lower_alu(x // UOp.const(dtypes.int32, 0)).arg == 0 and lower_alu(x // UOp.const(dtypes.int32, -1)).op is Ops.NEG


def test_lowering_is_applied_once_to_a_whole_graph():
  x, y = UOp(Ops.DEFINE_VAR, dtypes.int32, (), 0), UOp(Ops.DEFINE_VAR, dtypes.int32, (), 1)
  root = (x // y) // y
  lowered = lower_semantics(root)
  # two guarded divisions, each quotient guarded once: the rewritten quotient is not rewritten again
  assert sum(u.op is Ops.IDIV for u in toposort([lowered])) == 2
  for a, b in [(7, 0), (-2 ** 31, -1), (9, 2), (-9, 2)]:
    want = exec_alu(Ops.IDIV, dtypes.int32, (exec_alu(Ops.IDIV, dtypes.int32, (a, b), (dtypes.int32,) * 2), b), (dtypes.int32,) * 2)
    assert run(lowered, {x: a, y: b}) == want
