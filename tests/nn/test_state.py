"""tgfn.nn.state: safetensors checkpoints of pytrees. Bit-exact round trips for every dtype (on each
device), names from pytree paths, `like` and `load_state_dict` checks, rejection of truncated and
corrupted files before any array is built, atomic writes, and interop with the `safetensors` package.

The files these tests build by hand, and read back byte by byte, use a small writer and reader of
their own, so the format is checked independently of the code under test."""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.dtype import ALL_DTYPES, DType, dtypes
from tgfn.nn import state

CODES = {dtypes.bool: "BOOL", dtypes.uint8: "U8", dtypes.int8: "I8", dtypes.uint16: "U16",
         dtypes.int16: "I16", dtypes.uint32: "U32", dtypes.int32: "I32", dtypes.uint64: "U64",
         dtypes.int64: "I64", dtypes.float16: "F16", dtypes.bfloat16: "BF16", dtypes.float32: "F32",
         dtypes.float64: "F64"}


# ---- an independent writer and reader of the format
def raw_text(header: str, data: bytes = b"") -> bytes:
  return len(header.encode()).to_bytes(8, "little") + header.encode() + data


def raw_file(header, data: bytes = b"") -> bytes: return raw_text(json.dumps(header), data)


def tensors_file(tensors: dict[str, tuple[DType, np.ndarray]]) -> bytes:
  """A safetensors file of host arrays (bfloat16 given as uint16 bits), laid out in the given order."""
  header, data = {}, b""
  for name, (dtype, host) in tensors.items():
    blob = np.ascontiguousarray(host, host.dtype.newbyteorder("<")).tobytes()
    offsets = [len(data), len(data) + len(blob)]
    header[name] = {"dtype": CODES[dtype], "shape": list(host.shape), "data_offsets": offsets}
    data += blob
  return raw_file(header, data)


def read_raw(path) -> tuple[dict, dict[str, bytes]]:
  """The header and each tensor's bytes, by name."""
  blob = open(path, "rb").read()
  n = int.from_bytes(blob[:8], "little")
  header = json.loads(blob[8:8 + n])
  data = blob[8 + n:]
  tensors = {k: v for k, v in header.items() if k != "__metadata__"}
  return header, {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in tensors.items()}


def random_bits(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
  """Arbitrary bit patterns of `dtype` (NaNs with payloads, infinities, subnormals, -0 for floats)."""
  if dtype is dtypes.bool: return rng.integers(0, 2, shape).astype(bool)
  return rng.integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8).view(dtype.np).reshape(shape)


def host_bits(a: tgfn.Array) -> bytes:
  """The array's contents as little-endian bytes (bfloat16 with or without ml_dtypes installed)."""
  host = a.numpy()
  if a.dtype is dtypes.bfloat16 and host.dtype.itemsize == 4:  # float32 holding the value: the high half
    host = (host.view(np.uint32) >> 16).astype(np.uint16)
  return np.ascontiguousarray(host).view(np.uint8).tobytes()


# ---- round trips
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_round_trip_is_bit_exact(dtype: DType, device: str, tmp_path) -> None:
  rng = np.random.default_rng(len(dtype.name))
  hosts = {"matrix": random_bits(dtype, (3, 5), rng), "scalar": random_bits(dtype, (), rng),
           "empty": random_bits(dtype, (0, 3), rng)}
  (tmp_path / "in.safetensors").write_bytes(tensors_file({k: (dtype, h) for k, h in hosts.items()}))
  loaded = state.load(tmp_path / "in.safetensors")
  assert list(loaded) == list(hosts)
  for name, host in hosts.items():
    assert loaded[name].dtype is dtype and loaded[name].shape == host.shape and loaded[name].device == device
    assert host_bits(loaded[name]) == host.tobytes(), name
  state.save(tmp_path / "out.safetensors", loaded)
  header, data = read_raw(tmp_path / "out.safetensors")
  assert data == {name: host.tobytes() for name, host in hosts.items()}
  assert {k: (v["dtype"], v["shape"]) for k, v in header.items()} == \
         {k: (CODES[dtype], list(h.shape)) for k, h in hosts.items()}


def test_bfloat16_bits_survive_without_ml_dtypes(tmp_path, monkeypatch) -> None:
  bits = np.array([0x7F81, 0xFFC1, 0x8000, 0x0001, 0x7F80, 0x3FC0], np.uint16)  # NaN payloads, -0, tiny, inf
  (tmp_path / "in.safetensors").write_bytes(tensors_file({"x": (dtypes.bfloat16, bits)}))
  monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # numpy() then widens bfloat16 to float32
  loaded = state.load(tmp_path / "in.safetensors")
  assert loaded["x"].numpy().dtype == np.float32
  state.save(tmp_path / "out.safetensors", loaded)
  assert read_raw(tmp_path / "out.safetensors")[1] == {"x": bits.tobytes()}


def test_any_nonzero_bool_byte_is_true(tmp_path) -> None:
  header = {"m": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}}
  (tmp_path / "m.safetensors").write_bytes(raw_file(header, bytes([0, 1, 2, 255])))
  assert state.load(tmp_path / "m.safetensors")["m"].tolist() == [False, True, True, True]


def test_save_of_computed_arrays_and_host_leaves(tmp_path) -> None:
  x = tnp.arange(6.0).reshape(2, 3)
  tree = {"y": x * 2 + 1, "h": np.arange(4, dtype=np.int16), "step": 7, "lr": 0.5}
  state.save(tmp_path / "m.safetensors", tree)
  loaded = state.load(tmp_path / "m.safetensors")
  np.testing.assert_array_equal(loaded["y"].numpy(), np.arange(6.0, dtype=np.float32).reshape(2, 3) * 2 + 1)
  assert loaded["h"].dtype is dtypes.int16
  assert (loaded["step"].dtype, loaded["step"].item()) == (dtypes.int32, 7)  # tgfn's defaults, as in JAX
  assert (loaded["lr"].dtype, loaded["lr"].item()) == (dtypes.float32, 0.5)


# ---- names and structure
Adam = collections.namedtuple("Adam", ["mu", "nu"])


@dataclasses.dataclass
class Optim:
  name: str
  count: tgfn.Array
  state: Adam


tgfn.tree.register_dataclass(Optim, meta_fields=["name"])


class Pair:
  def __init__(self, first, second): self.first, self.second = first, second


# a class whose flatten function names its children: those names are used
tgfn.tree.register_node(Pair, lambda p: ((p.first, p.second), None, ("first", "second")),
                        lambda _, children: Pair(*children))


def make_model(scale: float = 1.0) -> dict:
  # leaves from host data: nothing to compile, so the test stays fast
  def full(shape, value, dtype=np.float32): return tnp.asarray(np.full(shape, value, dtype))
  return {"layers": [{"weight": full((3, 2), scale), "bias": full(2, 0)}, (full(4, scale), None)],
          "norm": Adam(full(2, 2 * scale), tnp.asarray(np.float32(scale), tgfn.bfloat16)),
          "pair": Pair(tnp.asarray(np.arange(3, dtype=np.int32)), full(0, 0, np.uint8)),
          "opt": Optim("adam", tnp.array(3), Adam(full((2, 2), scale), full((2, 2), 0)))}


def test_state_dict_names_follow_paths() -> None:
  names = list(state.state_dict(make_model()))
  assert names[:3] == ["layers.0.bias", "layers.0.weight", "layers.1.0"]  # dict keys sorted, as in JAX
  assert "norm.mu" in names and "norm.nu" in names  # namedtuple fields
  assert "pair.first" in names and "pair.second" in names  # a registered class's path entries
  assert len(names) == len(set(names)) == len(tgfn.tree.leaves(make_model())) == 10
  assert names == list(state.state_dict(make_model(2.0)))  # stable: names depend on structure only


def test_nested_tree_round_trip_with_like(tmp_path) -> None:
  model = make_model(3.0)
  state.save(tmp_path / "m.safetensors", model)
  restored = state.load(tmp_path / "m.safetensors", like=make_model())
  assert tgfn.tree.structure(restored) == tgfn.tree.structure(model)
  assert isinstance(restored["opt"], Optim) and restored["opt"].name == "adam"
  assert isinstance(restored["norm"], Adam) and isinstance(restored["pair"], Pair)
  assert restored["layers"][1][1] is None
  for got, want in zip(tgfn.tree.leaves(restored), tgfn.tree.leaves(model)):
    assert isinstance(got, tgfn.Array) and (got.shape, got.dtype) == (want.shape, want.dtype)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_like_mismatches_are_named(tmp_path) -> None:
  state.save(tmp_path / "m.safetensors", {"w": tnp.zeros((2, 3)), "b": tnp.zeros(3)})
  path = str(tmp_path / "m.safetensors")
  with pytest.raises(ValueError, match=r"m\.safetensors.*tensor 'w': expected shape \(3, 2\) and dtype "
                                       r"float32 \(from `like`\), found shape \(2, 3\) and dtype float32"):
    state.load(path, like={"w": tnp.zeros((3, 2)), "b": tnp.zeros(3)})
  with pytest.raises(ValueError, match=r"tensor 'b': expected shape \(3,\) and dtype float16.*"
                                       r"found shape \(3,\) and dtype float32"):
    state.load(path, like={"w": tnp.zeros((2, 3)), "b": tnp.zeros(3, tgfn.float16)})
  with pytest.raises(ValueError, match=r"missing \['c'\].*unexpected \['b'\]"):
    state.load(path, like={"w": tnp.zeros((2, 3)), "c": tnp.zeros(3)})


def test_name_collisions_and_bare_leaves_are_rejected(tmp_path) -> None:
  with pytest.raises(ValueError, match="would both be named 'a.b'"):
    state.save(tmp_path / "m.safetensors", {"a.b": tnp.zeros(1), "a": {"b": tnp.zeros(1)}})
  with pytest.raises(ValueError, match="reserves"):
    state.state_dict({"__metadata__": tnp.zeros(1)})
  with pytest.raises(TypeError, match="wrap it"):
    state.save(tmp_path / "m.safetensors", tnp.zeros(1))
  assert os.listdir(tmp_path) == []


def test_load_state_dict_is_functional_and_strict() -> None:
  model = make_model()
  new_weight = tnp.full((3, 2), 5.0)
  sd = state.state_dict(model)
  updated = state.load_state_dict(model, {**sd, "layers.0.weight": new_weight})
  assert updated["layers"][0]["weight"] is new_weight and model["layers"][0]["weight"] is not new_weight
  assert isinstance(updated["opt"], Optim) and updated["opt"].name == "adam"
  partial = {"layers.0.weight": new_weight, "extra": tnp.zeros(1)}
  with pytest.raises(ValueError, match=r"missing \[.*'layers.0.bias'.*\].*unexpected \['extra'\]"):
    state.load_state_dict(model, partial)
  loose = state.load_state_dict(model, partial, strict=False)
  assert loose["layers"][0]["weight"] is new_weight
  assert loose["layers"][0]["bias"] is model["layers"][0]["bias"]
  with pytest.raises(ValueError, match=r"'layers.0.weight': expected shape \(3, 2\) and dtype float32, "
                                       r"got shape \(2, 3\) and dtype float32"):
    state.load_state_dict(model, {**sd, "layers.0.weight": tnp.zeros((2, 3))})


# ---- bad files: a clear error, and no array built
GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]}}


def _with(name: str, **changes) -> dict:
  return {**GOOD, name: {**GOOD[name], **changes}}


BAD_FILES = {
  "empty": (b"", "too short"),
  "header length past the end": ((10 ** 6).to_bytes(8, "little") + b"{}", "header length field says 1000000"),
  "not json": (b"\x05\x00\x00\x00\x00\x00\x00\x00{abc}", "not valid JSON"),
  "not utf-8": (b"\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe", "not UTF-8"),
  "not an object": (raw_file([1, 2]), "must be a JSON object"),
  "truncated data": (raw_file(GOOD, bytes(15)), r"tensor 'b': data_offsets \[8, 16\] run past the 15 bytes"),
  "offsets out of range": (raw_file(_with("b", data_offsets=[8, 24], shape=[2]), bytes(16)),
                           r"tensor 'b': data_offsets \[8, 24\] run past"),
  "overlap": (raw_file(_with("b", data_offsets=[4, 12]), bytes(16)), r"tensor 'b'.*overlap tensor 'a'"),
  "gap": (raw_file(_with("b", data_offsets=[12, 20]), bytes(20)),
          r"tensor 'b'.*bytes \[8, 12\) of the data unused"),
  "trailing bytes": (raw_file(GOOD, bytes(20)), "4 bytes of data after the last tensor"),
  "size vs shape": (raw_file(_with("a", shape=[3]), bytes(16)),
                    r"tensor 'a': shape \[3\] of F32 needs 12 bytes"),
  "unknown dtype": (raw_file(_with("a", dtype="C64"), bytes(16)), "tensor 'a': dtype 'C64' is not one of"),
  "negative dim": (raw_file(_with("a", shape=[-2]), bytes(16)), "tensor 'a': shape must be a list"),
  "reversed offsets": (raw_file(_with("a", data_offsets=[8, 0]), bytes(16)),
                       "tensor 'a': data_offsets must be"),
  "missing key": (raw_file({**GOOD, "a": {"dtype": "F32", "shape": [2]}}), "tensor 'a': expected an entry"),
  "bad metadata": (raw_file({**GOOD, "__metadata__": {"k": 1}}, bytes(16)), "__metadata__ must be"),
  "duplicate name": (raw_text('{"a": %s, "a": %s}' % ((json.dumps(GOOD["a"]),) * 2), bytes(8)),
                     "names 'a' twice"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_files_are_rejected_before_anything_is_built(case: str, tmp_path, monkeypatch) -> None:
  blob, message = BAD_FILES[case]
  path = tmp_path / "bad.safetensors"
  path.write_bytes(blob)
  built = []
  monkeypatch.setattr(state, "_from_le_bytes", lambda *args: built.append(args))
  with pytest.raises(ValueError, match=message) as info:
    state.load(path, like={"a": tnp.zeros(2), "b": tnp.zeros(1, tgfn.int64)})
  assert str(path) in str(info.value)
  with pytest.raises(ValueError, match=message):
    state.load(path)
  assert built == []


def test_the_good_file_of_the_bad_file_tests_loads(tmp_path) -> None:
  data = np.float32([1, 2]).tobytes() + np.int64([3]).tobytes()
  (tmp_path / "ok.safetensors").write_bytes(raw_file(GOOD, data))
  out = state.load(tmp_path / "ok.safetensors", like={"a": tnp.zeros(2), "b": tnp.zeros(1, tgfn.int64)})
  assert out["a"].tolist() == [1.0, 2.0] and out["b"].tolist() == [3]


def test_a_like_mismatch_builds_nothing(tmp_path, monkeypatch) -> None:
  state.save(tmp_path / "m.safetensors", {"a": tnp.zeros(2), "z": tnp.zeros(3)})  # 'a' matches, 'z' does not
  built = []
  monkeypatch.setattr(state, "_from_le_bytes", lambda *args: built.append(args))
  with pytest.raises(ValueError, match="tensor 'z'"):
    state.load(tmp_path / "m.safetensors", like={"a": tnp.zeros(2), "z": tnp.zeros(4)})
  assert built == []


# ---- atomic writes and metadata
def test_writes_are_atomic(tmp_path, monkeypatch) -> None:
  path = tmp_path / "m.safetensors"
  state.save(path, {"w": tnp.ones(3)}, metadata={"step": "1"})
  state.save(path, {"w": tnp.full(3, 2.0)}, metadata={"step": "2"})  # replaces the old file
  assert os.listdir(tmp_path) == ["m.safetensors"]
  assert state.read_metadata(path) == {"step": "2"}
  before = path.read_bytes()

  def fail(fd: int) -> None: raise OSError("disk full")
  monkeypatch.setattr(state.os, "fsync", fail)
  with pytest.raises(OSError, match="disk full"):
    state.save(path, {"w": tnp.zeros(5)})
  assert path.read_bytes() == before and os.listdir(tmp_path) == ["m.safetensors"]  # old file intact, no temp
  with pytest.raises(TypeError, match="metadata must map str to str"):
    state.save(path, {"w": tnp.zeros(1)}, metadata={"step": 3})


def test_header_layout(tmp_path) -> None:
  state.save(tmp_path / "m.safetensors", {"b": tnp.zeros(3, tgfn.uint8), "a": tnp.zeros(1, tgfn.float64)})
  blob = (tmp_path / "m.safetensors").read_bytes()
  n = int.from_bytes(blob[:8], "little")
  header = json.loads(blob[8:8 + n])
  assert n % 8 == 0 and "__metadata__" not in header
  assert header["a"]["data_offsets"] == [0, 8] and header["b"]["data_offsets"] == [8, 11]  # widest first
  assert state.read_metadata(tmp_path / "m.safetensors") == {}


# ---- the safetensors package
def test_safetensors_reads_our_files(tmp_path) -> None:
  safetensors = pytest.importorskip("safetensors")
  rng = np.random.default_rng(0)
  hosts = {dt: random_bits(dt, (2, 3), rng) for dt in ALL_DTYPES}
  (tmp_path / "in.safetensors").write_bytes(tensors_file({dt.name: (dt, h) for dt, h in hosts.items()}))
  tree = {"params": state.load(tmp_path / "in.safetensors"), "scalar": tnp.array(1.5),
          "empty": tnp.zeros((0, 2))}
  state.save(tmp_path / "ours.safetensors", tree, metadata={"format": "tgfn"})
  theirs = dict(safetensors.deserialize((tmp_path / "ours.safetensors").read_bytes()))
  for dt, host in hosts.items():
    entry = theirs[f"params.{dt.name}"]
    assert (entry["dtype"], entry["shape"], bytes(entry["data"])) == (CODES[dt], [2, 3], host.tobytes())
  assert theirs["scalar"]["shape"] == [] and theirs["empty"]["shape"] == [0, 2]
  with safetensors.safe_open(tmp_path / "ours.safetensors", framework="np") as f:
    assert f.metadata() == {"format": "tgfn"}
    np.testing.assert_array_equal(f.get_tensor("params.float32"), hosts[dtypes.float32])


def test_we_read_safetensors_files(tmp_path) -> None:
  st_numpy = pytest.importorskip("safetensors.numpy")
  rng = np.random.default_rng(1)
  arrays = {dt.name: random_bits(dt, (4,), rng) for dt in ALL_DTYPES if dt is not dtypes.bfloat16}
  arrays.update(scalar=np.array(2.5), empty=np.zeros((0, 3), np.int32))
  st_numpy.save_file(arrays, tmp_path / "theirs.safetensors", metadata={"who": "safetensors"})
  loaded = state.load(tmp_path / "theirs.safetensors")
  assert set(loaded) == set(arrays)
  for name, host in arrays.items():
    assert loaded[name].shape == host.shape and loaded[name].dtype.np == host.dtype
    assert host_bits(loaded[name]) == host.tobytes(), name
  assert state.read_metadata(tmp_path / "theirs.safetensors") == {"who": "safetensors"}
