"""The public transforms: grad, value_and_grad, vjp, jvp, linearize, jacfwd, jacrev, hessian, vmap,
stop_gradient. Each traces the function into the UOp graph (tgfn/transforms/trace.py) and applies a
rule table (grad.py, jvp.py, vmap.py); results are ordinary lazy Arrays, so transforms compose."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Union

from tgfn.array import Array, as_array, device_put
from tgfn.transforms.grad import backward
from tgfn.transforms.jvp import forward
from tgfn.transforms.trace import bound, flatten_outputs, fn_name, placeholder, trace_inputs
from tgfn.transforms.vmap import batch_graph
from tgfn.tree import broadcast_prefix, flatten, unflatten
from tgfn.uop.ops import Ops, UOp, substitute
from tgfn.viz.locations import at_user_line

ArgNums = Union[int, Sequence[int]]


def stop_gradient(x: Any) -> Any:
  """The same value, with no derivative flowing through it (works on pytrees)."""
  leaves, tree = flatten(x)
  return unflatten(tree, [Array(UOp(Ops.DETACH, a.dtype, (a.uop,))) for a in map(as_array, leaves)])


def _trace_concrete(f: Callable, primals: Sequence[Any], has_aux: bool) -> tuple:
  """Run `f` on placeholders bound to `primals`: (input leaves, placeholders, output leaves, out tree, aux)."""
  leaves, in_tree = flatten(tuple(primals))
  inputs = [as_array(leaf) for leaf in leaves]
  holders = trace_inputs(inputs)
  with bound({h.uop: x.uop for h, x in zip(holders, inputs)}):
    out = f(*unflatten(in_tree, holders))
  aux = None
  if has_aux:
    if not (isinstance(out, tuple) and len(out) == 2):
      raise TypeError(f"{fn_name(f)} was transformed with has_aux=True, so it must return a pair (output, aux){at_user_line()}")
    out, aux = out
  outs, out_tree = flatten_outputs(out, fn_name(f))
  return inputs, [h.uop for h in holders], outs, out_tree, in_tree, aux


def _bind_back(mapping: dict[UOp, UOp], x: Any, memo: dict[UOp, UOp]) -> Any:
  """Replace placeholders by the real inputs in every Array of the pytree `x`. `memo` is shared by every
  call with this mapping: the leaves (a loss and each parameter's gradient) share most of their graph,
  which is then walked once, not once per leaf."""
  if x is None: return None
  leaves, tree = flatten(x)
  return unflatten(tree, [Array(substitute(a.uop, mapping, memo)) if isinstance(a, Array) else a for a in leaves])


def vjp(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
  """(f(*primals), vjp_fn) where vjp_fn(cotangent) returns one cotangent per primal (pytrees ok)."""
  inputs, holders, outs, out_tree, in_tree, aux = _trace_concrete(f, primals, has_aux)
  mapping, memo = dict(zip(holders, (x.uop for x in inputs))), {}
  primal_out = _bind_back(mapping, unflatten(out_tree, outs), memo)

  def vjp_fn(cotangent: Any) -> tuple:
    ct_leaves, ct_tree = flatten(cotangent)
    if ct_tree != out_tree:
      raise ValueError(f"vjp: the cotangent must have the structure of the output {out_tree}, got {ct_tree}")
    cts = []
    for ct, o in zip(ct_leaves, outs):
      ct = as_array(ct)
      if ct.shape != o.shape:
        raise ValueError(f"vjp: cotangent shape {ct.shape} does not match output shape {o.shape}{at_user_line()}")
      cts.append(ct.astype(o.dtype))
    grads = backward([o.uop for o in outs], cts, holders)
    full = [_placed_like(g, x) if g is not None else Array.const(0, x.dtype, x.shape)
            for g, x in zip(grads, inputs)]
    return tuple(_bind_back(mapping, unflatten(in_tree, full), memo))

  return (primal_out, vjp_fn, _bind_back(mapping, aux, memo)) if has_aux else (primal_out, vjp_fn)


def _placed_like(ct: Array, primal: Array) -> Array:
  """The cotangent on the device its primal is committed to: the gradient of a linear function reads only
  the constants (iotas, masks) its ops made, which live on the default device."""
  if not primal.uop.committed or ct.uop.device in (None, primal.uop.device): return ct
  return device_put(ct, primal.uop.device)


def _check_float_inputs(name: str, args: Sequence[Any], argnums: Sequence[int]) -> None:
  for i in argnums:
    for leaf in flatten(args[i])[0]:
      dt = as_array(leaf).dtype
      if not dt.is_inexact:
        raise TypeError(f"{name} requires float inputs, but argument {i} has a leaf of dtype {dt.name}. "
                        "Differentiate with respect to float arrays (cast with .astype(tnp.float32)), "
                        f"or use vjp for integer inputs.{at_user_line()}")


def _argnums_tuple(argnums: ArgNums, nargs: int) -> tuple[int, ...]:
  nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
  for n in nums:
    if not -nargs <= n < nargs: raise ValueError(f"argnums {argnums} out of range for {nargs} positional arguments")
  return tuple(n % nargs for n in nums)


def value_and_grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False) -> Callable:
  """A function returning (f(*args), gradient of f with respect to args[argnums]); f must return a
  float scalar (plus aux when has_aux)."""
  @functools.wraps(f)
  def wrapped(*args: Any, **kwargs: Any) -> Any:
    nums = _argnums_tuple(argnums, len(args))
    _check_float_inputs("grad", args, nums)

    def partial(*diff: Any) -> Any:
      full = list(args)
      for n, d in zip(nums, diff): full[n] = d
      return f(*full, **kwargs)

    result = vjp(partial, *(args[n] for n in nums), has_aux=has_aux)
    out, vjp_fn = result[0], result[1]
    if not isinstance(out, Array) or out.shape != () or not out.dtype.is_float:
      got = f"an Array of dtype {out.dtype.name} and shape {out.shape}" if isinstance(out, Array) else \
        f"a {type(out).__name__}"
      fix = "cast it with .astype(tnp.float32)" if isinstance(out, Array) and out.shape == () else \
        "use vjp or jacrev for non-scalar outputs"
      raise TypeError(f"grad requires {fn_name(f)} to return a float scalar, got {got}; {fix}{at_user_line()}")
    grads = vjp_fn(Array.const(1.0, out.dtype))
    grad_value = grads[0] if isinstance(argnums, int) else grads
    return ((out, result[2]), grad_value) if has_aux else (out, grad_value)
  return wrapped


def grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False) -> Callable:
  """The gradient of the scalar function f with respect to args[argnums] (same pytree shape)."""
  vg = value_and_grad(f, argnums, has_aux)

  @functools.wraps(f)
  def wrapped(*args: Any, **kwargs: Any) -> Any:
    (value, grads) = vg(*args, **kwargs)
    return (grads, value[1]) if has_aux else grads
  return wrapped


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple:
  """(f(*primals), the directional derivative of f at primals along tangents)."""
  if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
    raise TypeError("jvp: primals and tangents must be tuples (or lists) of arguments")
  if flatten(tuple(primals))[1] != flatten(tuple(tangents))[1]:
    raise ValueError("jvp: primals and tangents must have the same pytree structure")
  inputs, holders, outs, out_tree, _, aux = _trace_concrete(f, primals, has_aux)
  tangent_leaves = [as_array(t) for t in flatten(tuple(tangents))[0]]
  for x, t in zip(inputs, tangent_leaves):
    if x.shape != t.shape:
      raise ValueError(f"jvp: tangent shape {t.shape} does not match primal shape {x.shape}{at_user_line()}")
  seeds = {h: t.astype(x.dtype) for h, x, t in zip(holders, inputs, tangent_leaves) if x.dtype.is_inexact}
  tangent_out = forward([o.uop for o in outs], seeds)
  full = [t if t is not None else Array.const(0, o.dtype, o.shape) for t, o in zip(tangent_out, outs)]
  mapping, memo = dict(zip(holders, (x.uop for x in inputs))), {}
  result = (_bind_back(mapping, unflatten(out_tree, outs), memo), _bind_back(mapping, unflatten(out_tree, full), memo))
  return result + (_bind_back(mapping, aux, memo),) if has_aux else result


def linearize(f: Callable, *primals: Any) -> tuple[Any, Callable]:
  """(f(*primals), f_jvp) where f_jvp(*tangents) is the JVP at primals (built from jvp)."""
  out = f(*primals)
  return out, lambda *tangents: jvp(f, primals, tangents)[1]


# ---- vmap
def _move_axis(x: Array, src: int, dst: int) -> Array:
  order = list(range(x.ndim))
  order.insert(dst, order.pop(src))
  return x._permute(tuple(order))


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: Optional[int] = None,
         axis_name: Optional[str] = None) -> Callable:
  """Map f over an axis of its inputs. in_axes/out_axes: an int, None (not mapped), or a pytree
  prefix of the arguments/outputs made of those; negative axes count from the end. With `axis_name`,
  collectives over that name (tgfn.lax.psum, ...) in f combine the mapped members."""
  @functools.wraps(f)
  def batched(*args: Any, **kwargs: Any) -> Any:
    if kwargs: args, call = args + (kwargs,), lambda *a: f(*a[:-1], **a[-1])
    else: call = f
    axes_spec = in_axes if not isinstance(in_axes, list) else tuple(in_axes)
    if isinstance(axes_spec, tuple) and len(axes_spec) != len(args) - (1 if kwargs else 0):
      raise ValueError(f"vmap in_axes has {len(axes_spec)} entries but {fn_name(f)} got "
                       f"{len(args) - (1 if kwargs else 0)} positional arguments{at_user_line()}")
    if kwargs and isinstance(axes_spec, tuple): axes_spec = axes_spec + (0,)
    leaves, in_tree = flatten(args)
    try:
      axes = broadcast_prefix(axes_spec, args)
    except ValueError as e:
      raise ValueError(f"vmap in_axes {in_axes!r} does not match the arguments' structure: {e}") from None
    size, arrays = axis_size, []
    for leaf, ax in zip(leaves, axes):
      x = as_array(leaf) if ax is not None else leaf
      if ax is not None:
        if not -x.ndim <= ax < x.ndim:
          raise ValueError(f"vmap in_axes {ax} is out of range for an argument of shape {x.shape}{at_user_line()}")
        n = x.shape[ax % x.ndim]
        if size is not None and n != size:
          raise ValueError(f"vmap got inconsistent sizes for the mapped axes: {_mapped_sizes(leaves, axes)}"
                           + (f" (axis_size={axis_size})" if axis_size is not None else "") + at_user_line())
        size = n
      arrays.append(x)
    if size is None: raise ValueError("vmap needs at least one mapped input (in_axes not all None) or axis_size")
    moved = {i: _move_axis(x, ax % x.ndim, 0) for i, (x, ax) in enumerate(zip(arrays, axes)) if ax is not None}
    traced = list(arrays)
    for i, x in moved.items(): traced[i] = Array(placeholder(x.shape[1:], x.dtype, x.uop.device, x.uop.committed))
    from tgfn.lax.collective_batching import batching_axis
    from tgfn.lax.collectives import axis_env
    with axis_env([(axis_name, size)] if axis_name is not None else []):
      out = call(*unflatten(in_tree, traced))
    outs, out_tree = flatten_outputs(out, fn_name(f))
    with batching_axis(axis_name):
      results = batch_graph([o.uop for o in outs], {traced[i].uop: x for i, x in moved.items()}, size)
    try:
      out_spec = broadcast_prefix(out_axes, unflatten(out_tree, outs))
    except ValueError as e:
      raise ValueError(f"vmap out_axes {out_axes!r} does not match the output structure: {e}") from None
    final = []
    for (value, is_batched), ax in zip(results, out_spec):
      if ax is None:
        if is_batched: raise ValueError(f"vmap out_axes=None, but an output of {fn_name(f)} depends on the mapped inputs{at_user_line()}")
        final.append(value)
        continue
      value = value if is_batched else value._reshape((1,) + value.shape)._broadcast_to((size,) + value.shape)
      if not -value.ndim <= ax < value.ndim:
        raise ValueError(f"vmap out_axes {ax} is out of range for an output with {value.ndim} dims (batch included){at_user_line()}")
      final.append(_move_axis(value, 0, ax % value.ndim))
    return unflatten(out_tree, final)
  return batched


def _mapped_sizes(leaves: Sequence[Any], axes: Sequence[Any]) -> str:
  return ", ".join(f"axis {ax} of shape {as_array(x).shape}" for x, ax in zip(leaves, axes) if ax is not None)


# ---- Jacobians
def _basis_blocks(leaves: Sequence[Array]) -> list[Array]:
  """The standard basis of the concatenated leaves, cut per leaf: leaf i gets shape (N,) + its shape,
  where N is the total size, so row k is the k-th unit vector of the whole pytree."""
  import tgfn.numpy as tnp
  total, blocks, offset = sum(x.size for x in leaves), [], 0
  for x in leaves:
    eye = tnp.eye(total, dtype=x.dtype)[:, offset:offset + x.size]
    blocks.append(eye._reshape((total,) + x.shape))
    offset += x.size
  return blocks


def _split_rows(stacked: Array, sizes: Sequence[int]) -> list[Array]:
  """Cut axis 0 of `stacked` into consecutive pieces of the given sizes."""
  pieces, offset = [], 0
  for n in sizes:
    pieces.append(stacked[offset:offset + n])
    offset += n
  return pieces


def _diff_view(f: Callable, args: tuple, argnums: ArgNums, name: str) -> tuple[tuple, Callable, bool]:
  """The differentiated arguments as a tuple, f as a function of that tuple, and whether argnums is an int."""
  nums = _argnums_tuple(argnums, len(args))
  _check_float_inputs(name, args, nums)

  def of_selected(selected: tuple) -> Any:
    full = list(args)
    for n, v in zip(nums, selected): full[n] = v
    return f(*full)
  return tuple(args[n] for n in nums), of_selected, isinstance(argnums, int)


def _assemble(blocks: list[list[Array]], out_tree: Any, in_tree: Any, single: bool) -> Any:
  """blocks[j][i] (output leaf j, input leaf i) as JAX lays out a Jacobian: the output's tree with, at each
  leaf, the input's tree (the argument itself for an int argnums, a tuple of arguments otherwise)."""
  rows = []
  for row in blocks:
    inner = unflatten(in_tree, row)
    rows.append(inner[0] if single else inner)
  return unflatten(out_tree, rows)


def jacfwd(f: Callable, argnums: ArgNums = 0, has_aux: bool = False) -> Callable:
  """Jacobian by forward mode: vmap of jvp over the standard basis of the inputs. Each block has the
  output leaf's shape followed by the input leaf's shape; pytrees and argnums tuples as in JAX."""
  @functools.wraps(f)
  def jac(*args: Any) -> Any:
    selected, f_sel, single = _diff_view(f, args, argnums, "jacfwd")
    leaves, in_tree = flatten(selected)
    xs = [as_array(leaf) for leaf in leaves]

    def column(*tangent_leaves: Array) -> Any:
      tangents = unflatten(in_tree, tangent_leaves)
      result = jvp(f_sel, (unflatten(in_tree, xs),), (tangents,), has_aux=has_aux)
      return (result[1], result[2]) if has_aux else result[1]

    out = vmap(column, out_axes=(0, None) if has_aux else 0)(*_basis_blocks(xs))
    columns, aux = out if has_aux else (out, None)
    outs, out_tree = flatten(columns)
    blocks = [[piece._permute(tuple(range(1, c.ndim)) + (0,))._reshape(c.shape[1:] + x.shape)
               for piece, x in zip(_split_rows(c, [x.size for x in xs]), xs)] for c in outs]
    result = _assemble(blocks, out_tree, in_tree, single)
    return (result, aux) if has_aux else result
  return jac


def jacrev(f: Callable, argnums: ArgNums = 0, has_aux: bool = False) -> Callable:
  """Jacobian by reverse mode: vmap of vjp over the standard basis of the outputs. Same layout as jacfwd."""
  @functools.wraps(f)
  def jac(*args: Any) -> Any:
    selected, f_sel, single = _diff_view(f, args, argnums, "jacrev")
    leaves, in_tree = flatten(selected)
    xs = [as_array(leaf) for leaf in leaves]
    result = vjp(f_sel, unflatten(in_tree, xs), has_aux=has_aux)
    out, pullback = result[0], result[1]
    outs, out_tree = flatten(out)
    outs = [as_array(o) for o in outs]
    for o in outs:
      if not o.dtype.is_float: raise TypeError(f"jacrev needs float outputs, got one of dtype {o.dtype.name}")
    rows = vmap(lambda *cts: flatten(pullback(unflatten(out_tree, cts))[0])[0])(*_basis_blocks(outs))
    per_input = [_split_rows(r, [o.size for o in outs]) for r in rows]
    blocks = [[per_input[i][j]._reshape(o.shape + x.shape) for i, x in enumerate(xs)] for j, o in enumerate(outs)]
    jacobian = _assemble(blocks, out_tree, in_tree, single)
    return (jacobian, result[2]) if has_aux else jacobian
  return jac


def hessian(f: Callable, argnums: ArgNums = 0, has_aux: bool = False) -> Callable:
  """The Hessian of a scalar function: jacfwd(jacrev(f)), with the same argnums and has_aux."""
  return jacfwd(jacrev(f, argnums, has_aux), argnums, has_aux)
