"""Fuzzing the transforms: random smooth functions of one float array (elementwise math, reductions,
movement, indexing, `.at[]` updates, matmul), wrapped in random stacks of `jit`, `vmap` and `grad`, each
checked against a reference that uses none of them at that level:

  jit(f)           == f                                   (the eager code)
  vmap(f, a)(xs)   == stack([f(xs[..., i, ...]) for i])  (a Python loop)
  grad(f)(x)[i]    == jvp(f, x, e_i)                      (forward mode, one basis vector at a time)

where f inside a reference is itself the reference of the inner stack, so a whole composition such as
vmap(grad(jit(f))) is compared with Python loops over jvps of eager code."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st

import tgfn
import tgfn.numpy as tnp
from tgfn.array import Array
from tgfn.dtype import DType, dtypes
from tests.fuzz.programs import index_strategy, reshape_target
from tests.fuzz.settings import fuzz_settings
from tests.op_registry import Domain
from tests.strategies import arrays, axes

VALUES = Domain(-2.0, 2.0, specials=False)


@dataclass
class Fn:
  desc: str
  fn: Callable[[Array], Array]


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
  return len(a) <= len(b) and all(m in (1, n) for m, n in zip(a[::-1], b[::-1]))


@st.composite
def smooth_functions(draw: Any, shape: tuple[int, ...], dt: DType) -> Fn:
  """A random function of an array of `shape` and `dt`, differentiable everywhere (no max, abs, ...)."""
  lines, ops = [], []  # ops[i](pool) -> the value of v{i+1}; v0 is the argument
  probe = [tnp.zeros(shape, dtype=dt)]  # lazy values with the right shapes, to draw each step for

  def const(shape: tuple[int, ...]) -> np.ndarray: return draw(arrays(dt, shape, VALUES))

  for _ in range(draw(st.integers(1, 4), label="n_steps")):
    i = draw(st.integers(0, len(probe) - 1), label="operand")
    s = probe[i].shape
    kind = draw(st.sampled_from(["unary", "binary", "const", "reduce", "cumsum", "reshape", "transpose",
                                 "broadcast", "flip", "pad", "index", "update", "where", "matmul"]), label="kind")
    if kind == "unary":
      name = draw(st.sampled_from(["sin", "cos", "tanh", "square", "negative", "exp_tanh", "log1p_square"]))
      composed = {"exp_tanh": lambda a: tnp.exp(tnp.tanh(a)), "log1p_square": lambda a: tnp.log1p(tnp.square(a))}
      f = composed[name] if name in composed else getattr(tnp, name)
      op, text = (lambda p, f=f, i=i: f(p[i])), f"{name}(v{i})"
    elif kind == "binary":
      j = draw(st.sampled_from([j for j, v in enumerate(probe) if _broadcasts(v.shape, s)]))
      name = draw(st.sampled_from(["add", "subtract", "multiply"]))
      op, text = (lambda p, f=getattr(tnp, name), i=i, j=j: f(p[i], p[j])), f"{name}(v{i}, v{j})"
    elif kind == "const":
      c = const(s[draw(st.integers(0, len(s))):])
      name = draw(st.sampled_from(["add", "multiply"]))
      op, text = (lambda p, f=getattr(tnp, name), i=i, c=c: f(p[i], tnp.array(c))), f"{name}(v{i}, {c.tolist()})"
    elif kind == "reduce":
      axis = draw(st.one_of(st.none(), st.integers(-len(s), len(s) - 1))) if s else None
      keep, name = draw(st.booleans()), draw(st.sampled_from(["sum", "mean"]))
      if name == "mean" and math.prod(s) == 0: name = "sum"
      op = lambda p, f=getattr(tnp, name), i=i, a=axis, k=keep: f(p[i], axis=a, keepdims=k)
      text = f"{name}(v{i}, axis={axis}, keepdims={keep})"
    elif kind == "cumsum" and s:
      axis = draw(st.integers(0, len(s) - 1))
      op, text = (lambda p, i=i, a=axis: tnp.cumsum(p[i], axis=a)), f"cumsum(v{i}, axis={axis})"
    elif kind == "reshape":
      new = draw(reshape_target(math.prod(s)))
      op, text = (lambda p, i=i, n=new: tnp.reshape(p[i], n)), f"reshape(v{i}, {new})"
    elif kind == "transpose":
      perm = tuple(draw(st.permutations(range(len(s)))))
      op, text = (lambda p, i=i, q=perm: tnp.transpose(p[i], q)), f"transpose(v{i}, {perm})"
    elif kind == "broadcast":
      new = tuple(draw(st.lists(st.integers(1, 2), max_size=1))) + tuple(draw(st.integers(1, 3)) if n == 1 else n
                                                                       for n in s)
      op, text = (lambda p, i=i, n=new: tnp.broadcast_to(p[i], n)), f"broadcast_to(v{i}, {new})"
    elif kind == "flip":
      axis = draw(axes(len(s), True))
      op, text = (lambda p, i=i, a=axis: tnp.flip(p[i], a)), f"flip(v{i}, {axis})"
    elif kind == "pad" and s:
      widths = tuple((draw(st.integers(0, 1)), draw(st.integers(0, 1))) for _ in s)
      op, text = (lambda p, i=i, w=widths: tnp.pad(p[i], w)), f"pad(v{i}, {widths})"
    elif kind == "index":
      idx = draw(index_strategy(s))
      op, text = (lambda p, i=i, x=idx: p[i][x]), f"v{i}[{idx!r}]"
    elif kind == "update":
      idx = draw(index_strategy(s))
      method = draw(st.sampled_from(["set", "add", "multiply"]))
      c = const(np.empty(s)[idx].shape)
      op = lambda p, i=i, x=idx, m=method, c=c: getattr(p[i].at[x], m)(tnp.array(c))
      text = f"v{i}.at[{idx!r}].{method}({c.tolist()})"
    elif kind == "where":
      mask = draw(arrays(dtypes.bool, s, Domain()))
      j = draw(st.sampled_from([j for j, v in enumerate(probe) if _broadcasts(v.shape, s)]))
      op, text = (lambda p, i=i, j=j, m=mask: tnp.where(m, p[i], p[j])), f"where({mask.tolist()}, v{i}, v{j})"
    elif kind == "matmul" and s:
      c = const((s[-1], draw(st.integers(1, 3))))
      op, text = (lambda p, i=i, c=c: tnp.matmul(p[i], tnp.array(c))), f"matmul(v{i}, {c.tolist()})"
    else: continue
    probe.append(op(probe))
    ops.append(op)
    lines.append(f"v{len(probe) - 1} = {text}")

  def fn(x: Array) -> Array:
    pool = [x]
    for op in ops: pool.append(op(pool))
    return pool[-1]
  return Fn("\n".join(lines) or "v0 (identity)", fn)


@dataclass
class Stack:
  """`fn` (transformed) and `ref` (its loop/jvp reference) take arrays of `in_shape`."""
  desc: str
  fn: Callable[[Array], Array]
  ref: Callable[[Array], Array]
  in_shape: tuple[int, ...]


def _basis_jvps(h: Callable[[Array], Array], x: Array) -> Array:
  """The gradient of the scalar function h at x, one forward-mode jvp per element of x."""
  if x.size == 0: return tnp.zeros(x.shape, dtype=x.dtype)
  rows = []
  for k in range(x.size):
    e = tnp.reshape(tnp.zeros(x.size, dtype=x.dtype).at[k].set(1), x.shape)
    rows.append(tgfn.jvp(h, (x,), (e,))[1])
  return tnp.reshape(tnp.stack(rows), x.shape)


@st.composite
def transform_stacks(draw: Any, base: Fn, shape: tuple[int, ...], dt: DType) -> Stack:
  stack = Stack("f", base.fn, base.fn, shape)
  for _ in range(draw(st.integers(1, 2), label="depth")):
    kind = draw(st.sampled_from(["jit", "vmap", "grad"]), label="transform")
    inner = stack
    if kind == "jit":
      stack = Stack(f"jit({inner.desc})", tgfn.jit(inner.fn), inner.ref, inner.in_shape)
    elif kind == "vmap":
      n = len(inner.in_shape)
      axis, size = draw(st.integers(-n - 1, n)), draw(st.integers(1, 3))
      pos = axis % (n + 1)
      in_shape = inner.in_shape[:pos] + (size,) + inner.in_shape[pos:]

      def loop(xs: Array, inner: Stack = inner, pos: int = pos) -> Array:
        return tnp.stack([inner.ref(xs[(slice(None),) * pos + (b,)]) for b in range(xs.shape[pos])])
      stack = Stack(f"vmap({inner.desc}, in_axes={axis})", tgfn.vmap(inner.fn, in_axes=axis), loop, in_shape)
    else:
      out_shape = inner.ref(tnp.zeros(inner.in_shape, dtype=dt)).shape
      w = tnp.array(draw(arrays(dt, out_shape, VALUES), label="w"))

      def scalar(f: Callable[[Array], Array], w: Array = w) -> Callable[[Array], Array]:
        return lambda x: tnp.sum(f(x) * w)
      stack = Stack(f"grad(sum({inner.desc} * w))", tgfn.grad(scalar(inner.fn)),
                    lambda x, h=scalar(inner.ref): _basis_jvps(h, x), inner.in_shape)
  return stack


@given(data=st.data())
@fuzz_settings(bounded_examples=15)
def test_transform_compositions_match_loops_and_jvps(data: st.DataObject) -> None:
  dt = data.draw(st.sampled_from([dtypes.float32, dtypes.float64]), label="dtype")
  # sides 2 and 3 first: hypothesis favours the first choices, and most bugs need an axis of 2 or more
  shape = data.draw(st.lists(st.sampled_from([2, 3, 1, 0]), max_size=2).map(tuple), label="shape")
  base = data.draw(smooth_functions(shape, dt), label="f")
  note(f"f(v0) with v0 of {shape} {dt.name}:\n{base.desc}")
  stack = data.draw(transform_stacks(base, shape, dt), label="stack")
  note(f"checking {stack.desc} on shape {stack.in_shape}")
  x = tnp.array(data.draw(arrays(dt, stack.in_shape, VALUES), label="x"))
  got, want = np.asarray(stack.fn(x)), np.asarray(stack.ref(x))
  assert got.shape == want.shape and got.dtype == want.dtype, f"{got.shape} {got.dtype} != {want.shape} {want.dtype}"
  tol = 2e-4 if dt is dtypes.float32 else 1e-10
  scale = float(np.abs(want).max()) if want.size else 0.0
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(scale, 1.0))
