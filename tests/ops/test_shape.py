"""Shape functions against NumPy: movement (reshape, transpose, ...), joining, splitting, padding,
flipping, tiling, repeating and rolling, on every dtype family, with empty and size-1 axes."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfn.array
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.dtype import to_dtype
from tgfn.schedule.schedule import create_schedule
from tgfn.uop.ops import Ops

DTYPES = [np.bool_, np.int8, np.int32, np.uint8, np.float16, np.float32]

# the `device` fixture only sets the default device, so it is safe to share across a test's examples
examples = settings(suppress_health_check=[*settings.default.suppress_health_check,
                                           HealthCheck.function_scoped_fixture])


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4):
  return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


@st.composite
def arrays(draw, **shape_kw) -> np.ndarray:
  """A NumPy array of one of DTYPES and a shape from `shapes(**shape_kw)` (floats include NaN, inf, -0.0)."""
  return draw(hnp.arrays(draw(st.sampled_from(DTYPES)), draw(shapes(**shape_kw))))


def small_values(dtype) -> st.SearchStrategy:
  """Values every dtype in DTYPES holds exactly, so casts during promotion are exact."""
  if dtype is np.bool_: return st.booleans()
  return st.integers(0 if np.dtype(dtype).kind == "u" else -100, 100)


def raises(exc: type, text: str):
  return pytest.raises(exc, match=re.escape(text))


def assert_all_close(got: list, want: list) -> None:
  assert len(got) == len(want), f"{len(got)} pieces != expected {len(want)}"
  for g, w in zip(got, want): assert_close(g, w)


# ---- existing movement functions
@examples
@given(a=arrays(), data=st.data(), order=st.sampled_from(["C", "F"]))
def test_reshape(device, a, data, order):
  target = list(data.draw(st.permutations(a.shape)))
  target.insert(data.draw(st.integers(0, len(target))), 1)
  if target and data.draw(st.booleans()): target[data.draw(st.integers(0, len(target) - 1))] = -1
  try:
    want = a.reshape(target, order=order)
  except ValueError:
    with pytest.raises(ValueError): tnp.reshape(tnp.array(a), target, order=order)
    return
  assert_close(tnp.reshape(tnp.array(a), target, order=order), want)
  assert_close(tnp.ravel(tnp.array(a)), a.ravel())


def test_reshape_errors(device):
  x = tnp.zeros((2, 3))
  with raises(ValueError, "cannot reshape array of shape (2, 3) (size 6) into shape (4, 2)"):
    tnp.reshape(x, (4, 2))
  with raises(ValueError, "cannot reshape array of shape (2, 3) (size 6) into shape (4, -1)"):
    tnp.reshape(x, (4, -1))
  with raises(ValueError, "only one dimension can be -1, got (-1, -1)"): tnp.reshape(x, (-1, -1))
  with raises(ValueError, "order must be 'C' or 'F', got 'A'"): tnp.reshape(x, 6, order="A")
  assert tnp.reshape(x, np.int64(6)).shape == (6,)


@examples
@given(a=arrays(), data=st.data())
def test_transpose_moveaxis_swapaxes(device, a, data):
  x = tnp.array(a)
  perm = data.draw(st.permutations(range(a.ndim)))
  assert_close(tnp.transpose(x), a.T)
  assert_close(tnp.transpose(x, perm), np.transpose(a, perm))
  if a.ndim:
    axes = st.integers(-a.ndim, a.ndim - 1)
    k = data.draw(st.integers(0, a.ndim))
    src = data.draw(st.lists(st.integers(0, a.ndim - 1), min_size=k, max_size=k, unique=True))
    dst = data.draw(st.lists(st.integers(0, a.ndim - 1), min_size=k, max_size=k, unique=True))
    assert_close(tnp.moveaxis(x, src, dst), np.moveaxis(a, src, dst))
    i, j = data.draw(axes), data.draw(axes)
    assert_close(tnp.moveaxis(x, i, j), np.moveaxis(a, i, j))
    assert_close(tnp.swapaxes(x, i, j), np.swapaxes(a, i, j))


def test_transpose_moveaxis_swapaxes_errors(device):
  x = tnp.zeros((2, 3, 4))
  with raises(ValueError, "axes (0, 0, 1) are not a permutation of the 3 axes of shape (2, 3, 4)"):
    tnp.transpose(x, (0, 0, 1))
  with raises(ValueError, "axis 3 is out of bounds for an array of dimension 3 (valid: -3..2)"):
    tnp.transpose(x, (0, 1, 3))
  with raises(ValueError, "source [0, 1] and destination [0] must have the same number of axes"):
    tnp.moveaxis(x, [0, 1], [0])
  with raises(ValueError, "repeated axis in source [0, -3]"): tnp.moveaxis(x, [0, -3], [1, 2])
  with raises(ValueError, "destination 5 is out of bounds"): tnp.moveaxis(x, 0, 5)
  with raises(ValueError, "axis -4 is out of bounds for an array of dimension 3"): tnp.swapaxes(x, 0, -4)
  with raises(TypeError, "axis must be an integer, got 1.5"): tnp.swapaxes(x, 1.5, 0)


@examples
@given(a=arrays(max_dims=2), data=st.data())
def test_expand_dims_squeeze(device, a, data):
  x = tnp.array(a)
  out_ndim = a.ndim + data.draw(st.integers(1, 2))
  axes = data.draw(st.lists(st.integers(-out_ndim, out_ndim - 1), min_size=out_ndim - a.ndim,
                            max_size=out_ndim - a.ndim, unique_by=lambda i: i % out_ndim))
  expanded = np.expand_dims(a, tuple(axes))
  assert_close(tnp.expand_dims(x, tuple(axes)), expanded)
  assert_close(tnp.squeeze(tnp.expand_dims(x, tuple(axes))), np.squeeze(expanded))
  ones = [i for i, n in enumerate(expanded.shape) if n == 1]
  drop = tuple(data.draw(st.lists(st.sampled_from(ones), unique=True)))
  assert_close(tnp.squeeze(tnp.array(expanded), drop), np.squeeze(expanded, drop))


def test_expand_dims_squeeze_errors(device):
  x = tnp.zeros((2, 1))
  with raises(ValueError, "repeated axis in (0, -4)"): tnp.expand_dims(x, (0, -4))
  with raises(ValueError, "axis 3 is out of bounds for an array of dimension 3"): tnp.expand_dims(x, 3)
  with raises(ValueError, "squeeze: axis 0 of shape (2, 1) has size 2, not 1"): tnp.squeeze(x, 0)
  assert tnp.squeeze(x, -1).shape == (2,)


@examples
@given(a=arrays(max_dims=2, max_side=3), data=st.data())
def test_broadcast_to(device, a, data):
  lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
  stretched = tuple(data.draw(st.integers(0, 3)) if n == 1 else n for n in a.shape)
  assert_close(tnp.broadcast_to(tnp.array(a), lead + stretched), np.broadcast_to(a, lead + stretched))
  got = tnp.broadcast_arrays(tnp.array(a), tnp.zeros(stretched, tnp.int8))
  assert_all_close(got, np.broadcast_arrays(a, np.zeros(stretched, np.int8)))


def test_broadcast_to_errors(device):
  x = tnp.zeros((2, 3))
  with raises(ValueError, "cannot broadcast shape (2, 3) to (2, 4): axis of size 3 vs 4"):
    tnp.broadcast_to(x, (2, 4))
  with raises(ValueError, "cannot broadcast shape (2, 3) to (3,): too few axes"): tnp.broadcast_to(x, 3)
  with raises(ValueError, "negative dimensions are not allowed, got (-1, 3)"): tnp.broadcast_to(x, (-1, 3))


# ---- joining
@st.composite
def joinable(draw, max_arrays: int = 3) -> tuple[list[np.ndarray], int]:
  """1 to `max_arrays` arrays (mixed dtypes, small values) that agree off a drawn axis."""
  base = draw(shapes(min_dims=1, max_side=3))
  axis = draw(st.integers(-len(base), len(base) - 1))
  out = []
  for _ in range(draw(st.integers(1, max_arrays))):
    shape = list(base)
    shape[axis] = draw(st.integers(0, 3))
    dtype = draw(st.sampled_from(DTYPES))
    out.append(draw(hnp.arrays(dtype, tuple(shape), elements=small_values(dtype))))
  return out, axis


def promoted(arrays: list[np.ndarray]) -> list[np.ndarray]:
  """The arrays cast to their JAX-promoted dtype (NumPy's rules differ, e.g. for int32 with float16)."""
  dt = tnp.result_type(*[to_dtype(a.dtype) for a in arrays])
  return [a.astype(dt.np) for a in arrays]


@examples
@given(case=joinable())
def test_concatenate(device, case):
  arrays, axis = case
  want = np.concatenate(promoted(arrays), axis)
  assert_close(tnp.concatenate([tnp.array(a) for a in arrays], axis), want)
  assert_close(tnp.concatenate(arrays, axis=None), np.concatenate(promoted(arrays), axis=None))


def test_concatenate_keeps_negative_zero_nan_and_bools(device):
  a = np.array([[-0.0, np.nan]], np.float32)
  b = np.array([[np.inf, -0.0]], np.float32)
  got = tnp.concatenate([tnp.array(a), tnp.array(b)], 1).numpy()
  assert np.array_equal(np.signbit(got), np.signbit(np.concatenate([a, b], 1)))
  assert_close(got, np.concatenate([a, b], 1))
  flags = [np.array([True, False]), np.array([False]), np.array([True])]
  assert_close(tnp.concatenate([tnp.array(f) for f in flags]), np.concatenate(flags))


def test_concatenate_promotes_like_jax(device):
  i8, u8 = np.array([-1, 2], np.int8), np.array([200], np.uint8)
  assert_close(tnp.concatenate([i8, u8]), np.array([-1, 2, 200], np.int16))
  half, i32 = np.array([0.5], np.float16), np.array([3], np.int32)
  assert_close(tnp.concatenate([half, i32]), np.array([0.5, 3.0], np.float16))
  assert_close(tnp.concatenate([np.array([True]), i8]), np.array([1, -1, 2], np.int8))
  assert_close(tnp.concatenate([i8, u8], dtype=tnp.float32), np.array([-1, 2, 200], np.float32))


def test_concatenate_errors(device):
  x, y, z = tnp.zeros((2, 3)), tnp.zeros((2, 4)), tnp.zeros((3, 3))
  with raises(ValueError, "all input shapes must match except along axis 0, "
                          "got shapes (2, 3), (2, 4), (3, 3)"):
    tnp.concatenate([x, y, z])
  with raises(ValueError, "must match except along axis 1, got shapes (2, 3), (3,)"):
    tnp.concatenate([x, tnp.zeros(3)], axis=1)
  with raises(ValueError, "axis 2 is out of bounds for an array of dimension 2 (valid: -2..1)"):
    tnp.concatenate([x, x], axis=2)
  with raises(ValueError, "zero-dimensional arrays cannot be concatenated, got shapes (1,), ()"):
    tnp.concatenate([tnp.zeros(1), 1.0])
  with raises(ValueError, "need at least one array to concatenate"): tnp.concatenate([])


def test_concatenate_is_one_kernel_and_lazy(device):
  a = tnp.array(np.arange(6, dtype=np.float32)).realize()
  b = tnp.array(np.arange(4, dtype=np.float32)).realize()
  out = tnp.concatenate([a * 2, b + 1])
  assert out.uop.op is not Ops.BUFFER
  assert len(create_schedule([out.uop])) == 1
  assert_close(out, np.concatenate([np.arange(6) * 2, np.arange(4) + 1]).astype(np.float32))


def test_results_are_lazy(device, monkeypatch):
  """Building any of these computes nothing: realizing is patched to fail until the values are read."""
  n = np.arange(12, dtype=np.int32).reshape(3, 4)
  a = tnp.array(n)
  def no_realize(outs): raise AssertionError("an op realized while building its lazy result")
  monkeypatch.setattr(tgfn.array, "realize", no_realize)
  modes = ("edge", "reflect", "symmetric", "wrap")
  outs = [tnp.concatenate([a, a], 1), tnp.stack([a, a]), tnp.hstack([a, a]), tnp.vstack([a, a]),
          *tnp.split(a, 2, 1), *tnp.array_split(a, [1, -1]), tnp.flip(a), tnp.fliplr(a), tnp.flipud(a),
          tnp.tile(a, (2, 1)), tnp.repeat(a, 2), tnp.repeat(a, [1, 0, 2], 0), tnp.roll(a, 1),
          tnp.roll(a, (1, -1), (0, 1)), tnp.pad(a, 1, constant_values=7),
          tnp.pad(a, 1, constant_values=tnp.array(np.int32(5))), *(tnp.pad(a, 2, mode=m) for m in modes)]
  assert all(o.uop.op is not Ops.BUFFER for o in outs)
  monkeypatch.undo()
  want = [np.concatenate([n, n], 1), np.stack([n, n]), np.hstack([n, n]), np.vstack([n, n]),
          *np.split(n, 2, 1), *np.array_split(n, [1, -1]), np.flip(n), np.fliplr(n), np.flipud(n),
          np.tile(n, (2, 1)), np.repeat(n, 2), np.repeat(n, [1, 0, 2], 0), np.roll(n, 1),
          np.roll(n, (1, -1), (0, 1)), np.pad(n, 1, constant_values=7), np.pad(n, 1, constant_values=5),
          *(np.pad(n, 2, mode=m) for m in modes)]
  assert_all_close(outs, want)


@examples
@given(a=arrays(max_dims=2, max_side=3), data=st.data())
def test_stack(device, a, data):
  axis = data.draw(st.integers(-a.ndim - 1, a.ndim))
  assert_close(tnp.stack([tnp.array(a), np.flip(a)], axis), np.stack([a, np.flip(a)], axis))
  mixed = [data.draw(hnp.arrays(dt, a.shape, elements=small_values(dt)))
           for dt in data.draw(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3))]
  assert_close(tnp.stack(mixed, axis), np.stack(promoted(mixed), axis))


def test_stack_errors(device):
  with raises(ValueError, "stack: all input arrays must have the same shape, got shapes (2,), (3,)"):
    tnp.stack([tnp.zeros(2), tnp.zeros(3)])
  with raises(ValueError, "axis 2 is out of bounds for an array of dimension 2"):
    tnp.stack([tnp.zeros(2)], 2)
  with raises(ValueError, "need at least one array to stack"): tnp.stack([])


@examples
@given(a=arrays(max_dims=3, max_side=3), data=st.data())
def test_hstack_vstack(device, a, data):
  widths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
  if a.ndim == 0:
    pieces = [a, a]
  else:
    axis = 0 if a.ndim == 1 else 1
    pieces = [np.resize(a, a.shape[:axis] + (w,) + a.shape[axis + 1:]) for w in widths]
  assert_close(tnp.hstack(pieces), np.hstack(pieces))
  rows = [np.resize(a, (w,) + a.shape[1:]) for w in widths] if a.ndim >= 2 else [a, a]
  assert_close(tnp.vstack(rows), np.vstack(rows))


# ---- splitting
@examples
@given(a=arrays(min_dims=1), data=st.data())
def test_split(device, a, data):
  axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
  n = a.shape[axis]
  x = tnp.array(a)
  sections = data.draw(st.sampled_from([k for k in range(1, 6) if n % k == 0]))
  assert_all_close(tnp.split(x, sections, axis), np.split(a, sections, axis))
  points = data.draw(st.lists(st.integers(-6, 6), max_size=3))
  assert_all_close(tnp.split(x, points, axis), np.split(a, points, axis))
  assert_all_close(tnp.split(x, np.array(points, np.int64), axis), np.split(a, points, axis))
  uneven = data.draw(st.integers(1, 5))
  assert_all_close(tnp.array_split(x, uneven, axis), np.array_split(a, uneven, axis))
  assert_all_close(tnp.array_split(x, points, axis), np.array_split(a, points, axis))


def test_split_errors(device):
  x = tnp.zeros((2, 5))
  with raises(ValueError, "split: axis 1 of size 5 does not divide into 2 equal sections; use array_split"):
    tnp.split(x, 2, axis=1)
  with raises(ValueError, "split: the number of sections must be larger than 0, got 0"): tnp.split(x, 0)
  with raises(ValueError, "array_split: the number of sections must be larger than 0, got -1"):
    tnp.array_split(x, -1)
  with raises(ValueError, "axis 2 is out of bounds for an array of dimension 2"): tnp.split(x, 1, axis=2)
  with raises(ValueError, "indices_or_sections must be integers, got 1.5"): tnp.split(x, 1.5)
  with raises(TypeError, "indices_or_sections must be concrete Python or NumPy integers"):
    tnp.split(x, tnp.array([1]))


# ---- flipping, tiling, repeating, rolling
@examples
@given(a=arrays(), data=st.data())
def test_flip(device, a, data):
  x = tnp.array(a)
  assert_close(tnp.flip(x), np.flip(a))
  if a.ndim:
    axes = tuple(data.draw(st.lists(st.integers(0, a.ndim - 1), unique=True)))
    negative = tuple(ax - a.ndim for ax in axes)
    assert_close(tnp.flip(x, negative), np.flip(a, axes))
    assert_close(tnp.flip(x, axes[0] if axes else -1), np.flip(a, axes[0] if axes else -1))
    assert_close(tnp.flipud(x), np.flipud(a))
  if a.ndim >= 2: assert_close(tnp.fliplr(x), np.fliplr(a))


def test_flip_errors(device):
  with raises(ValueError, "fliplr: needs an array with at least 2 dimensions, got shape (3,)"):
    tnp.fliplr(tnp.zeros(3))
  with raises(ValueError, "flipud: needs an array with at least 1 dimension, got shape ()"):
    tnp.flipud(tnp.zeros(()))
  with raises(ValueError, "axis 1 is out of bounds for an array of dimension 1"): tnp.flip(tnp.zeros(3), 1)
  with raises(ValueError, "repeated axis in (0, -1)"): tnp.flip(tnp.zeros(3), (0, -1))


@examples
@given(a=arrays(max_dims=2, max_side=3),
       reps=st.one_of(st.integers(0, 3), st.lists(st.integers(0, 2), max_size=3)))
def test_tile(device, a, reps):
  assert_close(tnp.tile(tnp.array(a), reps), np.tile(a, reps))


@examples
@given(a=arrays(max_dims=2), data=st.data())
def test_repeat(device, a, data):
  x = tnp.array(a)
  count = data.draw(st.integers(0, 3))
  assert_close(tnp.repeat(x, count), np.repeat(a, count))
  if a.ndim:
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    assert_close(tnp.repeat(x, np.int64(count), axis), np.repeat(a, count, axis))
    n = a.shape[axis]
    counts = data.draw(st.one_of(st.lists(st.integers(0, 3), min_size=n, max_size=n),
                                 st.lists(st.integers(0, 3), min_size=1, max_size=1)))
    assert_close(tnp.repeat(x, counts, axis), np.repeat(a, counts, axis))
  counts = data.draw(st.lists(st.integers(0, 3), min_size=a.size, max_size=a.size))
  assert_close(tnp.repeat(x, np.array(counts, np.int32)), np.repeat(a, counts))


def test_repeat_errors(device):
  x = tnp.zeros((2, 3))
  with raises(ValueError, "repeat: got 2 repeats for axis 1 of size 3; pass one count per element"):
    tnp.repeat(x, [1, 2], axis=1)
  with raises(ValueError, "repeat: repeats must be non-negative, got [1, -1]"):
    tnp.repeat(x, [1, -1], axis=0)
  with raises(ValueError, "repeat: repeats must be an int or a 1-d sequence"): tnp.repeat(x, [[1]], axis=0)
  with raises(TypeError, "repeats must be concrete Python or NumPy integers"): tnp.repeat(x, tnp.array(2))
  with raises(ValueError, "tile: reps must be non-negative, got (1, -2)"): tnp.tile(x, (1, -2))


@examples
@given(a=arrays(), data=st.data())
def test_roll(device, a, data):
  x = tnp.array(a)
  shift = data.draw(st.integers(-9, 9))
  assert_close(tnp.roll(x, shift), np.roll(a, shift))
  if a.ndim:
    axes = data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), min_size=1, max_size=3))
    shifts = data.draw(st.lists(st.integers(-9, 9), min_size=len(axes), max_size=len(axes)))
    assert_close(tnp.roll(x, tuple(shifts), tuple(axes)), np.roll(a, tuple(shifts), tuple(axes)))
    assert_close(tnp.roll(x, shift, axes), np.roll(a, shift, axes))


def test_roll_errors(device):
  x = tnp.zeros((2, 3))
  with raises(ValueError, "roll: shift (1, 2, 3) and axis (0, 1) must have the same length"):
    tnp.roll(x, (1, 2, 3), (0, 1))
  with raises(ValueError, "axis 2 is out of bounds for an array of dimension 2"): tnp.roll(x, 1, 2)
  with raises(TypeError, "shift must be concrete Python or NumPy integers"): tnp.roll(x, tnp.array(1))


# ---- padding
MODES = ["constant", "edge", "reflect", "symmetric", "wrap"]


@st.composite
def pad_widths(draw, ndim: int, most: int = 4):
  width = st.integers(0, most)
  pair = st.tuples(width, width)
  forms = [width, pair, st.tuples(width)] + ([st.lists(pair, min_size=ndim, max_size=ndim)] if ndim else [])
  return draw(st.one_of(forms))


@examples
@given(a=arrays(max_dims=2), mode=st.sampled_from(MODES), data=st.data())
def test_pad(device, a, mode, data):
  widths = data.draw(pad_widths(a.ndim))
  kwargs = {"constant_values": data.draw(st.integers(0, 5))} if mode == "constant" else {}
  try:
    want = np.pad(a, widths, mode=mode, **kwargs)
  except ValueError:  # NumPy refuses to extend an empty axis in the modes that copy elements
    with raises(ValueError, "cannot extend the empty axis"): tnp.pad(tnp.array(a), widths, mode=mode)
    return
  assert_close(tnp.pad(tnp.array(a), widths, mode=mode, **kwargs), want)


@examples
@given(a=arrays(min_dims=1, max_dims=1, min_side=1, max_side=4), mode=st.sampled_from(MODES[1:]),
       before=st.integers(0, 11), after=st.integers(0, 11))
def test_pad_wider_than_the_axis_repeats_the_pattern(device, a, mode, before, after):
  assert_close(tnp.pad(tnp.array(a), (before, after), mode=mode), np.pad(a, (before, after), mode=mode))


def test_pad_3d_and_constant_values(device):
  a = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
  widths = ((1, 0), (2, 1), (0, 3))
  for mode in MODES: assert_close(tnp.pad(tnp.array(a), widths, mode=mode), np.pad(a, widths, mode=mode))
  per_axis = ((1, 2), (3, 4), (5, 6))
  assert_close(tnp.pad(a, 1, constant_values=per_axis), np.pad(a, 1, constant_values=per_axis))
  assert_close(tnp.pad(a, (1, 2), constant_values=(7, 8)), np.pad(a, (1, 2), constant_values=(7, 8)))
  f = np.array([1.5, np.nan], np.float32)
  inf = tnp.array(np.float32(np.inf))
  assert_close(tnp.pad(f, 1, constant_values=inf), np.pad(f, 1, constant_values=np.inf))
  assert_close(tnp.pad(np.array([True]), 1, constant_values=2), np.array([True, True, True]))
  assert_close(tnp.pad(np.array(5, np.int32), 2, mode="reflect"), np.array(5, np.int32))


def test_pad_with_negative_zero(device):
  zeros = tnp.zeros(2)  # a live float32 CONST 0.0: hash-consing must not merge the -0.0 fill into it
  f = np.array([1.5, np.nan], np.float32)
  padded = tnp.pad(f, 1, constant_values=-0.0).numpy()
  assert_close(padded, np.pad(f, 1, constant_values=-0.0))
  assert np.signbit(padded[[0, -1]]).all()
  assert_close(zeros, np.zeros(2, np.float32))


def test_pad_errors(device):
  x = tnp.zeros((2, 3))
  with raises(ValueError, "pad: mode must be one of constant, edge, reflect, symmetric, wrap; got 'mean'"):
    tnp.pad(x, 1, mode="mean")
  with raises(ValueError, "pad_width must be a non-negative int, a (before, after) pair, or one "
                          "(before, after) pair per axis (for an array with 2 dimensions); "
                          "got ((1, 2, 3),)"):
    tnp.pad(x, ((1, 2, 3),))
  with raises(ValueError, "pad: pad_width must be a non-negative int"): tnp.pad(x, ((1, 2), (3, 4), (5, 6)))
  with raises(ValueError, "got negative widths (1, -1)"): tnp.pad(x, (1, -1))
  with raises(ValueError, "pad: pad_width must be integers, got 1.5"): tnp.pad(x, 1.5)
  with raises(ValueError, "pad: constant_values must be a number, a (before, after) pair, or one "
                          "(before, after) pair per axis; got 'a'"):
    tnp.pad(x, 1, constant_values="a")
  with raises(ValueError, "pad: cannot extend the empty axis 0 in mode 'edge'"):
    tnp.pad(tnp.zeros((0, 2)), 1, mode="edge")
  with raises(TypeError, "pad: pad_width must be concrete"): tnp.pad(x, tnp.array(1))
