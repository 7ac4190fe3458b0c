"""The spec checker rejects malformed graphs at each stage, naming the broken rule."""
import pytest

import tgfn.numpy as tnp
from tgfn.dtype import dtypes
from tgfn.uop.ops import Ops, UOp
from tgfn.uop.spec import SpecError, verify_kernel, verify_linear, verify_tensor_graph


def test_well_formed_graphs_pass():
  x = tnp.ones((2, 3))
  verify_tensor_graph(((x * 2).sum(1) + 1).uop)


@pytest.mark.parametrize("build, rule", [
  (lambda c: UOp(Ops.ADD, dtypes.float32, (c(dtypes.float32), c(dtypes.int32))), "different dtypes"),
  (lambda c: UOp(Ops.CMPLT, dtypes.float32, (c(dtypes.float32), c(dtypes.float32))), "produces dtypes.bool"),
  (lambda c: UOp(Ops.RESHAPE, dtypes.float32, (c(dtypes.float32),), (2,)), "changes the size"),
  (lambda c: UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (c(dtypes.float32),), (1,)),), (3, 2)),
   "only grow size-1 axes"),
  (lambda c: UOp(Ops.PLACEHOLDER, dtypes.float32, (), (0, (2,), None)), "unbound PLACEHOLDER"),
])
def test_malformed_tensor_graphs_are_rejected(build, rule):
  with pytest.raises(SpecError, match=rule):
    verify_tensor_graph(build(lambda dt: UOp.const(dt, 1)))


def test_malformed_kernels_and_programs_are_rejected():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 0)
  bad_index = UOp(Ops.STORE, None, (g, UOp.const(dtypes.float32, 0.0), UOp.const(dtypes.float32, 1.0)))
  with pytest.raises(SpecError, match="index must be an integer"):
    verify_kernel(UOp(Ops.SINK, None, (bad_index,)))
  rng = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 4),), 0)
  with pytest.raises(SpecError, match="never closed"):
    verify_linear([rng.src[0], rng])
  with pytest.raises(SpecError, match="before it is computed"):
    verify_linear([rng])
