"""Every primitive op has a grad, jvp and vmap rule, or a written reason it needs none: no user should
ever meet 'no rule for X' at run time."""
import pytest

from tgfn.transforms.grad import NO_VJP_NEEDED, VJP_RULES
from tgfn.transforms.jvp import JVP_RULES, NO_JVP_NEEDED
from tgfn.transforms.vmap import BATCH_RULES, NO_BATCH_RULE_NEEDED
from tgfn.uop.ops import GroupOp, Ops

# kernel- and linear-level ops never reach a transform: transforms run on tensor-level graphs only
KERNEL_LEVEL = {Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.RANGE, Ops.LOAD, Ops.STORE, Ops.REDUCE, Ops.SINK, Ops.ENDRANGE,
                Ops.DEFINE_ACC, Ops.ASSIGN, Ops.VECTORIZE, Ops.GEP}
# CALL nodes have one rule per call kind (tgfn/lax/rules.py and, for custom_vjp / custom_jvp,
# tgfn/transforms/custom_rules.py; checked below); every transform dispatches on them
HANDLED_SPECIALLY = {Ops.CALL}
TENSOR_LEVEL = [op for op in Ops if op not in KERNEL_LEVEL | HANDLED_SPECIALLY]


@pytest.mark.parametrize("op", TENSOR_LEVEL, ids=lambda op: op.name)
def test_every_op_has_a_vjp_rule_or_a_reason(op):
  assert (op in VJP_RULES) != (op in NO_VJP_NEEDED), f"{op}: needs exactly one of a VJP rule or a reason"


@pytest.mark.parametrize("op", TENSOR_LEVEL, ids=lambda op: op.name)
def test_every_op_has_a_jvp_rule_or_a_reason(op):
  assert (op in JVP_RULES) != (op in NO_JVP_NEEDED), f"{op}: needs exactly one of a JVP rule or a reason"


@pytest.mark.parametrize("op", TENSOR_LEVEL, ids=lambda op: op.name)
def test_every_op_has_a_batching_rule_or_a_reason(op):
  assert (op in BATCH_RULES) != (op in NO_BATCH_RULE_NEEDED), f"{op}: needs exactly one of a batching rule or a reason"


def test_reasons_are_written_down():
  for table in (NO_VJP_NEEDED, NO_JVP_NEEDED, NO_BATCH_RULE_NEEDED):
    assert all(isinstance(reason, str) and len(reason) > 5 for reason in table.values())


def test_non_differentiable_ops_are_only_integer_boolean_or_leaves():
  allowed = {Ops.TRUNC, Ops.BITCAST, Ops.BUFFER, Ops.CONST, Ops.PARAM, Ops.PLACEHOLDER} | (GroupOp.ALU - {
    Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.RECIP, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.MAX,
    Ops.WHERE, Ops.CAST})
  assert set(NO_VJP_NEEDED) <= allowed


def test_gather_rules_differentiate_the_source_only_and_batch_either_operand():
  import numpy as np

  from tgfn.array import Array
  from tgfn.uop.ops import UOp
  x = Array.from_data(np.arange(6, dtype=np.float32).reshape(2, 3))
  index = Array.from_data(np.array([[2, 0, 1], [1, 1, 0]], np.int32))
  y = x._gather(index, 1).uop
  ct_x, ct_index = VJP_RULES[Ops.GATHER](Array.const(1.0, y.dtype, y.shape), y)
  assert ct_index is None and ct_x.shape == x.shape
  np.testing.assert_array_equal(ct_x.numpy(), [[1, 1, 1], [1, 2, 0]])  # repeated positions accumulate
  tangent = JVP_RULES[Ops.GATHER](y, [Array.const(1.0, x.dtype, x.shape), None])
  assert tangent.uop.op is Ops.GATHER and tangent.uop.src[1] is index.uop
  for batched in ((True, False), (False, True), (True, True)):
    srcs = [((Array(UOp(Ops.EXPAND, s.dtype, (UOp(Ops.RESHAPE, s.dtype, (s,), (1,) + s.shape),), (4,) + s.shape))
              if b else Array(s)), b) for s, b in zip(y.src, batched)]
    out = BATCH_RULES[Ops.GATHER](y, srcs, 4)
    assert out.shape == (4,) + y.shape and out.uop.arg == 2
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(Array(y).numpy(), (4,) + y.shape))


def _one_call_of_each_kind():
  import tgfn
  import tgfn.numpy as tnp
  from tgfn import checkpoint, lax
  from tgfn.uop import body
  x = tnp.ones(3)
  softplus = tgfn.custom_jvp(lambda x: tnp.log1p(tnp.exp(x)))
  softplus.defjvps(lambda t, out, x: t / (1 + tnp.exp(-x)))
  clipped = tgfn.custom_vjp(tnp.sin)
  clipped.defvjp(lambda x: (tnp.sin(x), (tnp.cos(x),)), lambda res, g: (tnp.clip(res[0] * g, -1, 1),))
  calls = {
    body.Scan: lambda x: lax.scan(lambda c, v: (c * v, c), x, tnp.ones((2, 3)))[1].sum(),
    body.Cond: lambda x: lax.cond(x.sum() > 0, tnp.sin, tnp.cos, x).sum(),
    body.While: lambda x: lax.while_loop(lambda c: c.sum() < 10, lambda c: c * 2, x).sum(),
    body.Call: lambda x: checkpoint(tnp.sin)(x).sum(),
    body.CustomJVP: lambda x: softplus(x).sum(),
    body.CustomVJP: lambda x: clipped(x).sum(),
  }
  return x, calls


def test_every_call_kind_has_grad_jvp_and_vmap_rules():
  """Each kind of CALL (tgfn/uop/body.py) goes through vjp, jvp and vmap under jit, where predicates are
  abstract and the call stays a call; a while_loop's reverse mode is the one documented error."""
  import tgfn
  from tests.conftest import TEST_DEVICE
  from tgfn.uop import body
  x, calls = _one_call_of_each_kind()
  assert set(calls) == set(body.CallSpec.__subclasses__())
  for kind, f in calls.items():
    if kind is body.CustomVJP:  # forward mode is the documented error, as in JAX
      with pytest.raises(TypeError, match="can't apply forward-mode differentiation"):
        tgfn.jit(lambda x: tgfn.jvp(f, (x,), (x,))[1])(x)
    else: assert float(tgfn.jit(lambda x: tgfn.jvp(f, (x,), (x,))[1])(x)) == float(tgfn.jvp(f, (x,), (x,))[1])
    assert tgfn.jit(tgfn.vmap(f))(x[None]).shape == (1,)
    if kind is body.While:
      with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        tgfn.jit(tgfn.grad(f))(x)
    else: assert tgfn.jit(tgfn.grad(f))(x).shape == (3,)


def test_every_collective_kind_has_jvp_vjp_and_batching_rules():
  """COLLECTIVE is one op with a kind per collective (tgfn/lax/collectives.py): each kind goes through
  jvp and grad inside vmap(axis_name=) (its batching rule over its own axis), and through a vmap of
  another axis inside that (its batching rule as a collective kept for the outer axis)."""
  import numpy as np

  import tgfn
  from tgfn import lax
  from tgfn.lax.collectives import KINDS
  uses = {
    "psum": lambda v: lax.psum(v, "i"), "pmax": lambda v: lax.pmax(v, "i"), "pmin": lambda v: lax.pmin(v, "i"),
    "all_gather": lambda v: lax.all_gather(v, "i", tiled=True),
    "psum_scatter": lambda v: lax.psum_scatter(v, "i", tiled=True),
    "all_to_all": lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True),
    "ppermute": lambda v: lax.ppermute(v, "i", [(0, 1), (1, 0)]),
    "axis_index": lambda v: v * lax.axis_index("i"),
  }
  assert set(uses) == set(KINDS)
  x = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
  for kind, f in uses.items():
    loss = lambda v: (f(v) * f(v)).sum()  # noqa: E731
    grads = tgfn.vmap(tgfn.grad(loss), axis_name="i")(x)
    tangents = tgfn.vmap(lambda v: tgfn.jvp(f, (v,), (v,))[1], axis_name="i")(x)
    inner = tgfn.vmap(lambda row: tgfn.vmap(lambda v: f(v), axis_name="j")(row[None])[0], axis_name="i")(x)
    assert grads.shape == x.shape and tangents.shape[0] == 2 and inner.shape[0] == 2, kind
    assert np.isfinite(grads.numpy()).all() and np.isfinite(tangents.numpy()).all(), kind
