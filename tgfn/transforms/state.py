"""Tensor state under jit: what a traced function reads from and writes to mutable Tensors.

Outside a trace, a Tensor's value and grad are plain attributes. While `jit` traces a function, a
`StateTrace` is active: the first read of a Tensor that existed before the trace gives a placeholder
(an implicit input, bound to that Tensor's current value on every call); `assign` and `.grad = ...`
on such a Tensor are recorded (implicit outputs, written back after every call) instead of changing
it. Tensors created during the trace are temporaries and behave normally. Explicit Tensor arguments
are handled the same way, by position (tgfn/transforms/jit.py binds them).
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from tgfn.array import Array
from tgfn.transforms.trace import placeholder


class _PerThread(threading.local):
  def __init__(self) -> None: self.active: list[StateTrace] = []


# per thread: a trace in one thread must not capture the Tensor reads and writes of eager code in another
_local = _PerThread()


class StateTrace:
  def __init__(self) -> None:
    self.reads: dict[int, tuple[Any, Array]] = {}        # id -> (tensor, placeholder)
    self.writes: dict[int, tuple[Any, Array]] = {}       # id -> (tensor, new value)
    self.grad_writes: dict[int, tuple[Any, Optional[Any]]] = {}  # id -> (tensor, new grad Tensor or None)
    self.temporaries: set[int] = set()
    self._keep: list[Any] = []  # temporaries stay alive for the trace, so their ids stay unique

  def read(self, t: Any) -> Array:
    key = id(t)
    if key in self.temporaries: return t._data
    if key in self.writes: return self.writes[key][1]
    if key not in self.reads:
      self.reads[key] = (t, Array(placeholder(t._data.shape, t._data.dtype, t._data.uop.device)))
    return self.reads[key][1]

  def write(self, t: Any, value: Array) -> None:
    if id(t) in self.temporaries: t._data = value
    else: self.writes[id(t)] = (t, value)

  def read_grad(self, t: Any) -> Optional[Any]:
    if id(t) in self.temporaries or id(t) not in self.grad_writes: return t._grad
    return self.grad_writes[id(t)][1]

  def write_grad(self, t: Any, grad: Optional[Any]) -> None:
    if id(t) in self.temporaries: t._grad = grad
    else: self.grad_writes[id(t)] = (t, grad)

  def bind_argument(self, t: Any, value: Array) -> None:
    """An explicit Tensor argument: reads give `value` (the argument's placeholder)."""
    self.reads[id(t)] = (t, value)


def active() -> Optional[StateTrace]: return stack[-1] if (stack := _local.active) else None


def created(t: Any) -> None:
  if stack := _local.active:
    stack[-1].temporaries.add(id(t))
    stack[-1]._keep.append(t)


def read(t: Any) -> Array: return stack[-1].read(t) if (stack := _local.active) else t._data
def read_grad(t: Any) -> Optional[Any]: return stack[-1].read_grad(t) if (stack := _local.active) else t._grad


def write(t: Any, value: Array) -> None:
  if stack := _local.active: stack[-1].write(t, value)
  else: t._data = value


def write_grad(t: Any, grad: Optional[Any]) -> None:
  if stack := _local.active: stack[-1].write_grad(t, grad)
  else: t._grad = grad


class tracing_state:
  """Context manager: record Tensor reads and writes while a function is traced (in this thread)."""
  def __enter__(self) -> StateTrace:
    _local.active.append(StateTrace())
    return _local.active[-1]

  def __exit__(self, *exc: Any) -> None: _local.active.pop()
