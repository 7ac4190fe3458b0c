"""tgfn.lax primitives against NumPy references written out as explicit loops (JAX's documented
semantics: convolutions are cross-correlations, dynamic slices clamp their starts, gather fills and
scatter drops out-of-bounds windows), plus grad against finite differences, vmap against a loop and jit
against eager for the ones built on traced indices. Runs on CPU."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn import lax
from tgfn.test_util import check_grads


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: Any) -> None:
  monkeypatch.setenv("DEV", "CPU")


# ---- convolution
def conv_reference(x: np.ndarray, w: np.ndarray, strides: tuple, pads: list, lhs_d: tuple, rhs_d: tuple,
                   groups: int) -> np.ndarray:
  """NCHW x OIHW -> NCHW, by the definition: dilate, pad (negative crops), then correlate."""
  n, c, h, wd = x.shape
  o, i, kh, kw = w.shape
  dil = np.zeros((n, c, (h - 1) * lhs_d[0] + 1, (wd - 1) * lhs_d[1] + 1))
  dil[:, :, ::lhs_d[0], ::lhs_d[1]] = x
  (pl, ph), (ql, qh) = pads
  padded = np.pad(dil, ((0, 0), (0, 0), (max(pl, 0), max(ph, 0)), (max(ql, 0), max(qh, 0))))
  padded = padded[:, :, -min(pl, 0):padded.shape[2] + min(ph, 0), -min(ql, 0):padded.shape[3] + min(qh, 0)]
  oh = (padded.shape[2] - ((kh - 1) * rhs_d[0] + 1)) // strides[0] + 1
  ow = (padded.shape[3] - ((kw - 1) * rhs_d[1] + 1)) // strides[1] + 1
  out = np.zeros((n, o, oh, ow))
  per_group = o // groups
  for f in range(o):
    g = f // per_group
    for a in range(oh):
      for b in range(ow):
        for di in range(kh):
          for dj in range(kw):
            patch = padded[:, g * i:(g + 1) * i, a * strides[0] + di * rhs_d[0], b * strides[1] + dj * rhs_d[1]]
            out[:, f, a, b] += patch @ w[f, :, di, dj]
  return out


CONV_CASES = [  # strides, padding, lhs_dilation, rhs_dilation, feature_group_count
  ((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
  ((2, 1), ((1, 2), (-1, 1)), (1, 2), (2, 1), 2),
  ((1, 2), ((2, 0), (1, 1)), (2, 1), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_general_dilated_matches_the_definition(case: tuple) -> None:
  strides, pads, lhs_d, rhs_d, groups = case
  rng = np.random.default_rng(0)
  x, w = rng.normal(size=(2, 4, 5, 6)), rng.normal(size=(6, 4 // groups, 3, 2))
  got = lax.conv_general_dilated(tnp.array(x), tnp.array(w), strides, pads, lhs_d, rhs_d,
                                 feature_group_count=groups)
  assert_close(got, conv_reference(x, w, strides, pads, lhs_d, rhs_d, groups), 1e-12, 1e-12)


def test_conv_layouts_and_same_padding() -> None:
  """('NHWC', 'HWIO', 'NHWC') strings and a ConvDimensionNumbers give the NCHW result, permuted; SAME
  pads so that ceil(in / stride) outputs remain, the odd cell at the high end."""
  rng = np.random.default_rng(1)
  x, w = rng.normal(size=(2, 5, 6, 3)), rng.normal(size=(3, 3, 3, 4))
  assert lax.padtype_to_pads((5, 6), (3, 3), (2, 2), "SAME") == [(1, 1), (0, 1)]
  want = conv_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (2, 2), [(1, 1), (0, 1)], (1, 1), (1, 1), 1)
  got = lax.conv_general_dilated(tnp.array(x), tnp.array(w), (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
  assert_close(got, want.transpose(0, 2, 3, 1), 1e-12, 1e-12)
  dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "HWIO", "NHWC"))
  assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
  assert_close(lax.conv_general_dilated(tnp.array(x), tnp.array(w), (2, 2), "SAME", dimension_numbers=dn), got)
  valid = lax.conv(tnp.array(x.transpose(0, 3, 1, 2)), tnp.array(w.transpose(3, 2, 0, 1)), (1, 1), "VALID")
  assert valid.shape == (2, 4, 3, 4)


def test_conv_errors_name_the_mismatch() -> None:
  with pytest.raises(ValueError, match="feature_group_count"):
    lax.conv_general_dilated(tnp.ones((1, 4, 3, 3)), tnp.ones((2, 3, 1, 1)), (1, 1), "VALID")
  with pytest.raises(ValueError, match="padding"):
    lax.conv_general_dilated(tnp.ones((1, 1, 3, 3)), tnp.ones((1, 1, 1, 1)), (1, 1), "FULL")


def test_conv_transpose_is_the_input_gradient_of_conv() -> None:
  rng = np.random.default_rng(2)
  x, w = rng.normal(size=(2, 5, 7, 2)), rng.normal(size=(3, 3, 2, 3))

  def forward(v: Any) -> Any:
    return lax.conv_general_dilated(v, tnp.array(w), (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
  y, pullback = tgfn.vjp(forward, tnp.array(x))
  ct = tnp.array(rng.normal(size=y.shape))
  assert_close(lax.conv_transpose(ct, tnp.array(w), (2, 2), "VALID", transpose_kernel=True), pullback(ct)[0],
               1e-12, 1e-12)
  # SAME: the output is the input size times the stride (JAX's rule)
  assert lax.conv_transpose(tnp.ones((1, 3, 4, 2)), tnp.ones((3, 3, 2, 5)), (2, 2), "SAME").shape == (1, 6, 8, 5)


# jax.lax.conv_transpose(arange(1, 5).reshape(1, 4, 1), [1, 10, 100, ...][:k] as (k, 1, 1), (stride,), padding),
# recorded with JAX 0.10.2: the digits show which kernel tap met which input (where the low padding falls)
JAX_CONV_TRANSPOSE_1D = {
  (3, 2, "SAME"): [100, 10, 201, 20, 302, 30, 403, 40],
  (4, 2, "SAME"): [100, 2010, 201, 3020, 302, 4030, 403, 40],
  (2, 3, "SAME"): [10, 1, 0, 20, 2, 0, 30, 3, 0, 40, 4, 0],
  (3, 2, "VALID"): [100, 10, 201, 20, 302, 30, 403, 40, 4],
}


@pytest.mark.parametrize("kernel,stride,padding", list(JAX_CONV_TRANSPOSE_1D))
def test_conv_transpose_string_padding_matches_jax(kernel, stride, padding) -> None:
  x = tnp.arange(1.0, 5.0).reshape(1, 4, 1)
  w = tnp.array([1.0, 10.0, 100.0, 1000.0][:kernel]).reshape(kernel, 1, 1)
  got = lax.conv_transpose(x, w, (stride,), padding)
  np.testing.assert_array_equal(np.asarray(got).ravel(), JAX_CONV_TRANSPOSE_1D[kernel, stride, padding])


def test_conv_transpose_same_in_two_dimensions_matches_jax() -> None:
  got = lax.conv_transpose(tnp.arange(1.0, 7.0).reshape(1, 2, 3, 1), tnp.arange(1.0, 10.0).reshape(3, 3, 1, 1),
                           (2, 2), "SAME")
  want = [[9, 8, 25, 16, 41, 24], [6, 5, 16, 10, 26, 15], [39, 34, 80, 44, 100, 54], [24, 20, 46, 25, 56, 30]]
  np.testing.assert_array_equal(np.asarray(got).reshape(4, 6), want)   # recorded with JAX 0.10.2


def test_conv_grad_vmap_and_jit() -> None:
  rng = np.random.default_rng(3)
  x, w = tnp.array(rng.normal(size=(1, 2, 4, 4))), tnp.array(rng.normal(size=(2, 1, 2, 2)))

  def f(a: Any, b: Any) -> Any:
    return lax.conv_general_dilated(a, b, (1, 2), ((1, 0), (0, 1)), rhs_dilation=(1, 2), feature_group_count=2)
  check_grads(f, [x, w], order=1)
  batch = tnp.array(rng.normal(size=(3, 1, 2, 4, 4)))
  looped = tnp.stack([f(batch[i], w) for i in range(3)])
  assert_close(tgfn.vmap(f, in_axes=(0, None))(batch, w), looped, 1e-12, 1e-12)
  assert_close(tgfn.jit(f)(x, w), f(x, w), 1e-12, 1e-12)


GRAD_CASES = [  # x shape, w shape, strides, padding, lhs_dilation, rhs_dilation, feature_group_count
  ((2, 3, 5, 6), (4, 3, 3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
  ((2, 2, 8, 7), (3, 2, 3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), (1, 1), 1),   # (8 + 2 - 3) % 2 != 0
  ((1, 2, 8, 7), (2, 2, 3, 2), (3, 3), "SAME", (1, 1), (2, 2), 1),             # stride 3 and dilation, batch 1
  ((1, 4, 6, 5), (8, 1, 3, 3), (2, 1), ((1, 2), (0, 1)), (1, 1), (1, 1), 4),   # depthwise, channel multiplier 2
  ((2, 2, 4, 5), (3, 2, 2, 3), (1, 2), ((1, -1), (2, 0)), (2, 1), (1, 2), 1),  # lhs dilation, negative padding
  ((1, 2, 9, 9), (2, 2, 2, 2), (3, 3), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),   # stride > kernel: unread inputs
  ((2, 2, 9), (3, 2, 3), (2,), ((1, 1),), (1,), (1,), 1),                      # one spatial axis
]


def _conv_of(case: tuple) -> Any:
  _, _, strides, pads, lhs_d, rhs_d, groups = case
  return lambda a, b: lax.conv_general_dilated(a, b, strides, pads, lhs_d, rhs_d, feature_group_count=groups)


@pytest.mark.parametrize("case", GRAD_CASES, ids=str)
def test_conv_gradients_match_finite_differences_and_the_window_transpose(case: tuple) -> None:
  """The reverse-mode rule (the input gradient as a convolution) against finite differences in both modes,
  and exactly against the automatic derivative of the windowed definition (the transposed window gather)."""
  from tgfn.lax.conv import _conv_by_windows
  xs, ws, strides, pads, lhs_d, rhs_d, groups = case
  rng = np.random.default_rng(5)
  x, w = tnp.array(rng.normal(size=xs)), tnp.array(rng.normal(size=ws))
  f = _conv_of(case)
  check_grads(f, [x, w], order=1)
  y, pullback = tgfn.vjp(f, x, w)
  ct = tnp.array(rng.normal(size=y.shape))
  resolved = lax.padtype_to_pads(xs[2:], [(k - 1) * d + 1 for k, d in zip(ws[2:], rhs_d)], strides, pads) \
    if isinstance(pads, str) else pads
  plain = lambda a, b: _conv_by_windows(a, b, strides, resolved, lhs_d, rhs_d, groups)  # noqa: E731
  for got, want in zip(pullback(ct), tgfn.vjp(plain, x, w)[1](ct)):
    assert_close(got, want, 1e-12, 1e-12)


def test_conv_grad_of_grad_vmap_of_grad_and_jit() -> None:
  case = GRAD_CASES[1]
  rng = np.random.default_rng(6)
  x, w = tnp.array(rng.normal(size=case[0])), tnp.array(rng.normal(size=case[1]))
  f = _conv_of(case)
  check_grads(lambda a, b: tnp.tanh(f(a, b)), [x, w], order=2, modes=("rev",))
  check_grads(f, [x, w], order=2, modes=("fwd",))
  loss = lambda a, b: (tnp.sin(f(a, b)) ** 2).sum()  # noqa: E731
  grads = tgfn.grad(loss, argnums=(0, 1))
  batch = tnp.array(rng.normal(size=(3,) + case[0]))
  per_example = tgfn.vmap(grads, in_axes=(0, None))(batch, w)
  for i in range(3):
    for got, want in zip(per_example, grads(batch[i], w)): assert_close(got[i], want, 1e-12, 1e-12)
  for got, want in zip(tgfn.jit(grads)(x, w), grads(x, w)): assert_close(got, want, 1e-12, 1e-12)


# ---- windowed reductions
def test_reduce_window_max_and_sum() -> None:
  rng = np.random.default_rng(4)
  x = rng.normal(size=(2, 3, 5, 4)).astype(np.float32)
  pooled = lax.reduce_window(tnp.array(x), -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
  assert_close(pooled, x[:, :, :4].reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)))
  summed = lax.reduce_window(tnp.array(x), 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), "SAME")
  padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  assert_close(summed, sum(padded[:, :, i:i + 5, j:j + 4] for i in range(3) for j in range(3)), 1e-5, 1e-5)
  # window dilation 2, stride 2, base dilation 2 (holes hold the init value), explicit padding
  v = np.arange(1.0, 7.0)
  got = lax.reduce_window(tnp.array(v), 0.0, lax.add, (2,), (2,), ((1, 0),), base_dilation=(2,), window_dilation=(2,))
  base = np.zeros(12)
  base[1::2] = v  # pad 1 low, then 1 0 2 0 3 ... 6
  want = [base[o * 2] + base[o * 2 + 2] for o in range((12 - 3) // 2 + 1)]
  assert_close(got, np.array(want))
  # the init value is combined once per window (lax semantics), and min works through the same path
  assert_close(lax.reduce_window(tnp.array(v), 10.0, lax.add, (3,), (3,), "VALID"), np.array([16.0, 25.0]))
  assert_close(lax.reduce_window(tnp.array(v), np.inf, lax.min, (2,), (1,), "VALID"), v[:-1])


def test_reduce_window_grads() -> None:
  x = tnp.array(np.random.default_rng(5).permutation(16).reshape(1, 4, 4) * 0.3)  # distinct: no max ties
  check_grads(lambda v: lax.reduce_window(v, -np.inf, lax.max, (1, 2, 2), (1, 2, 2), "VALID"), [x], order=1)
  check_grads(lambda v: lax.reduce_window(v, 0.0, lax.add, (1, 3, 2), (1, 1, 2), "SAME"), [x], order=1)


# ---- dot_general, pad, broadcast_in_dim, reduce
def test_dot_general_layout() -> None:
  rng = np.random.default_rng(6)
  a, b = rng.normal(size=(3, 2, 4, 5)), rng.normal(size=(4, 3, 6))
  got = lax.dot_general(tnp.array(a), tnp.array(b), (((2,), (0,)), ((0,), (1,))))
  assert_close(got, np.einsum("bijk,jbl->bikl", a, b), 1e-12, 1e-12)  # batch, lhs free, rhs free
  check_grads(lambda p, q: lax.dot_general(p, q, (((2,), (0,)), ((0,), (1,)))), [tnp.array(a), tnp.array(b)], order=1)
  with pytest.raises(ValueError, match="differ in size"):
    lax.dot_general(tnp.ones((2, 3)), tnp.ones((4, 2)), (((1,), (0,)), ((), ())))


def pad_reference(x: np.ndarray, value: float, config: list) -> np.ndarray:
  for axis, (lo, hi, interior) in enumerate(config):
    n = x.shape[axis]
    spread = np.full(x.shape[:axis] + (max(n + (n - 1) * interior, 0),) + x.shape[axis + 1:], value)
    spread[(slice(None),) * axis + (slice(None, None, interior + 1),)] = x
    spread = np.concatenate([np.full(x.shape[:axis] + (max(lo, 0),) + x.shape[axis + 1:], value), spread,
                             np.full(x.shape[:axis] + (max(hi, 0),) + x.shape[axis + 1:], value)], axis)
    x = spread[(slice(None),) * axis + (slice(-min(lo, 0), spread.shape[axis] + min(hi, 0)),)]
  return x


def test_pad_interior_and_negative() -> None:
  x = np.arange(1.0, 13.0).reshape(3, 4)
  for config in ([(1, -1, 2), (0, 0, 0)], [(-1, 2, 1), (2, -3, 1)], [(0, 0, 0), (1, 1, 3)]):
    assert_close(lax.pad(tnp.array(x), -1.0, config), pad_reference(x, -1.0, config))
  assert_close(lax.pad(tnp.array([1.0, 2, 3]), 0.0, [(1, -1, 2)]), np.array([0.0, 1, 0, 0, 2, 0, 0], np.float32))
  check_grads(lambda v: lax.pad(v, 0.5, [(-1, 2, 1), (2, -3, 1)]), [tnp.array(x)], order=1)


def test_broadcast_iota_select_clamp_convert() -> None:
  assert_close(lax.broadcast_in_dim(tnp.array([1, 2, 3]), (2, 3, 4), (1,)),
               np.broadcast_to(np.array([1, 2, 3])[None, :, None], (2, 3, 4)).astype(np.int32))
  assert_close(lax.iota(tnp.int32, 4), np.arange(4, dtype=np.int32))
  assert_close(lax.broadcasted_iota(tnp.float32, (2, 3), 1), np.tile(np.arange(3.0, dtype=np.float32), (2, 1)))
  pred = tnp.array([True, False, True])
  assert_close(lax.select(pred, tnp.array([1.0, 2, 3]), tnp.array([4.0, 5, 6])), np.array([1.0, 5, 3], np.float32))
  with pytest.raises(TypeError, match="bool"):
    lax.select(tnp.array([1, 0, 1]), tnp.ones(3), tnp.ones(3))
  assert_close(lax.clamp(0.0, tnp.array([-1.0, 0.5, 2.0]), 1.0), np.array([0.0, 0.5, 1.0], np.float32))
  assert_close(lax.convert_element_type(tnp.array([1.7, -2.5]), tnp.int32), np.array([1, -2], np.int32))
  x = np.array([1.5, -0.0, np.inf], np.float32)
  assert_close(lax.bitcast_convert_type(tnp.array(x), tnp.uint32), x.view(np.uint32))
  assert_close(lax.bitcast_convert_type(tnp.array(x), tnp.uint8), x.view(np.uint8).reshape(3, 4))
  assert_close(lax.bitcast_convert_type(tnp.array(x.view(np.uint8).reshape(3, 4)), tnp.float32), x)
  assert_close(lax.shift_right_logical(tnp.array([-8], dtype=tnp.int8), 1), np.array([124], np.int8))
  assert_close(lax.logistic(tnp.array([-100.0, 0.0, 100.0])), np.array([0.0, 0.5, 1.0], np.float32))


def test_reduce_monoids_and_stop_gradient() -> None:
  x = np.arange(1.0, 7.0).reshape(2, 3)
  assert_close(lax.reduce(tnp.array(x), 0.0, lax.add, (1,)), x.sum(1))
  assert_close(lax.reduce(tnp.array(x), 1.0, lax.mul, (0,)), x.prod(0))
  assert_close(lax.reduce(tnp.array(x), -np.inf, lax.max, (0, 1)), np.float64(6.0))
  assert_close(lax.reduce(tnp.array(x), 2.5, lax.min, (1,)), np.array([1.0, 2.5]))  # the init takes part
  with pytest.raises(NotImplementedError, match="monoids"):
    lax.reduce(tnp.array(x), 0.0, lambda a, b: a - b, (1,))
  assert_close(tgfn.grad(lambda v: (v * lax.stop_gradient(v)).sum())(tnp.array(x)), x)


# ---- dynamic slices: traced starts, clamped
def test_dynamic_slice_clamps_traced_starts() -> None:
  x = np.arange(24.0).reshape(4, 6)
  f = tgfn.jit(lambda v, i, j: lax.dynamic_slice(v, (i, j), (2, 3)))
  for i, j in ((1, 2), (3, 5), (-2, 0)):  # past the end and negative clamp so the slice fits
    ci, cj = min(max(i, 0), 2), min(max(j, 0), 3)
    assert_close(f(tnp.array(x), tnp.array(i), tnp.array(j)), x[ci:ci + 2, cj:cj + 3])
  assert_close(lax.dynamic_slice(tnp.array(x), (5, 1), (2, 2)), x[2:4, 1:3])  # static starts too
  assert_close(lax.dynamic_slice_in_dim(tnp.array(x), tnp.array(4), 2, axis=1), x[:, 4:6])
  assert_close(lax.dynamic_index_in_dim(tnp.array(x), tnp.array(2), axis=0, keepdims=False), x[2])
  starts = np.array([0, 3, 1])
  mapped = tgfn.vmap(lambda s: lax.dynamic_slice_in_dim(tnp.array(x), s, 3, axis=1))(tnp.array(starts))
  assert_close(mapped, np.stack([x[:, s:s + 3] for s in starts]))
  check_grads(lambda v: lax.dynamic_slice(v, (tnp.array(1), tnp.array(2)), (2, 2)), [tnp.array(x)], order=1)


def test_dynamic_update_slice() -> None:
  x, u = np.zeros((4, 5)), np.arange(1.0, 7.0).reshape(2, 3)
  f = tgfn.jit(lambda v, w, i, j: lax.dynamic_update_slice(v, w, (i, j)))
  for i, j in ((1, 1), (3, 4), (-1, 0)):
    ci, cj = min(max(i, 0), 2), min(max(j, 0), 2)
    want = x.copy()
    want[ci:ci + 2, cj:cj + 3] = u
    assert_close(f(tnp.array(x), tnp.array(u), tnp.array(i), tnp.array(j)), want)
    assert_close(lax.dynamic_update_slice(tnp.array(x), tnp.array(u), (i, j)), want)
  got = lax.dynamic_update_slice_in_dim(tnp.array(x), tnp.array(u[:, :1].T), tnp.array(2), axis=0)
  want = x.copy()
  want[2, 0:2] = u[:, 0]
  assert got.shape == (4, 5)
  assert_close(lax.dynamic_update_index_in_dim(tnp.array(x), tnp.ones(5), tnp.array(3), 0)[3], np.ones(5))
  check_grads(lambda v, w: lax.dynamic_update_slice(v, w, (tnp.array(1), tnp.array(2))),
              [tnp.array(x), tnp.array(u)], order=1)


# ---- gather and scatter with dimension numbers
def test_gather_rows_and_patches() -> None:
  x = np.arange(24.0).reshape(4, 6)
  rows = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
  idx = np.array([[2], [0], [5]])
  got = lax.gather(tnp.array(x), tnp.array(idx), rows, (1, 6))
  assert_close(got, np.concatenate([x[[2, 0]], np.full((1, 6), np.nan)]))  # 'fill': an out-of-range start reads NaN
  assert_close(lax.gather(tnp.array(x), tnp.array(idx), rows, (1, 6), mode="clip"), x[[2, 0, 3]])
  patches = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
  idx = np.array([[0, 1], [2, 4], [3, 3]])
  want = np.stack([x[min(r, 2):min(r, 2) + 2, min(c, 4):min(c, 4) + 2] for r, c in idx])
  assert_close(lax.gather(tnp.array(x), tnp.array(idx), patches, (2, 2), mode="clip"), want)
  # offset dims before the batch axis
  cols = lax.GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(1,), start_index_map=(1,))
  assert_close(lax.gather(tnp.array(x), tnp.array([[1], [4]]), cols, (4, 1)), x[:, [1, 4]])


def test_scatter_family() -> None:
  x = np.arange(24.0).reshape(4, 6)
  rows = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
  idx, upd = tnp.array([[1], [1], [7]]), tnp.array(np.ones((3, 6)))
  want = x.copy()
  want[1] += 2  # both updates to row 1 add; the window at 7 is dropped
  assert_close(lax.scatter_add(tnp.array(x), idx, upd, rows), want)
  want = x.copy()
  want[[1, 3]] = -1
  assert_close(lax.scatter(tnp.array(x), tnp.array([[1], [3]]), -tnp.ones((2, 6)), rows), want)
  assert_close(lax.scatter_max(tnp.array(x), tnp.array([[0]]), tnp.full((1, 6), 3.0), rows)[0],
               np.maximum(x[0], 3.0))
  assert_close(lax.scatter_mul(tnp.array(x), tnp.array([[2]]), tnp.full((1, 6), 2.0), rows)[2], x[2] * 2)
  check_grads(lambda v, u: lax.scatter_add(v, idx, u, rows), [tnp.array(x), upd], order=1)


# ---- sort, top_k, cumulative, special functions
def test_sort_several_operands_by_two_keys() -> None:
  k1 = np.array([2, 1, 2, 1, 0, 2])
  k2 = np.array([5.0, 3.0, 1.0, 3.0, 9.0, 1.0])
  payload = np.arange(6)
  a, b, c = lax.sort((tnp.array(k1), tnp.array(k2), tnp.array(payload)), num_keys=2)
  order = np.lexsort((k2, k1))  # stable: the two (1, 3.0) and (2, 1.0) ties keep their order
  assert_close(a, k1[order])
  assert_close(b, k2[order])
  assert_close(c, payload[order])
  keys, vals = lax.sort_key_val(tnp.array([3.0, 1.0, 2.0]), tnp.array([0, 1, 2]))
  assert_close(vals, np.array([1, 2, 0], np.int32))


def test_top_k() -> None:
  x = np.array([[1.0, 5.0, 3.0, 5.0, -1.0], [0.0, -2.0, 7.0, 1.0, 7.0]], np.float32)
  values, indices = lax.top_k(tnp.array(x), 3)
  assert_close(indices, np.array([[1, 3, 2], [2, 4, 3]], np.int32))  # ties: lower index first
  assert_close(values, np.take_along_axis(x, np.asarray(indices), 1))
  check_grads(lambda v: lax.top_k(v, 2)[0], [tnp.array(np.array([0.3, -1.2, 2.5, 0.9]))], order=1)


def test_cumulative_reverse() -> None:
  x = np.array([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])
  assert_close(lax.cumsum(tnp.array(x), axis=1, reverse=True), np.cumsum(x[:, ::-1], 1)[:, ::-1])
  assert_close(lax.cumprod(tnp.array(x), axis=0), np.cumprod(x, 0))
  assert_close(lax.cummax(tnp.array(x), axis=1, reverse=True), np.maximum.accumulate(x[:, ::-1], 1)[:, ::-1])
  assert_close(lax.cummin(tnp.array(x), axis=1), np.minimum.accumulate(x, 1))
  assert_close(lax.cumlogsumexp(tnp.array(x), axis=1), np.log(np.cumsum(np.exp(x), 1)), 1e-12, 1e-12)


def test_erf_and_inverse() -> None:
  xs = np.concatenate([np.linspace(-6.0, 6.0, 241), [0.0, 1e-300, 1.4999, 1.5, 27.0, np.inf, -np.inf, np.nan]])
  want = np.array([math.erf(v) if not np.isnan(v) else np.nan for v in xs])
  assert_close(lax.erf(tnp.array(xs)), want, 1e-15, 1e-16)  # float64: within a few ulps
  assert_close(lax.erf(tnp.array(xs.astype(np.float32))), want.astype(np.float32), 1.2e-7, 1e-38)
  wantc = np.array([math.erfc(v) if not np.isnan(v) else np.nan for v in xs])
  assert_close(lax.erfc(tnp.array(xs)), wantc, 1e-14, 1e-300)  # relative, also deep in the tail
  ys = np.concatenate([np.linspace(-0.999999, 0.999999, 201), [0.0, 1 - 1e-15, 1.0, -1.0, 1.5, np.nan]])
  inv = np.asarray(lax.erf_inv(tnp.array(ys)))
  assert np.array_equal(inv[-4:-1], [np.inf, -np.inf, np.nan], equal_nan=True) and np.isnan(inv[-1])
  finite = np.isfinite(inv)
  assert_close(np.array([math.erf(v) for v in inv[finite]]), ys[finite], 1e-15, 1e-15)
  # derivatives: JAX's rules, 2/sqrt(pi) exp(-x^2) and sqrt(pi)/2 exp(erf_inv(y)^2)
  x = tnp.array([-1.3, 0.2, 2.1])
  slope = 2 / np.sqrt(np.pi) * np.exp(-np.asarray(x).astype(np.float64) ** 2)
  assert_close(tgfn.grad(lambda v: lax.erf(v).sum())(x), slope.astype(np.float32), 1e-6, 1e-7)
  y = tnp.array([-0.9, 0.1, 0.99])
  slope = np.sqrt(np.pi) / 2 * np.exp(np.asarray(lax.erf_inv(y)).astype(np.float64) ** 2)
  assert_close(tgfn.grad(lambda v: lax.erf_inv(v).sum())(y), slope.astype(np.float32), 1e-5, 1e-6)


def test_elementwise_aliases() -> None:
  x = tnp.array([0.5, 2.0])
  for name, ref in (("add", tnp.add), ("mul", tnp.multiply), ("sub", tnp.subtract), ("div", tnp.divide),
                    ("max", tnp.maximum), ("min", tnp.minimum)):
    assert_close(getattr(lax, name)(x, x), ref(x, x))
  for name in ("exp", "log", "tanh", "sqrt", "rsqrt", "sin", "cos", "abs", "neg", "floor", "ceil", "sign"):
    assert getattr(lax, name) is not None
  assert_close(lax.rsqrt(x), 1 / np.sqrt(np.asarray(x)))
  assert_close(lax.integer_pow(x, 3), np.asarray(x) ** 3)
