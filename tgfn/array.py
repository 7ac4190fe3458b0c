"""`Array`: the immutable, lazy value of tgfn. It is a handle on a tensor-level UOp.

Nothing computes until the value is observed (`numpy()`, `np.asarray(x)`, `item()`, `float()`, `repr`,
`bool`); then the graph behind it is scheduled, fused into kernels and run on its device.

This module holds the primitive layer every other op is built from: broadcasting, dtype promotion,
and one builder per primitive (elementwise ALU, reduce, movement). `tgfn.numpy` builds the public
function surface from these, and the operator methods below call into it.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

import numpy as np

from tgfn import helpers
from tgfn.device import Buffer, Device
from tgfn.dtype import DType, dtypes, real_dtype, result_type, to_dtype
from tgfn.engine.realize import buffer_uop, realize, try_realize
from tgfn.uop.alu import float_to_bf16_bits
from tgfn.uop.ops import DeviceConflictError, GroupOp, Ops, UOp, device_of_sources, normalize_const
from tgfn.viz.locations import at_user_line

Scalar = Union[bool, int, float]
ArrayLike = Union["Array", np.ndarray, Scalar, Sequence]
# devices whose launches finish before they return (no synchronize): block_until_ready has nothing to wait
# for there, and skips the device lookup (a device's synchronize is fixed when it is made)
_SYNCHRONOUS_DEVICES: set[str] = set()


def _bf16_bits(values: np.ndarray) -> np.ndarray:
  """Round float32 values to bfloat16 (ties to even) and return the 16-bit patterns."""
  # (ascontiguousarray makes 0-d input 1-d: reshape keeps the input's shape)
  bits = np.ascontiguousarray(values, np.float32).reshape(np.shape(values)).view(np.uint32).astype(np.uint64)
  rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
  return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def _host_dtype_for(data: Any) -> DType:
  """JAX's defaults for Python data: float lists are float32, int lists int32; NumPy arrays keep theirs."""
  if isinstance(data, (np.ndarray, np.generic)):
    if data.dtype.name == "bfloat16": return dtypes.bfloat16  # ml_dtypes
    return to_dtype(data.dtype)
  arr = np.asarray(data)
  if arr.dtype.kind == "f": return dtypes.default_float
  if arr.dtype.kind in "iu":
    if arr.size and (arr.min() < dtypes.int32.min or arr.max() > dtypes.int32.max): return dtypes.int64
    return dtypes.default_int
  if arr.dtype.kind == "b": return dtypes.bool
  if arr.dtype.kind == "c": return dtypes.default_complex
  raise TypeError(f"cannot make an array from {type(data).__name__} data of NumPy dtype {arr.dtype}")


def _check_scalar_fits(value: Scalar, dtype: DType) -> None:
  if isinstance(value, int) and not isinstance(value, bool) and dtype.is_int and not dtype.min <= value <= dtype.max:
    raise OverflowError(f"Python int {value} does not fit in {dtype.name} (range {dtype.min}..{dtype.max}); "
                        f"cast the array first, e.g. x.astype(tnp.int64)")


class Array:
  """An immutable n-dimensional array. Build with `tgfn.numpy` functions (`tnp.array`, `tnp.zeros`...)."""
  __array_priority__ = 100  # NumPy defers to our operators: np_array + Array gives an Array

  def __init__(self, uop: UOp):
    self.uop = uop
    # where the value lives, decided now: a conflict names the user's line (and a long chain never recurses)
    try:
      uop.device, uop.committed  # noqa: B018
    except DeviceConflictError as e:
      raise DeviceConflictError(f"{e}{at_user_line()}") from None
    # the user's line that built it (tgfn/viz/locations.py); a BUFFER computes nothing, a located node is done
    if helpers.locator is not None and uop.op is not Ops.BUFFER and "_user_line" not in uop.__dict__: helpers.locator(uop)

  # ---- construction
  @staticmethod
  def from_data(data: Any, dtype: Optional[Any] = None, device: Optional[str] = None) -> Array:
    if isinstance(data, Array):  # (a traced Python scalar converts as the scalar itself would)
      out = as_array(data, None if dtype is None else to_dtype(dtype))
      return out if device is None else device_put(out, device)
    if holds_arrays(data):  # built inside the graph, so a traced element keeps its gradient and batch axis
      out = _from_nested(data, dtype)
      return out if device is None else device_put(out, device)
    dt = to_dtype(dtype) if dtype is not None else _host_dtype_for(data)
    host = np.asarray(data)
    if host.dtype == object: raise TypeError(f"cannot make an array from {data!r}: ragged or non-numeric data")
    if dt is dtypes.bfloat16: host = host.view(np.uint16) if host.dtype.name == "bfloat16" else _bf16_bits(host)
    else: host = host.astype(dt.np, copy=False)
    buf = Buffer(Device.canonicalize(device or Device.DEFAULT), host.size, dt).copyin(host)
    return Array(buffer_uop(buf, host.shape, committed=device is not None))

  @staticmethod
  def const(value: Scalar, dtype: DType, shape: tuple[int, ...] = ()) -> Array:
    _check_scalar_fits(value, dtype)
    out = Array(UOp(Ops.CONST, dtype, (), normalize_const(value, dtype)))
    return out._broadcast_to(tuple(shape)) if shape else out

  # ---- properties
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def size(self) -> int: return math.prod(self.shape)
  @property
  def device(self) -> str: return self.uop.device or Device.DEFAULT
  @property
  def sharding(self) -> Any:
    from tgfn.sharding.named import SingleDeviceSharding
    return SingleDeviceSharding(self.device)
  @property
  def addressable_shards(self) -> list:
    from tgfn.sharding.named import Shard
    return [Shard(self.device, tuple(slice(0, n) for n in self.shape), self)]
  @property
  def T(self) -> Array: return self.transpose()
  @property
  def mT(self) -> Array: return _np().matrix_transpose(self)

  # the array API standard's hooks
  def __array_namespace__(self, *, api_version: Optional[str] = None) -> Any:
    if api_version not in (None, "2024.12", "2023.12", "2022.12", "2021.12"):
      raise ValueError(f"tgfn.numpy implements the array API 2024.12, not {api_version!r}")
    return _np()
  def to_device(self, device: Any, /, *, stream: Any = None) -> Array: return device_put(self, device)
  # DLPack exports a host copy of the value (NumPy's capsule), so the exporting device is always the CPU
  def __dlpack__(self, *, stream: Any = None, max_version: Optional[tuple[int, int]] = None,
                 dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
    return self.numpy("x.__dlpack__()").__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                                                    copy=copy)
  def __dlpack_device__(self) -> tuple[int, int]: return (1, 0)   # (kDLCPU, 0)
  @property
  def at(self) -> Any:
    from tgfn.ops.indexing import _IndexUpdateHelper
    return _IndexUpdateHelper(self)

  # ---- observation: realizes the graph
  def realize(self) -> Array:
    """Compute the value now. A plain graph is replaced by the buffer holding its value; a graph
    traced inside grad/jvp keeps its form (the transform still needs it) and its value is cached."""
    self._value()
    return self

  def _value(self, what: str = "this operation") -> UOp:
    """The BUFFER node holding this array's value, computing it if needed."""
    if self.uop.op is Ops.BUFFER: return self.uop
    if (values := try_realize([self.uop])) is None:  # traced: placeholders to bind, or an abstract value
      from tgfn.transforms.trace import concretize
      concrete = concretize(self.uop, what)
      return realize([concrete])[0]
    self.uop = values[0]
    return self.uop

  def block_until_ready(self) -> Array:
    """Compute the value and wait until it is in memory: on an asynchronous device (OPENCL, CUDA,
    WEBGPU) a realized buffer may still be waiting for queued kernels, so the driver synchronizes."""
    if (u := self.uop).op is not Ops.BUFFER: u = self._value()  # (realize's work, one call less when computed)
    if u.op is Ops.BUFFER and (name := u.arg[1]) not in _SYNCHRONOUS_DEVICES:
      if (synchronize := Device[name].synchronize) is None: _SYNCHRONOUS_DEVICES.add(name)
      else: synchronize()
    return self

  @staticmethod
  def realize_all(arrays: Sequence[Array]) -> None:
    """Compute several arrays with one schedule: values of one shape that feed one another or read the
    same data then share a kernel (an optimizer's state and parameter in one pass over memory)."""
    from tgfn.transforms.trace import concretize
    todo = [a for a in arrays if a.uop.op is not Ops.BUFFER]
    concrete = [concretize(a.uop, "this operation") for a in todo]
    for a, c, value in zip(todo, concrete, realize(concrete)):
      if c is a.uop: a.uop = value

  def numpy(self, _what: str = "numpy()") -> np.ndarray:
    host = self._value(_what).buffer.numpy().reshape(self.shape)
    if self.dtype is dtypes.bfloat16:
      try:
        import ml_dtypes
        return host.view(ml_dtypes.bfloat16)
      except ImportError:  # without ml_dtypes, bfloat16 values come back widened to float32
        return np.asarray(host.astype(np.uint32) << 16).view(np.float32)  # asarray: 0-d stays an array
    return host

  def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
    out = self.numpy("np.asarray(x)")
    return out if dtype is None else out.astype(dtype)

  def item(self, _what: str = "item()") -> Scalar:
    if self.size != 1: raise ValueError(f"{_what} needs an array with one element, got shape {self.shape}{at_user_line()}")
    return self.numpy(_what).reshape(()).item()

  def tolist(self) -> Any: return self.numpy().tolist()
  def __float__(self) -> float: return float(self.item("float(x)"))
  def __int__(self) -> int: return int(self.item("int(x)"))
  def __complex__(self) -> complex: return complex(self.item("complex(x)"))

  def __index__(self) -> int:
    if not self.dtype.is_int: raise TypeError(f"only integer arrays can be used as an index, got {self.dtype.name}{at_user_line()}")
    return int(self.item("using an array as an index"))

  def __bool__(self) -> bool:
    if self.size != 1:
      raise ValueError(f"the truth value of an array of shape {self.shape} is ambiguous; use .any() or .all(){at_user_line()}")
    return bool(self.item("bool(x) (e.g. `if x:`)"))

  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d array")
    return self.shape[0]

  def __iter__(self):
    if not self.shape: raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))

  def __repr__(self) -> str:
    from tgfn.transforms.trace import ConcretizationError
    try:
      body = np.array2string(self.numpy("repr(x)"), separator=", ", prefix="Array(")
    except ConcretizationError:
      return f"Traced<shape={self.shape}, dtype={self.dtype.name}>"
    return f"Array({body}, dtype={self.dtype.name})"

  def __str__(self) -> str:
    return repr(self) if self._is_traced() else str(self.numpy("str(x)"))

  def _repr_html_(self) -> Optional[str]:
    """Jupyter's view: shape, dtype, device and values (a traced value falls back to repr)."""
    if self._is_traced(): return None
    from tgfn.viz.notebook import array_html
    return array_html(self)

  def _is_traced(self) -> bool:
    from tgfn.transforms.trace import is_abstract
    return is_abstract(self.uop)
  __hash__ = None  # type: ignore[assignment]  # arrays are values compared elementwise, like NumPy's

  # ---- primitive builders (used by tgfn.numpy and friends)
  def _alu(self, op: Ops, *others: Array, dtype: Optional[DType] = None) -> Array:
    out_dtype = dtype or (dtypes.bool if op in GroupOp.Comparison else (others[-1] if op is Ops.WHERE else self).dtype)
    return Array(UOp(op, out_dtype, (self.uop,) + tuple(o.uop for o in others)))

  def astype(self, dtype: Any) -> Array:
    dt = to_dtype(dtype)
    return self if dt == self.dtype else Array(UOp(Ops.CAST, dt, (self.uop,)))

  def _reduce(self, op: Ops, axes: tuple[int, ...]) -> Array:
    """Reduce over `axes` (normalized, non-negative), keeping them as size-1 axes."""
    if not axes: return self
    return Array(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, tuple(sorted(axes)))))

  def _movement(self, op: Ops, arg: Any) -> Array: return Array(UOp(op, self.dtype, (self.uop,), arg))

  def _gather(self, index: Array, axis: int) -> Array:
    """The GATHER primitive: `out[..., i, ...] = self[..., index[..., i, ...], ...]` along `axis`, each index
    clamped into the axis. `index` (integer) has self's shape except along `axis` and where self has size 1
    (broadcast); the result has its shape."""
    if not index.dtype.is_int or index.dtype is dtypes.uint64:  # int64 holds every value of the others
      raise TypeError(f"gather indices must be integers other than uint64, got {index.dtype.name}")
    if index.ndim != self.ndim or any(a != b and b != 1 for k, (a, b) in enumerate(zip(index.shape, self.shape)) if k != axis):
      raise ValueError(f"gather along axis {axis}: indices of shape {index.shape} must match the array's shape "
                       f"{self.shape} except along that axis and where the array has size 1{at_user_line()}")
    if self.shape[axis] == 0 and index.size:
      raise IndexError(f"cannot gather from axis {axis} of size 0 (indices of shape {index.shape})")
    return Array(UOp(Ops.GATHER, self.dtype, (self.uop, index.uop), axis))

  def _scatter(self, positions: Array, updates: Array, op: Optional[Ops]) -> Array:
    """The SCATTER primitive: self with, update by update in order, `out.flat[p] = out.flat[p] <op> u` (or
    `= u` when op is None, so the last of repeated positions wins); positions outside [0, self.size) are
    dropped. `positions` (integer) and `updates` (self's dtype) have one shape."""
    if not positions.dtype.is_int or positions.dtype is dtypes.uint64:
      raise TypeError(f"scatter positions must be integers other than uint64, got {positions.dtype.name}")
    if positions.shape != updates.shape:
      raise ValueError(f"scatter: positions of shape {positions.shape} but updates of shape {updates.shape}{at_user_line()}")
    return Array(UOp(Ops.SCATTER, self.dtype, (self.uop, positions.uop, updates.astype(self.dtype).uop), op))

  def _reshape(self, shape: tuple[int, ...]) -> Array:
    return self if shape == self.shape else self._movement(Ops.RESHAPE, tuple(shape))

  def _permute(self, order: tuple[int, ...]) -> Array:
    return self if order == tuple(range(self.ndim)) else self._movement(Ops.PERMUTE, tuple(order))

  def _broadcast_to(self, shape: tuple[int, ...]) -> Array:
    shape = tuple(shape)
    if shape == self.shape: return self
    if len(shape) < self.ndim: raise ValueError(f"cannot broadcast shape {self.shape} to {shape}: too few axes{at_user_line()}")
    padded = (1,) * (len(shape) - self.ndim) + self.shape
    for have, want in zip(padded, shape):
      if have != want and have != 1:
        raise ValueError(f"cannot broadcast shape {self.shape} to {shape}: axis of size {have} vs {want}{at_user_line()}")
    x = self._reshape(padded)
    return x if padded == shape else x._movement(Ops.EXPAND, shape)

  def _pad(self, widths: tuple[tuple[int, int], ...]) -> Array:
    if all(lo == 0 and hi == 0 for lo, hi in widths): return self
    return self._movement(Ops.PAD, tuple((int(lo), int(hi)) for lo, hi in widths))

  def _shrink(self, bounds: tuple[tuple[int, int], ...]) -> Array:
    if all(s == 0 and e == n for (s, e), n in zip(bounds, self.shape)): return self
    return self._movement(Ops.SHRINK, tuple((int(s), int(e)) for s, e in bounds))

  def _flip(self, axes: tuple[int, ...]) -> Array:
    axes = tuple(sorted(a for a in axes if self.shape[a] > 1))
    return self._movement(Ops.FLIP, axes) if axes else self

  # ---- operators (the math lives in tgfn.numpy; a list or tuple operand is refused: _refuse_sequences)
  def __add__(self, o: Any) -> Array: return _np().add(self, o)
  def __radd__(self, o: Any) -> Array: return _np().add(o, self)
  def __sub__(self, o: Any) -> Array: return _np().subtract(self, o)
  def __rsub__(self, o: Any) -> Array: return _np().subtract(o, self)
  def __mul__(self, o: Any) -> Array: return _np().multiply(self, o)
  def __rmul__(self, o: Any) -> Array: return _np().multiply(o, self)
  def __truediv__(self, o: Any) -> Array: return _np().divide(self, o)
  def __rtruediv__(self, o: Any) -> Array: return _np().divide(o, self)
  def __floordiv__(self, o: Any) -> Array: return _np().floor_divide(self, o)
  def __rfloordiv__(self, o: Any) -> Array: return _np().floor_divide(o, self)
  def __mod__(self, o: Any) -> Array: return _np().mod(self, o)
  def __rmod__(self, o: Any) -> Array: return _np().mod(o, self)
  def __pow__(self, o: Any) -> Array: return _np().power(self, o)
  def __rpow__(self, o: Any) -> Array: return _np().power(o, self)
  def __matmul__(self, o: Any) -> Array: return _np().matmul(self, o)
  def __rmatmul__(self, o: Any) -> Array: return _np().matmul(o, self)
  def __neg__(self) -> Array: return _np().negative(self)
  def __pos__(self) -> Array: return self
  def __abs__(self) -> Array: return _np().abs(self)
  def __invert__(self) -> Array: return _np().invert(self)
  def __and__(self, o: Any) -> Array: return _np().bitwise_and(self, o)
  def __rand__(self, o: Any) -> Array: return _np().bitwise_and(o, self)
  def __or__(self, o: Any) -> Array: return _np().bitwise_or(self, o)
  def __ror__(self, o: Any) -> Array: return _np().bitwise_or(o, self)
  def __xor__(self, o: Any) -> Array: return _np().bitwise_xor(self, o)
  def __rxor__(self, o: Any) -> Array: return _np().bitwise_xor(o, self)
  def __lshift__(self, o: Any) -> Array: return _np().left_shift(self, o)
  def __rlshift__(self, o: Any) -> Array: return _np().left_shift(o, self)
  def __rshift__(self, o: Any) -> Array: return _np().right_shift(self, o)
  def __rrshift__(self, o: Any) -> Array: return _np().right_shift(o, self)
  def __lt__(self, o: Any) -> Array: return _np().less(self, o)
  def __le__(self, o: Any) -> Array: return _np().less_equal(self, o)
  def __gt__(self, o: Any) -> Array: return _np().greater(self, o)
  def __ge__(self, o: Any) -> Array: return _np().greater_equal(self, o)
  def __eq__(self, o: Any) -> Array: return _np().equal(self, o)  # type: ignore[override]
  def __ne__(self, o: Any) -> Array: return _np().not_equal(self, o)  # type: ignore[override]
  def __getitem__(self, idx: Any) -> Array:
    from tgfn.ops.indexing import getitem
    return getitem(self, idx)

  def __setitem__(self, idx: Any, value: Any) -> None:
    where = _index_text(idx)
    raise TypeError(f"tgfn Arrays are immutable and do not support item assignment. Instead of "
                    f"x[{where}] = y, use x = x.at[{where}].set(y) (or .add, .multiply, .min, .max)")

  # ---- NumPy-style methods
  def reshape(self, *shape: Any, order: str = "C") -> Array:
    return _np().reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape, order)
  def transpose(self, *axes: Any) -> Array:
    return _np().transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else (axes or None))
  def flatten(self) -> Array: return self.reshape(-1)
  def ravel(self) -> Array: return self.reshape(-1)
  def squeeze(self, axis: Any = None) -> Array: return _np().squeeze(self, axis)
  def swapaxes(self, a: int, b: int) -> Array: return _np().swapaxes(self, a, b)
  def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
    return _np().sum(self, axis, dtype=dtype, keepdims=keepdims)
  def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
    return _np().prod(self, axis, dtype=dtype, keepdims=keepdims)
  def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Array:
    return _np().mean(self, axis, dtype=dtype, keepdims=keepdims)
  def max(self, axis: Any = None, keepdims: bool = False) -> Array: return _np().max(self, axis, keepdims=keepdims)
  def min(self, axis: Any = None, keepdims: bool = False) -> Array: return _np().min(self, axis, keepdims=keepdims)
  def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Array:
    return _np().var(self, axis, ddof=ddof, keepdims=keepdims)
  def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Array:
    return _np().std(self, axis, ddof=ddof, keepdims=keepdims)
  def argmax(self, axis: Any = None, keepdims: bool = False) -> Array: return _np().argmax(self, axis, keepdims=keepdims)
  def argmin(self, axis: Any = None, keepdims: bool = False) -> Array: return _np().argmin(self, axis, keepdims=keepdims)
  def any(self, axis: Any = None, keepdims: bool = False) -> Array: return _np().any(self, axis, keepdims=keepdims)
  def all(self, axis: Any = None, keepdims: bool = False) -> Array: return _np().all(self, axis, keepdims=keepdims)
  def cumsum(self, axis: Any = None, dtype: Any = None) -> Array: return _np().cumsum(self, axis, dtype=dtype)
  def clip(self, min: Any = None, max: Any = None) -> Array: return _np().clip(self, min, max)
  def round(self, decimals: int = 0) -> Array: return _np().round(self, decimals)
  def dot(self, other: Any) -> Array: return _np().dot(self, other)
  def conj(self) -> Array: return _np().conj(self)
  def conjugate(self) -> Array: return _np().conj(self)
  @property
  def real(self) -> Array: return _np().real(self)
  @property
  def imag(self) -> Array: return _np().imag(self)


# A list or tuple next to an Array in an operator is a TypeError, as in JAX: it is most often a pytree
# of separate values (grad's list argument, a tuple of parameters) used as if it were an array, and
# `tnp.asarray(...)` says it when an array is meant.
_OPERATOR_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
                     "pow": "**", "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_COMPARISON_SYMBOLS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _refuse_sequences(method: Any, symbol: str, reflected: bool) -> Any:
  def operator(self: Array, o: Any) -> Array:
    if isinstance(o, (list, tuple)):
      left, right = (type(o).__name__, "Array") if reflected else ("Array", type(o).__name__)
      raise TypeError(f"unsupported operand type(s) for {symbol}: '{left}' and '{right}'; make the "
                      f"{type(o).__name__} an array first with tnp.asarray(...){at_user_line()}")
    return method(self, o)
  operator.__name__, operator.__qualname__ = method.__name__, method.__qualname__
  return operator


for _name, _symbol in _OPERATOR_SYMBOLS.items():
  for _dunder, _reflected in ((f"__{_name}__", False), (f"__r{_name}__", True)):
    setattr(Array, _dunder, _refuse_sequences(getattr(Array, _dunder), _symbol, _reflected))
for _name, _symbol in _COMPARISON_SYMBOLS.items():
  setattr(Array, f"__{_name}__", _refuse_sequences(getattr(Array, f"__{_name}__"), _symbol, False))


def _np() -> Any:
  import tgfn.numpy
  return tgfn.numpy


def _index_text(idx: Any) -> str:
  """An index as the user wrote it inside brackets, for messages: 0, 1:3, ..., (else 'idx')."""
  def one(i: Any) -> str:
    if i is None or i is Ellipsis: return "None" if i is None else "..."
    if isinstance(i, slice):
      text = ":".join("" if v is None else str(v) for v in (i.start, i.stop))
      return text + (f":{i.step}" if i.step is not None else "")
    return str(i) if isinstance(i, (int, np.integer)) else "idx"
  parts = [one(i) for i in (idx if isinstance(idx, tuple) else (idx,))]
  return "idx" if "idx" in parts else ", ".join(parts)


# ---- broadcasting and promotion, shared by every op that takes several arrays
def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  ndim = max((len(s) for s in shapes), default=0)
  out = []
  for axis in range(ndim):
    sizes = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0} - {1}
    if len(sizes) > 1:
      raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together "
                       f"(axis {axis - ndim} has sizes {sorted(sizes)}){at_user_line()}")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


def _weak_scalar(x: Any) -> Optional[Scalar]:
  """Python scalars, and NumPy scalars like np.pi * 2 or np.float64(1), are weakly typed: they take
  the dtype of the array they meet (so `float32_array * np.sqrt(2)` stays float32)."""
  if isinstance(x, np.generic) and x.dtype.kind in "biufc": return x.item()
  if isinstance(x, (bool, int, float, complex)): return x
  return None


class TracedScalar(Array):
  """A Python scalar argument of a jitted function while it is traced: its value is abstract, its type
  weak, as in eager code. Where eager code would make the constant `Array.const(value, dtype)` (an
  operation with an array, `tnp.asarray(s, dtype)`), this gives a placeholder of that dtype, which jit
  fills from the Python value on every call with the same conversion and range check as the constant.
  Used on its own (`s * 2`, `tnp.sin(s)`), it is the scalar's default dtype (int32 or float32)."""

  def __init__(self, uop: UOp, kind: type, materialize: Any):
    super().__init__(uop)
    self.kind = kind                  # int or float: the weak type (a node of the promotion lattice)
    self._materialize = materialize   # DType -> UOp placeholder of that dtype, recorded by the trace

  def as_dtype(self, dtype: DType) -> Array:
    return Array(self.uop if dtype is self.dtype else self._materialize(dtype))


def _promotion_type(x: Any) -> Any:
  """What `x` contributes to `result_type`: a weak scalar (or its type) or an array's dtype."""
  if isinstance(x, (bool, int, float, complex)): return x
  if type(x) is TracedScalar: return x.kind
  return _array_dtype(x)


def as_array(x: Any, dtype: Optional[DType] = None) -> Array:
  """An Array from an Array (cast to `dtype` if given), a scalar (a constant) or array data."""
  if type(x) is TracedScalar: return Array(x.uop) if dtype is None else x.as_dtype(dtype)  # as the scalar would
  if isinstance(x, Array): return x if dtype is None else x.astype(dtype)
  if (scalar := _weak_scalar(x)) is not None:
    dt = dtype if dtype is not None else result_type(scalar)
    _check_scalar_fits(scalar, dt)
    if dt.is_complex: return _complex_scalar(scalar, dt)
    # a kernel argument, not a constant baked into the kernel: a loop over values compiles one kernel
    return Array(UOp.param(dt, scalar))
  return Array.from_data(x, dtype)


def promote(*xs: Any, dtype: Optional[DType] = None) -> list[Array]:
  """Cast `xs` to their common dtype (JAX promotion, scalars weak) and broadcast them together."""
  if len(xs) == 2 and dtype is None and (fast := _promote_array_scalar(*xs)) is not None: return fast
  xs = tuple(s if (s := _weak_scalar(x)) is not None else x for x in xs)
  common = dtype or result_type(*[_promotion_type(x) for x in xs])
  arrays = [as_array(x, common) for x in xs]
  check_devices(arrays)
  shape = broadcast_shapes(*[a.shape for a in arrays])
  return [a._broadcast_to(shape) for a in arrays]


_PY_SCALARS = (bool, int, float)
_scalar_result: dict[tuple[DType, type], DType] = {}  # (array dtype, Python scalar type) -> result dtype


def _promote_array_scalar(a: Any, b: Any) -> Optional[list[Array]]:
  """`promote` for the common eager case, an Array and a Python scalar (either order), without the
  general machinery; None for anything else."""
  if type(a) is Array and type(b) in _PY_SCALARS: arr, scalar, array_first = a, b, True
  elif type(b) is Array and type(a) in _PY_SCALARS: arr, scalar, array_first = b, a, False
  else: return None
  key = (arr.uop.dtype, type(scalar))
  if (common := _scalar_result.get(key)) is None: common = _scalar_result[key] = result_type(arr.uop.dtype, scalar)
  if common.is_complex: return None
  if common is not arr.uop.dtype: arr = arr.astype(common)
  arr.uop.device  # noqa: B018  (computed now, node by node: on a chain thousands deep it would recurse later)
  out = Array(_broadcast_scalar(scalar, common, arr.uop.shape))
  return [arr, out] if array_first else [out, arr]


# The broadcast PARAM nodes of recent Python scalars, per (dtype, scalar, shape), for small shapes: an eager
# loop doing `x * 2 + 1` builds no new nodes for its scalars. Each is three nodes whose hash-consing misses
# once the last graph using them has died: 24 -> 16 us for that expression on 16 floats. A node here may be
# realized (tnp.broadcast_arrays(x, 2) returns it); SCALAR_NODE_MAX_SIZE bounds what that can keep alive.
_scalar_nodes: dict[tuple, UOp] = {}
SCALAR_NODES = 256
SCALAR_NODE_MAX_SIZE = 4096


def _broadcast_scalar(scalar: Union[bool, int, float], dtype: DType, shape: tuple[int, ...]) -> UOp:
  """A PARAM holding `scalar` as `dtype`, broadcast to `shape` as _broadcast_to would (to rank len(shape),
  then to shape)."""
  # -0.0 == 0.0 and True == 1 == 1.0: the key tells them apart; NaN (never equal) is not kept
  key = (dtype, type(scalar), scalar, math.copysign(1.0, scalar) if type(scalar) is float else None, shape)
  if (hit := _scalar_nodes.get(key)) is not None: return hit
  _check_scalar_fits(scalar, dtype)
  out = UOp.param(dtype, scalar)
  if shape:
    out = UOp(Ops.RESHAPE, dtype, (out,), (1,) * len(shape))
    if any(n != 1 for n in shape): out = UOp(Ops.EXPAND, dtype, (out,), shape)
  if scalar == scalar and math.prod(shape) <= SCALAR_NODE_MAX_SIZE:
    if len(_scalar_nodes) >= SCALAR_NODES: _scalar_nodes.clear()  # (atomic: threads may share it)
    _scalar_nodes[key] = out
  return out


def _complex_scalar(value: complex, dtype: DType) -> Array:
  """A scalar of complex dtype. Kernels take no complex arguments (tgfn/codegen/complex_lower.py): a real
  value is a real argument cast to complex, a complex one a constant."""
  if isinstance(value, complex) and (value.imag != 0 or math.copysign(1.0, value.imag) < 0): return Array.const(value, dtype)
  return Array(UOp.param(real_dtype(dtype), value.real if isinstance(value, complex) else value)).astype(dtype)


def check_devices(arrays: Sequence[Array]) -> None:
  """Raise if `arrays` are committed to different devices (UOp.committed): they cannot meet in one op."""
  try:
    device_of_sources(tuple(a.uop for a in arrays))
  except DeviceConflictError as e:
    raise DeviceConflictError(f"{e}{at_user_line()}") from None


def holds_arrays(data: Any) -> bool:
  """True when `data` is a list or tuple with an Array somewhere inside (looked up by element type, so a
  long list of numbers costs little next to converting it)."""
  if not isinstance(data, (list, tuple)): return False
  kinds = set(map(type, data))
  if any(issubclass(k, Array) for k in kinds): return True
  return any(issubclass(k, (list, tuple)) for k in kinds) and any(holds_arrays(v) for v in data)


def _from_nested(data: Any, dtype: Optional[Any]) -> Array:
  """The array of nested lists/tuples that hold Arrays (traced or not) among numbers and NumPy data, built
  in the graph as jnp.array does: every leaf cast to `dtype` (default: the leaves' JAX-promoted dtype,
  Python and NumPy scalars weak), then stacked level by level."""
  promoted = _nested_dtype(data)  # (also checks that every level nests evenly)
  return _stack_nested(data, promoted if dtype is None else to_dtype(dtype))


def _nested_dtype(data: Any) -> DType:
  leaves = _nested_leaves(data, "data", [])
  return result_type(*[_promotion_type(s if (s := _weak_scalar(v)) is not None else v) for v in leaves])


def _nested_leaves(data: Any, where: str, leaves: list) -> list:
  """The leaves of `data` in order, after checking that every level nests evenly (a rectangular shape)."""
  if not isinstance(data, (list, tuple)):
    leaves.append(data)
    return leaves
  shapes = [data_shape(v) for v in data]
  if (bad := next((i for i, s in enumerate(shapes) if s != shapes[0]), None)) is not None:
    raise ValueError(f"cannot make an array from nested sequences of uneven shape: {where}[0] has shape "
                     f"{shapes[0]} but {where}[{bad}] has shape {shapes[bad]}{at_user_line()}")
  for i, v in enumerate(data): _nested_leaves(v, f"{where}[{i}]", leaves)
  return leaves


def data_shape(data: Any) -> tuple[int, ...]:
  """The shape `data` (an Array, or array data that may hold Arrays) has as an array, read without
  computing anything (np.shape would read a traced element's value)."""
  if isinstance(data, Array): return data.shape
  if isinstance(data, (list, tuple)): return (len(data),) + (data_shape(data[0]) if data else ())
  return np.shape(data)


def _stack_nested(data: Any, dtype: DType) -> Array:
  if not isinstance(data, (list, tuple)): return as_array(data, dtype)
  if not data: return Array.const(0, dtype, (0,))
  return _np().stack([_stack_nested(v, dtype) for v in data])


def _array_dtype(x: Any) -> DType:
  if isinstance(x, Array): return x.dtype
  return _nested_dtype(x) if holds_arrays(x) else _host_dtype_for(x)


def device_put(x: Any, device: Optional[str] = None) -> Array:
  """`x` on `device`, committed to it (UOp.committed: operations with it run there); without a device, on the
  default device, committed only if `x` was. Or laid out by a NamedSharding over its mesh.
  Between instances of a backend the copy is direct; between backends it goes through the host."""
  if hasattr(device, "mesh"):
    from tgfn.sharding.named import shard
    return shard(x, device)
  arr = x if isinstance(x, Array) else Array.from_data(x)
  target, commit, u = Device.canonicalize(device or Device.DEFAULT), device is not None, arr.uop
  if u.device == target:
    if u.committed or not commit: return arr
    # already there: pinned without a copy when it is a buffer
    if u.op is Ops.BUFFER: return Array(buffer_uop(u.buffer, u.shape, committed=True))
    return Array(UOp(Ops.COPY, u.dtype, (u,), target))
  if u.device is None:  # a constant-only graph belongs to no device yet: place its values on target
    return Array.from_data(arr.numpy(), arr.dtype, device)
  return Array(UOp(Ops.COPY, arr.dtype, (u,), target))
