"""Checkpoints: save and load any pytree of arrays (parameters, optimizer state) as a safetensors file.

A pytree's leaves get flat, readable names from their paths: `{"layers": [{"weight": w}]}` stores `w` as
"layers.0.weight" (dict keys, list/tuple indices, namedtuple fields, and whatever path entries a registered
class gives its children). `state_dict` and `load_state_dict` map between a tree and those names.

The file format is safetensors (https://huggingface.co/docs/safetensors), written and read here without the
`safetensors` package, which reads our files and writes files we read:

  8 bytes       N, the header's length, a little-endian uint64
  N bytes       a JSON object {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...},
                optionally with "__metadata__": {str: str}; padded with spaces
  the rest      the tensors' raw little-endian bytes; offsets count from the end of the header, and the
                tensors tile this region exactly: no gaps, no overlaps, nothing after the last one

Loading checks the whole header (and the tree given as `like`) before it builds any array, so a bad
file raises a ValueError naming the tensor and what was expected, and never yields a partly loaded tree.
"""
from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Union

import numpy as np
import optree

from tgfn import tree as tree_util
from tgfn.array import Array, as_array
from tgfn.device import Buffer, Device
from tgfn.dtype import DType, dtypes
from tgfn.engine.realize import buffer_uop

PathLike = Union[str, os.PathLike]

_CODES: dict[DType, str] = {
  dtypes.bool: "BOOL", dtypes.uint8: "U8", dtypes.int8: "I8", dtypes.uint16: "U16", dtypes.int16: "I16",
  dtypes.uint32: "U32", dtypes.int32: "I32", dtypes.uint64: "U64", dtypes.int64: "I64",
  dtypes.float16: "F16", dtypes.bfloat16: "BF16", dtypes.float32: "F32", dtypes.float64: "F64",
}
_DTYPES: dict[str, DType] = {code: dt for dt, code in _CODES.items()}
_METADATA = "__metadata__"
# the reference implementation's limit: a corrupted length field must not make us read gigabytes as JSON
_MAX_HEADER = 100_000_000


# ---- names
def _entry_key(entry: optree.PyTreeEntry) -> str:
  # A namedtuple's children are its fields, in order. Any other node's raw entry is used as it is; not
  # optree's DataclassEntry.field, which guesses from the declared field order and is wrong for a
  # dataclass registered with meta fields or reordered data fields.
  if isinstance(entry, optree.NamedTupleEntry): return entry.field
  return str(entry.entry)


def _named_leaves(tree: Any) -> tuple[list[str], list[Any], tree_util.PyTreeDef]:
  """The leaves of `tree`, their flat names, and its structure. Raises if two leaves share a name."""
  accessors, leaves, treedef = optree.tree_flatten_with_accessor(tree, none_is_leaf=False,
                                                                namespace=tree_util.NAMESPACE)
  if treedef.is_leaf():
    raise TypeError(f"expected a pytree of arrays (a dict, list, dataclass...), got a bare "
                    f"{type(tree).__name__}; wrap it, e.g. {{'x': x}}")
  names = [".".join(_entry_key(e) for e in acc) for acc in accessors]
  seen: dict[str, str] = {}
  for name, acc in zip(names, accessors):
    if name == _METADATA: raise ValueError(f"the leaf at {acc.codify('tree')} is named {_METADATA!r}, "
                                           f"which safetensors reserves for the file's metadata")
    if name in seen:
      raise ValueError(f"the leaves at {seen[name]} and {acc.codify('tree')} would both be named {name!r}; "
                       f"rename a key (names join path entries with '.')")
    seen[name] = acc.codify("tree")
  return names, leaves, treedef


def _describe(shape: tuple[int, ...], dtype: DType) -> str:
  return f"shape {tuple(shape)} and dtype {dtype.name}"


def state_dict(tree: Any) -> dict[str, Array]:
  """The leaves of `tree` as a flat dict {name: Array}, in the tree's leaf order. Names join the path
  entries with '.' ("layers.0.weight"); leaves that are not Arrays (NumPy arrays, Python scalars) are
  converted with tgfn's default dtypes. Raises ValueError if two leaves would get the same name."""
  names, leaves, _ = _named_leaves(tree)
  return {name: as_array(leaf) for name, leaf in zip(names, leaves)}


def load_state_dict(tree: Any, state: Mapping[str, Any], strict: bool = True) -> Any:
  """A new tree shaped like `tree` with each leaf replaced by `state[name]` (as in `state_dict`); `tree`
  itself is unchanged. Every replacement must have its leaf's shape and dtype. With `strict`, `state` must
  name exactly the leaves of `tree`; otherwise leaves it lacks keep their value and extra names are
  ignored. Raises ValueError, listing every problem, before building anything."""
  names, leaves, treedef = _named_leaves(tree)
  problems = _key_problems(names, state.keys()) if strict else []
  new = {name: as_array(state[name]) for name in names if name in state}
  for name, leaf in zip(names, leaves):
    if name not in new: continue
    want = as_array(leaf)
    if (new[name].shape, new[name].dtype) != (want.shape, want.dtype):
      problems.append(f"{name!r}: expected {_describe(want.shape, want.dtype)}, "
                      f"got {_describe(new[name].shape, new[name].dtype)}")
  if problems: raise ValueError("load_state_dict: " + "; ".join(problems))
  return treedef.unflatten(new.get(name, leaf) for name, leaf in zip(names, leaves))


def _key_problems(expected: list[str], found: Iterable[str]) -> list[str]:
  found, expected_set = list(found), set(expected)
  found_set = set(found)
  missing = [n for n in expected if n not in found_set]
  unexpected = [n for n in found if n not in expected_set]
  return ([f"missing {missing}"] if missing else []) + ([f"unexpected {unexpected}"] if unexpected else [])


# ---- writing
def _le_bytes(a: Array) -> np.ndarray:
  """The array's contents as a flat little-endian NumPy array (bfloat16 as its uint16 bit patterns)."""
  host = a.numpy()
  if a.dtype is dtypes.bfloat16:
    # numpy() gives ml_dtypes.bfloat16, or without ml_dtypes float32 holding the value exactly (the bf16
    # bits in the high half): either way the bits come back unchanged, NaN payloads included
    widened = host.dtype.itemsize == 4
    host = (host.view(np.uint32) >> 16).astype(np.uint16) if widened else host.view(np.uint16)
  return np.ascontiguousarray(host, host.dtype.newbyteorder("<")).reshape(-1)


def _write_atomic(path: Path, chunks: Iterable[Any]) -> None:
  """Stream `chunks` into a hidden temporary file next to `path`, then rename it over `path`: readers see
  the old file or the whole new one, never a partial write."""
  tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
  # os.open with mode 0o666 lets the umask set the permissions, as for any new file (mkstemp forces 0o600)
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
  try:
    with os.fdopen(fd, "wb") as f:
      for chunk in chunks: f.write(chunk)
      f.flush()
      os.fsync(f.fileno())  # the data is on disk before the rename makes it the checkpoint
    os.replace(tmp, path)
  except BaseException:
    tmp.unlink(missing_ok=True)
    raise


def save(path: PathLike, tree: Any, metadata: Optional[Mapping[str, str]] = None) -> None:
  """Write the arrays of `tree` to `path` as a safetensors file, named as in `state_dict`, with the
  optional string-to-string `metadata` in the header. Realizes every array first; then writes atomically
  (a temporary file in the same folder, renamed over `path`), so a failure leaves any old file intact."""
  if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
    raise TypeError(f"metadata must map str to str, got {dict(metadata)!r}")
  arrays = state_dict(tree)
  data = {name: _le_bytes(a) for name, a in arrays.items()}
  # widest dtypes first, so every tensor starts at a multiple of its item size (the header is padded to 8)
  layout = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))
  offsets, pos = {}, 0
  for name in layout:
    offsets[name] = [pos, pos + data[name].nbytes]
    pos += data[name].nbytes
  header: dict[str, Any] = {} if metadata is None else {_METADATA: dict(metadata)}
  for name, a in arrays.items():
    header[name] = {"dtype": _CODES[a.dtype], "shape": list(a.shape), "data_offsets": offsets[name]}
  text = json.dumps(header, separators=(",", ":")).encode()
  text += b" " * (-len(text) % 8)
  _write_atomic(Path(path), [len(text).to_bytes(8, "little"), text, *(data[n] for n in layout)])


# ---- reading
class _TensorInfo:
  __slots__ = ("name", "dtype", "shape", "begin", "end")

  def __init__(self, name: str, dtype: DType, shape: tuple[int, ...], begin: int, end: int):
    self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, shape, begin, end


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  # json.loads would silently keep the last of two entries with one name
  seen: set[str] = set()
  for key, _ in pairs:
    if key in seen: raise ValueError(f"the header names {key!r} twice")
    seen.add(key)
  return dict(pairs)


def _is_uint(x: Any) -> bool: return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _parse_tensor(name: str, info: Any) -> _TensorInfo:
  where = f"tensor {name!r}"
  if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
    raise ValueError(f"{where}: expected an entry with keys dtype, shape, data_offsets, found {info!r}")
  code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
  if code not in _DTYPES: raise ValueError(f"{where}: dtype {code!r} is not one of {', '.join(_DTYPES)}")
  if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
    raise ValueError(f"{where}: shape must be a list of non-negative ints, found {shape!r}")
  if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_uint(o) for o in offsets)
          and offsets[0] <= offsets[1]):
    raise ValueError(f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, found {offsets!r}")
  dtype = _DTYPES[code]
  nbytes = math.prod(shape) * dtype.itemsize
  if offsets[1] - offsets[0] != nbytes:
    raise ValueError(f"{where}: shape {shape} of {code} needs {nbytes} bytes, "
                     f"but data_offsets {offsets} cover {offsets[1] - offsets[0]}")
  return _TensorInfo(name, dtype, tuple(shape), offsets[0], offsets[1])


def _read_header(f: Any, size: int) -> tuple[list[_TensorInfo], dict[str, str], int]:
  """Parse and check the header of the open file `f` of `size` bytes: the tensors (in header order), the
  metadata, and where the data starts. Checks that the tensors tile the data exactly."""
  if size < 8: raise ValueError(f"the file is {size} bytes long, too short for a safetensors file")
  n = int.from_bytes(f.read(8), "little")
  if not 2 <= n <= min(_MAX_HEADER, size - 8):
    raise ValueError(f"the header length field says {n} bytes, but the file holds {size - 8} bytes after it "
                     f"(truncated, or not a safetensors file)")
  try:
    header = json.loads(f.read(n).decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
  except UnicodeDecodeError as e: raise ValueError(f"the header is not UTF-8 text: {e}") from None
  except json.JSONDecodeError as e: raise ValueError(f"the header is not valid JSON: {e}") from None
  if not isinstance(header, dict):
    raise ValueError(f"the header must be a JSON object, found {type(header).__name__}")
  metadata = header.pop(_METADATA, {})
  if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
    raise ValueError(f"{_METADATA} must be an object of strings, found {metadata!r}")
  tensors = [_parse_tensor(name, info) for name, info in header.items()]
  data_len = size - 8 - n
  for t in tensors:
    if t.end > data_len:
      raise ValueError(f"tensor {t.name!r}: data_offsets [{t.begin}, {t.end}] run past the {data_len} "
                       f"bytes of data in the file (truncated?)")
  pos, prev = 0, None
  for t in sorted(tensors, key=lambda t: (t.begin, t.end)):
    if t.begin < pos: raise ValueError(f"tensor {t.name!r}: data_offsets [{t.begin}, {t.end}] overlap "
                                       f"tensor {prev.name!r} at [{prev.begin}, {prev.end}]")
    if t.begin > pos: raise ValueError(f"tensor {t.name!r}: data_offsets [{t.begin}, {t.end}] leave bytes "
                                       f"[{pos}, {t.begin}) of the data unused")
    pos, prev = t.end, t
  if pos != data_len: raise ValueError(f"{data_len - pos} bytes of data after the last tensor")
  return tensors, metadata, 8 + n


def _from_le_bytes(data: bytes, t: _TensorInfo) -> Array:
  raw = np.frombuffer(data, t.dtype.np.newbyteorder("<"), count=math.prod(t.shape), offset=t.begin)
  if t.dtype is dtypes.bool: raw = raw.view(np.uint8) != 0  # any nonzero byte is True, as in C
  host = raw.astype(t.dtype.np).reshape(t.shape)  # native byte order, and a copy that owns its memory
  if t.dtype is not dtypes.bfloat16: return Array.from_data(host, t.dtype)
  # Array.from_data takes bfloat16 *values* (rounding float32 input, NaNs made canonical); these are bit
  # patterns, so they go into the buffer as they are
  buf = Buffer(Device.DEFAULT, host.size, dtypes.bfloat16).copyin(host)
  return Array(buffer_uop(buf, t.shape))


def load(path: PathLike, like: Any = None) -> Any:
  """Read a safetensors file into Arrays on the default device.

  Without `like`: a dict {name: Array} in the file's header order. With `like`, a pytree of the same
  structure whose leaves (Arrays, or anything `tnp.asarray` takes) give the expected shapes and dtypes:
  the file must hold exactly the names `state_dict(like)` has, each with its leaf's shape and dtype, and
  the result is `like` with each leaf replaced by the loaded Array. A truncated or malformed file, or one
  that does not match `like`, raises ValueError naming the tensor; nothing is built until the whole
  header has been checked."""
  with open(path, "rb") as f:
    try:
      size = os.fstat(f.fileno()).st_size
      tensors, _, start = _read_header(f, size)
      if like is not None:
        names, leaves, treedef = _named_leaves(like)
        by_name = {t.name: t for t in tensors}
        problems = _key_problems(names, by_name)
        for name, leaf in zip(names, leaves):
          want, t = as_array(leaf), by_name.get(name)
          if t is not None and (t.shape, t.dtype) != (want.shape, want.dtype):
            problems.append(f"tensor {name!r}: expected {_describe(want.shape, want.dtype)} (from `like`), "
                            f"found {_describe(t.shape, t.dtype)}")
        if problems: raise ValueError("does not match `like`: " + "; ".join(problems))
      data = f.read()
      if len(data) != size - start: raise ValueError("the file changed while it was being read")
    except ValueError as e:
      raise ValueError(f"{os.fspath(path)}: {e}") from None
  arrays = {t.name: _from_le_bytes(data, t) for t in tensors}
  return arrays if like is None else treedef.unflatten(arrays[name] for name in names)


def read_metadata(path: PathLike) -> dict[str, str]:
  """The `__metadata__` of a safetensors file's header ({} if it has none), after checking the header."""
  with open(path, "rb") as f:
    try:
      return _read_header(f, os.fstat(f.fileno()).st_size)[1]
    except ValueError as e:
      raise ValueError(f"{os.fspath(path)}: {e}") from None
