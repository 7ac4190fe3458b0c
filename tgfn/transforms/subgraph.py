"""Tracing a function into a closed `Body` (tgfn/uop/body.py), for the transforms that make CALL nodes:
a jitted function called inside another trace, and `custom_vjp` / `custom_jvp`.

A function is run on fresh placeholders for its array arguments; the values it reads from outside (an
outer placeholder, a realized buffer, work on them) are found by `captures` and become extra inputs of
the call, after the arguments. Several traces of one call (custom_vjp's function, forward and backward
rule) share one list of captured values, so their bodies share one input list.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from tgfn.array import Array
from tgfn.transforms.trace import bound, flatten_outputs, is_abstract, placeholder
from tgfn.tree import flatten, unflatten
from tgfn.uop.body import Call, call_outputs, captured_values, close
from tgfn.uop.ops import UOp


def holders_for(inputs: Sequence[Array]) -> list[UOp]:
  """Placeholders for `inputs`, each on its input's device and committed only if the input is (an
  uncommitted operand follows a committed one, inside a traced rule as outside)."""
  return [placeholder(x.shape, x.dtype, x.uop.device, x.uop.committed) for x in inputs]


@contextlib.contextmanager
def concrete_where_possible(holders: Sequence[UOp], inputs: Sequence[Array]) -> Iterator[None]:
  """Bind each placeholder to its input while the block runs when every input is concrete (eager code,
  or inside grad), so Python control flow on values works there, as when the function runs directly."""
  if any(is_abstract(x.uop) for x in inputs): yield
  else:
    with bound({h: x.uop for h, x in zip(holders, inputs)}): yield


def captures(*traces: tuple[Sequence[UOp], Sequence[UOp]]) -> list[UOp]:
  """Every value any of the (inputs, outputs) graphs reads from outside, once, in order of discovery."""
  out: dict[UOp, None] = {}
  for inputs, outs in traces:
    for u in captured_values(inputs, outs): out[u] = None
  return list(out)


def call_traced(fun: Callable[..., Any], args: tuple, kwargs: dict, static_nums: set[int],
                static_names: Sequence[str], name: str) -> Any:
  """`fun(*args, **kwargs)` as one CALL of a body traced on placeholders for the array leaves of the
  non-static arguments: how a jitted function called inside another trace (jit, grad, vmap, a loop
  body) appears there. Other leaves (Python scalars, static arguments) are passed through as they are.
  A function that assigns Tensors (tgfn.Tensor state) inlines instead, since its writes are effects
  of the caller's trace."""
  from tgfn.tensor import Tensor
  from tgfn.transforms import state
  dyn_args = [a for i, a in enumerate(args) if i not in static_nums]
  dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_names}
  leaves, tree = flatten((dyn_args, dyn_kwargs))
  if any(isinstance(x, Tensor) for x in leaves): return fun(*args, **kwargs)
  inputs = [x for x in leaves if isinstance(x, Array)]
  holders = holders_for(inputs)
  it = iter(holders)
  traced_args, traced_kwargs = unflatten(tree, [Array(next(it)) if isinstance(x, Array) else x for x in leaves])
  it_args = iter(traced_args)
  full_args = [a if i in static_nums else next(it_args) for i, a in enumerate(args)]
  full_kwargs = {k: kwargs[k] if k in static_names else traced_kwargs[k] for k in kwargs}
  st = state.active()
  before = (dict(st.writes), dict(st.grad_writes)) if st is not None else None
  outs, out_tree = flatten_outputs(fun(*full_args, **full_kwargs), name)
  if st is not None and (st.writes != before[0] or st.grad_writes != before[1]):
    st.writes, st.grad_writes = before  # the trace's writes are graphs over this trace's placeholders
    return fun(*args, **kwargs)
  out_uops = [o.uop for o in outs]
  captured = captures((holders, out_uops))
  body = close(holders + captured, out_uops)
  results = call_outputs(Call(body, f"jit {name}"), [x.uop for x in inputs] + captured)
  return unflatten(out_tree, [Array(u) for u in results])
