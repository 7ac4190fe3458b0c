"""vmap of a custom-derivative call: the batched call's rules are the original rules, traced on
per-example placeholders and then batched with the same rewrite as everything else."""
from __future__ import annotations

from typing import Optional, Sequence

from tgfn.array import Array
from tgfn.transforms.custom import CustomCall
from tgfn.transforms.trace import placeholder
from tgfn.transforms.vmap import Batched, _lead, batch_graph
from tgfn.uop.ops import Ops, UOp


def _batched_rule(size: int, batched_inputs: dict[UOp, Array], holders: Sequence[UOp],
                  per_example: Sequence[Optional[Array]], batched_args: Sequence[Array]) -> list[Optional[Array]]:
  env = dict(batched_inputs)
  env.update(zip(holders, batched_args))
  present = [g for g in per_example if g is not None]
  results = iter(batch_graph([g.uop for g in present], env, size))
  out = []
  for g in per_example:
    if g is None: out.append(None)
    else:
      value, is_batched = next(results)
      out.append(_lead(value, is_batched, size))
  return out


def batch_custom(node: UOp, srcs: Sequence[Batched], size: int, batched_inputs: dict[UOp, Array],
                 cache: dict[CustomCall, CustomCall]) -> Array:
  call, index = node.arg
  if call not in cache:
    inputs = [_lead(a, b, size) for a, b in srcs[1:]]

    def backward_rule(cts: list[Array]) -> list[Optional[Array]]:
      holders = [placeholder(shape, dt, None) for shape, dt in call.out_avals]
      per_example = call.backward({i: Array(h) for i, h in enumerate(holders)})
      return _batched_rule(size, batched_inputs, holders, per_example, cts)

    def jvp_rule(tangents: list[Array]) -> list[Array]:
      holders = [placeholder(u.shape, u.dtype, u.device) for u in call.inputs]
      per_example = [call.forward_tangent(i, [Array(h) for h in holders], {}) for i in range(len(call.out_avals))]
      return _batched_rule(size, batched_inputs, holders, per_example, tangents)

    cache[call] = CustomCall([x.uop for x in inputs], call.in_tree,
                             [((size,) + shape, dt) for shape, dt in call.out_avals], call.name,
                             backward_rule=backward_rule,
                             jvp_rule=jvp_rule if call.has_jvp_rule else None)
  batched_call = cache[call]
  value = _lead(*srcs[0], size)
  return Array(UOp(Ops.CUSTOM, node.dtype, (value.uop, *batched_call.inputs), (batched_call, index)))
