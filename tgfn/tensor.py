"""`Tensor`: a thin, mutable, PyTorch-style handle on an `Array`.

A Tensor holds its current value in `.data` (an immutable Array) and can be updated in place with
`assign`. Operations return new Tensors and remember the Tensors they read, so `loss.backward()` can
find the leaves that require gradients and fill their `.grad` -- through the same VJP rules as
`tgfn.grad`. Under `tgfn.jit`, Tensors the function reads become implicit inputs and Tensors it
assigns (or whose `.grad` it sets) become implicit outputs written back after every call
(tgfn/transforms/state.py), so a stateful training step compiles like a functional one.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tgfn.array import Array, as_array, device_put
from tgfn.transforms import state
from tgfn.uop.ops import Ops


class Tensor:
  __array_priority__ = 200  # NumPy defers to our operators

  def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None, device: Optional[str] = None):
    value = data.data if isinstance(data, Tensor) else data
    value = value if isinstance(value, Array) else Array.from_data(value, dtype, device)
    if dtype is not None: value = value.astype(dtype)
    if device is not None: value = device_put(value, device)
    self._data = value
    self._grad: Optional[Tensor] = None
    self.requires_grad = requires_grad
    self._parents: tuple[tuple[Tensor, Any], ...] = ()  # (tensor, the node of its value that was read)
    state.created(self)

  # ---- value and in-place update
  @property
  def data(self) -> Array: return state.read(self)

  @property
  def grad(self) -> Optional[Tensor]: return state.read_grad(self)

  @grad.setter
  def grad(self, value: Optional[Tensor]) -> None: state.write_grad(self, value)

  def assign(self, value: Any) -> Tensor:
    """Replace this Tensor's value in place (same shape; cast to its dtype)."""
    new = value.data if isinstance(value, Tensor) else as_array(value)
    if new.shape != self.shape:
      try:
        new = new._broadcast_to(self.shape)
      except ValueError:
        raise ValueError(f"assign: value of shape {new.shape} into a Tensor of shape {self.shape}") from None
    state.write(self, new.astype(self.dtype))
    return self

  @property
  def shape(self) -> tuple[int, ...]: return self.data.shape
  @property
  def dtype(self) -> Any: return self.data.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def device(self) -> str: return self.data.device

  def numpy(self) -> np.ndarray: return self.data.numpy()
  def item(self) -> Any: return self.data.item()
  def realize(self) -> Tensor:
    self.data.realize()
    return self
  def tolist(self) -> Any: return self.data.tolist()
  def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray: return self.data.__array__(dtype)
  def __repr__(self) -> str: return f"Tensor({self.data!r}{', requires_grad=True' if self.requires_grad else ''})"
  def __len__(self) -> int: return len(self.data)
  def __float__(self) -> float: return float(self.data)
  def __bool__(self) -> bool: return bool(self.data)
  __hash__ = object.__hash__  # Tensors are mutable objects: identity, as in PyTorch

  def detach(self) -> Tensor: return Tensor(self.data)

  # ---- autograd
  def backward(self, gradient: Any = None) -> None:
    """Accumulate d(self)/d(leaf) into `.grad` of every leaf Tensor with requires_grad that self depends on."""
    from tgfn.transforms.grad import backward
    if gradient is None:
      if self.shape != (): raise RuntimeError(f"backward() needs a gradient for a non-scalar Tensor of shape {self.shape}")
      gradient = Array.const(1.0, self.dtype)
    leaves = self._leaves()
    seed = gradient.data if isinstance(gradient, Tensor) else as_array(gradient).astype(self.dtype)
    grads = backward([self.data.uop], [seed], [node for _, node in leaves])
    for (leaf, _), g in zip(leaves, grads):
      if g is None: continue
      leaf.grad = Tensor(g) if leaf.grad is None else Tensor(leaf.grad.data + g)

  def _leaves(self) -> list[tuple[Tensor, Any]]:
    seen: set[tuple[int, int]] = set()
    out, stack = [], [(self, self.data.uop)]
    while stack:
      t, node = stack.pop()
      if (id(t), id(node)) in seen: continue
      seen.add((id(t), id(node)))
      if not t._parents:
        if t.requires_grad: out.append((t, node))
      else: stack.extend(t._parents)
    return out

  # ---- operations: compute on the Arrays, remember the parents
  def _apply(self, fn: Any, *others: Any, **kwargs: Any) -> Tensor:
    tensors = [self] + [o for o in others if isinstance(o, Tensor)]
    values = {id(t): t.data for t in tensors}
    out = Tensor(fn(values[id(self)], *[values[id(o)] if isinstance(o, Tensor) else o for o in others], **kwargs))
    out.requires_grad = any(t.requires_grad for t in tensors)
    if out.requires_grad: out._parents = tuple((t, values[id(t)].uop) for t in tensors)
    return out


def _method(name: str) -> Any:
  """A Tensor method that applies the Array method of the same name (operators included)."""
  def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    return self._apply(lambda a, *rest, **kw: getattr(a, name)(*rest, **kw), *args, **kwargs)
  method.__name__ = name
  return method


def _function(name: str) -> Any:
  def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    import tgfn.numpy as tnp
    return self._apply(getattr(tnp, name), *args, **kwargs)
  method.__name__ = name
  return method


for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__", "__matmul__",
              "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rpow__", "__rmatmul__", "__neg__", "__abs__",
              "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__getitem__", "__and__", "__or__",
              "__invert__", "var", "std", "argmax", "argmin", "reshape",
              "transpose", "flatten", "squeeze", "astype", "clip", "cumsum"):
  setattr(Tensor, _name, _method(_name))
for _name in ("exp", "log", "sqrt", "tanh", "sin", "cos", "abs", "square", "maximum", "minimum", "where"):
  setattr(Tensor, _name, _function(_name))


def _torch_reduction(name: str) -> Any:
  """PyTorch spelling: t.sum(dim=1, keepdim=True) as well as NumPy's t.sum(axis=1, keepdims=True)."""
  def method(self: Tensor, dim: Any = None, keepdim: bool = False, **kwargs: Any) -> Tensor:
    axis, keepdims = kwargs.pop("axis", dim), kwargs.pop("keepdims", keepdim)
    return self._apply(lambda a: getattr(a, name)(axis, keepdims=keepdims, **kwargs))
  method.__name__ = name
  return method


for _name in ("sum", "mean", "max", "min", "prod", "any", "all"):
  setattr(Tensor, _name, _torch_reduction(_name))


def _nn(name: str) -> Any:
  def method(self: Tensor, dim: int = -1) -> Tensor:
    from tgfn import nn
    return self._apply(lambda a: getattr(nn, name)(a, axis=dim) if name != "sigmoid" else nn.sigmoid(a))
  method.__name__ = name
  return method


for _name in ("softmax", "log_softmax", "sigmoid"):
  setattr(Tensor, _name, _nn(_name))


def _in_place(name: str) -> Any:
  """t.add_(x) and friends: compute and assign in place, as PyTorch's trailing-underscore methods."""
  def method(self: Tensor, other: Any) -> Tensor:
    value = other.data if isinstance(other, Tensor) else other
    return self.assign(getattr(self.data, name)(value))
  method.__name__ = name.strip("_") + "_"
  return method


for _name, _dunder in (("add_", "__add__"), ("sub_", "__sub__"), ("mul_", "__mul__"), ("div_", "__truediv__")):
  setattr(Tensor, _name, _in_place(_dunder))


def _size(self: Tensor, dim: Optional[int] = None) -> Any:
  return self.shape if dim is None else self.shape[dim]


def _unsqueeze(self: Tensor, dim: int) -> Tensor:
  import tgfn.numpy as tnp
  return self._apply(lambda a: tnp.expand_dims(a, dim))


def _requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
  self.requires_grad = requires_grad
  return self


Tensor.size = _size  # type: ignore[attr-defined]
Tensor.view = lambda self, *shape: self.reshape(*shape)  # type: ignore[attr-defined]
Tensor.permute = lambda self, *dims: self.transpose(*dims)  # type: ignore[attr-defined]
Tensor.unsqueeze = _unsqueeze  # type: ignore[attr-defined]
Tensor.float = lambda self: self.astype("float32")  # type: ignore[attr-defined]
Tensor.long = lambda self: self.astype("int64")  # type: ignore[attr-defined]
Tensor.zero_ = lambda self: self.assign(0)  # type: ignore[attr-defined]
Tensor.requires_grad_ = _requires_grad_  # type: ignore[attr-defined]
Tensor.matmul = Tensor.__matmul__  # type: ignore[attr-defined]
Tensor.T = property(lambda self: self.transpose())  # type: ignore[attr-defined]
Tensor.relu = lambda self: self._apply(lambda a: (a > 0)._alu(Ops.WHERE, a, Array.const(0, a.dtype, a.shape)))  # type: ignore
