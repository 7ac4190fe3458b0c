"""DEV=WEBGPU against the PYTHON reference interpreter: the cases of tests/drivers/backend_cases.py whose
dtypes the WGSL renderer has (no 64-bit ones) run on both and must agree -- bit for bit but for the
transcendentals and the fused reductions; the others must raise NotImplementedError naming the dtype; and
versions of those cases without 64-bit dtypes run here too. Skipped where Chromium or its WebGPU adapter is missing
(`apt-get install chromium`). Each test starts nothing new: one Chromium serves the process."""
from __future__ import annotations

import os
import re
import signal
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import lax
from tgfn.engine import realize as realize_mod
from tests.drivers import backend_cases
from tests.drivers.backend_cases import APPROXIMATE, CASES, SPECIAL_F32, _floats, _ints, assert_agree, reference, run_case

# the shared cases WGSL can hold in memory, and the first dtype each of the others needs
SUPPORTED = ["divide_int8", "divide_int32", "divide_uint8", "divide_uint32", "shift_int8", "shift_int32", "shift_uint8",
             "nan_max", "halves", "reductions", "gathers", "mlp_step"]
UNSUPPORTED = {"divide_int64": "int64", "shift_int64": "int64", "shift_uint64": "uint64", "casts": "int64",
               "wrapping": "int64", "elementwise": "float64", "transcendentals": "float64", "bitcasts": "int64",
               "matmuls": "float64"}


def _webgpu_or_skip():
  from tgfn_drivers import BackendUnavailable
  try:
    from tgfn_drivers import webgpu
    webgpu.browser()
  except (BackendUnavailable, RuntimeError) as e:  # WebGPUUnavailable is a RuntimeError
    pytest.skip(str(e))
  return webgpu


def _halves_of(x: np.ndarray) -> np.ndarray:
  with np.errstate(over="ignore"): return x.astype(np.float16)  # the large ones become inf


def _casts32() -> tuple:
  x = tnp.asarray(SPECIAL_F32)
  i, u = tnp.asarray(_ints("int32", 24, 3)), tnp.asarray(_ints("uint32", 24, 4))
  narrow = tuple(x.astype(dt) for dt in ("int8", "uint8", "int16", "uint16", "float16", "bfloat16"))
  i8, h = tnp.asarray(_ints("int8", 24, 5)), tnp.asarray(_halves_of(SPECIAL_F32))
  return (x.astype("int32"), x.astype("uint32"), x.astype("bool"), i.astype("float32"), u.astype("float32"), i.astype("uint32"),
          u.astype("int32"), (x > 0).astype("int32"), (i > 0).astype("float32"), i.astype("bool"), *narrow,
          i.astype("int8"), u.astype("int16"), i.astype("float16"), i8.astype("uint32"), i8.astype("float16"),
          h.astype("int8"), h.astype("bfloat16"), h.astype("bool"), (h > 1).astype("float16"))


def _wrapping32() -> tuple:
  a, u = tnp.asarray(_ints("int32", 24, 6)), tnp.asarray(_ints("uint32", 24, 7))
  a8, a16, u16 = (tnp.asarray(_ints(dt, 24, 8)) for dt in ("int8", "int16", "uint16"))
  return (a + a, a * a + 7, -a, tnp.abs(a), u * u, u - 5, a - 2147483647, tnp.right_shift(u, 3), -u,
          a8 + a8, a8 * a8, -a8, a16 * a16 + 3, u16 * u16, u16 - 7, -u16, tnp.left_shift(a8, 3), a8.max())


def _elementwise32() -> tuple:
  x, y = tnp.asarray(_floats((4, 16), 8)), tnp.asarray(_floats((16,), 9))
  return (x * 0.5 + y, x / y, tnp.where(x > y, x - y, x * y), tnp.sqrt(tnp.abs(x)), 1 / x, tnp.isnan(x / 0.0),
          tnp.floor(x * 3), tnp.trunc(x * 5), tnp.round(x * 7), (x + 12582912.0) - 12582912.0, x / 0.0, x * 1e30 * 1e30)


def _bitcasts32() -> tuple:
  x = tnp.asarray(SPECIAL_F32)
  i = tnp.asarray(_ints("int32", 24, 12))
  h = tnp.asarray(_halves_of(SPECIAL_F32))
  i16 = tnp.asarray(_ints("int16", 24, 13))
  return (lax.bitcast_convert_type(x, "int32"), lax.bitcast_convert_type(x, "uint32"),
          lax.bitcast_convert_type(i, "float32") * 0, lax.bitcast_convert_type(i, "uint32"),
          lax.bitcast_convert_type(h, "int16"), lax.bitcast_convert_type(h, "uint16"),
          lax.bitcast_convert_type(i16, "float16"), lax.bitcast_convert_type(i16, "bfloat16").astype("float32"),
          lax.bitcast_convert_type(tnp.asarray(_ints("uint8", 24, 14)), "int8"))


def _matmuls32() -> tuple:
  a, b = tnp.asarray(_floats((8, 32), 15)), tnp.asarray(_floats((32, 16), 16))
  ai, bi = (tnp.asarray(_ints("int32", 64, s).reshape(8, 8)) for s in (17, 18))
  c, d = tnp.asarray(_floats((2, 4, 8), 20)), tnp.asarray(_floats((2, 8, 5), 21))
  return a @ b, a @ a.T, ai @ bi, tnp.einsum("bij,bjk->bik", c, d)


def _transcendentals32() -> tuple:
  x = tnp.asarray(_floats((4, 16), 11))
  return tnp.exp(x), tnp.log(tnp.abs(x)), tnp.sin(x * 3), tnp.cos(x), tnp.tanh(x), tnp.exp2(x)


def _packed_parts() -> tuple:
  """Bools and 8/16-bit values are parts of u32 words: odd sizes, loads and stores at every offset."""
  x = tnp.asarray(_floats((13,), 30) * 50)
  b = x > 0
  i8, h = x.astype("int8"), x.astype("float16")
  return (b, ~b, b[1:] & b[:-1], tnp.where(b, x, -x), (b[::3] | (x[:5] < -1)), b.astype("float32"), i8, i8[1:] + i8[:-1],
          h[::2] * 2, h[1:], x.astype("uint16")[2:], x.astype("bfloat16")[1::3], tnp.where(b, h, -h))


CASES32 = {"casts32": _casts32, "wrapping32": _wrapping32, "elementwise32": _elementwise32, "bitcasts32": _bitcasts32,
           "matmuls32": _matmuls32, "transcendentals32": _transcendentals32, "packed_parts": _packed_parts}
# within a few ulp: the transcendentals (tgfn/renderer/wgsl_math.py) and the matmuls (fused multiply-adds)
LOOSE = ("matmuls32", "transcendentals32")
SLOW = {"mlp_step", "matmuls32"}


def _slow_if(name: str) -> object:
  return pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name


@pytest.fixture
def cases32(monkeypatch):
  monkeypatch.setattr(backend_cases, "CASES", {**CASES, **CASES32})


@pytest.mark.parametrize("name", [_slow_if(n) for n in SUPPORTED + list(CASES32)])
def test_webgpu_matches_the_reference(name: str, monkeypatch, cases32) -> None:
  _webgpu_or_skip()
  want, _ = reference(name, monkeypatch)
  got = run_case(name, "WEBGPU", monkeypatch)
  assert len(got) == len(want)
  for i, (g, w) in enumerate(zip(got, want)):
    assert_agree(g, w, name in APPROXIMATE or name in LOOSE, f"{name} output {i}")


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_dtypes_say_so(name: str, monkeypatch) -> None:
  _webgpu_or_skip()
  with pytest.raises(NotImplementedError, match=rf"WGSL \(DEV=WEBGPU\) has no {UNSUPPORTED[name]} "):
    run_case(name, "WEBGPU", monkeypatch)


def test_float_ops_round_once(monkeypatch) -> None:
  """SwiftShader folds (x + c) - c to x unless each op's result is opaque to it: the rounding trick
  codegen's floor and round use must still round."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  x = np.array([0.3, 1.7, -2.4, 5.5, 2.5], np.float32)
  magic = tnp.full(5, 12582912.0)  # a constant in the kernel (a Python scalar would be a parameter)
  got = np.asarray((tnp.asarray(x) * 1.4427 + magic) - magic)
  assert got.tolist() == ((x * np.float32(1.4427) + np.float32(12582912.0)) - np.float32(12582912.0)).tolist() == [0, 2, -3, 8, 4]


def test_kernels_use_invocation_ids(monkeypatch) -> None:
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  (tnp.ones((3, 5, 70)) * 2 + tnp.ones((3, 5, 70))).sum(1).numpy()
  sources = [c.source for c in realize_mod._compiled.values()]
  assert any(s.startswith("// tgfn launch: global=70,3,1") and "i32(gid.y)" in s and "for (" in s for s in sources), sources


def test_unavailable_chromium_says_what_to_install(monkeypatch) -> None:
  from tgfn_drivers import BackendUnavailable, backends, require_backend
  monkeypatch.setenv("TGFN_CHROMIUM", "")
  monkeypatch.setattr("shutil.which", lambda name: None)
  (webgpu,) = [b for b in backends() if b.name == "WEBGPU"]
  assert not webgpu.available and "chromium" in webgpu.install.lower()
  with pytest.raises(BackendUnavailable, match="apt-get install chromium"):
    require_backend("WEBGPU")


def test_device_is_listed_and_values_move() -> None:
  assert tgfn.Device.canonicalize("webgpu") == "WEBGPU"
  _webgpu_or_skip()
  assert [d.platform for d in tgfn.devices("WEBGPU")] == ["webgpu"]
  on_device = tgfn.device_put(tnp.arange(6.0) * 2, "WEBGPU")
  back = tgfn.device_put(on_device + 1, "CPU")
  assert (on_device + 1).device == "WEBGPU" and back.device == "CPU"
  assert np.asarray(back * 3).tolist() == [3.0, 9.0, 15.0, 21.0, 27.0, 33.0]


def test_compile_errors_show_the_source() -> None:
  webgpu = _webgpu_or_skip()
  with pytest.raises(RuntimeError, match=r"(?s)WebGPU could not build kernel broken.*--- source ---"):
    webgpu.DEVICE.compiler.compile("// tgfn launch: global=1,1,1\n@compute @workgroup_size(64)\n"
                                   "fn broken(@builtin(global_invocation_id) gid: vec3<u32>) { let x: f32 = 1i; }\n")


def test_every_kernel_states_its_grid() -> None:
  from tgfn.renderer.wgsl import parse_launch
  with pytest.raises(ValueError, match="tgfn launch"):
    parse_launch("fn k() {}")
  assert re.match(r"E_\w+", "E_3") and parse_launch("// tgfn launch: global=3,1,1\nfn E_3(@builtin(x) g: u32) {}") == ("E_3", (3, 1, 1))


def test_loop_bodies_stage_their_slices_through_copies(monkeypatch) -> None:
  """WebGPU buffers are not addresses: a scan's x and y slices are staged through scratch buffers by
  copyBufferToBuffer (forward, reverse, and a gradient through the scan), with the reference's values."""
  _webgpu_or_skip()
  xs = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
  loss = lambda x: lax.scan(lambda c, v: (c * v + 1, c * v), x, tnp.asarray(xs))[1].sum()
  def run() -> list:
    outs = [lax.scan(lambda c, x: (c + x, c * x), tnp.zeros(3), tnp.asarray(xs), reverse=r) for r in (False, True)]
    return [np.asarray(v) for v in tgfn.tree.leaves((outs, tgfn.jit(tgfn.grad(loss))(tnp.ones(3))))]
  results = {}
  for dev in ("PYTHON", "WEBGPU"):
    monkeypatch.setenv("DEV", dev)
    results[dev] = run()
  for got, want in zip(results["WEBGPU"], results["PYTHON"], strict=True): np.testing.assert_array_equal(got, want)


def test_slices_that_are_not_whole_words_say_so(monkeypatch) -> None:
  """copyBufferToBuffer copies whole 4-byte words: 3 int8 per step cannot be staged, and it says so."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  with pytest.raises(NotImplementedError, match="whole 4-byte words"):
    carry, _ = lax.scan(lambda c, x: (c + x, c * x), tnp.zeros(3, "int8"), tnp.ones((4, 3), "int8"))
    carry.numpy()


def test_while_loop_carry_stays_on_the_device(monkeypatch) -> None:
  """The carry (here of 3 int8, not a whole word) ends in the outputs by a device-side copy: the only reads are
  the predicates, one per test, and then the results themselves."""
  webgpu = _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  reads = []
  real = webgpu.WebGPUAllocator.copyout
  monkeypatch.setattr(webgpu.WebGPUAllocator, "copyout", lambda self, h, n: (reads.append(n), real(self, h, n))[1])
  for trips in (6, 7):  # the carry ends in the output buffers or in the scratch set
    reads.clear()
    i, x = lax.while_loop(lambda c: c[0] < trips, lambda c: (c[0] + 1, c[1] * 2 + 1), (tnp.asarray(0, "int32"), tnp.ones(3, "int8")))
    tgfn.Array.realize_all([i, x])
    assert reads == [1] * (trips + 1)
    assert int(i) == trips and np.asarray(x).tolist() == [(2 ** (trips + 1) - 1 + 128) % 256 - 128] * 3  # int8 wraps


def test_float32_random_draws_need_no_float64(monkeypatch) -> None:
  """normal, gumbel, truncated_normal and uniform with bounds run on WEBGPU, their fused multiply-adds as a
  multiply and an add: within a few ulps of max(|x|, 1) of PYTHON's (exact, through float64)."""
  _webgpu_or_skip()
  results = {}
  for dev in ("PYTHON", "WEBGPU"):
    monkeypatch.setenv("DEV", dev)
    key = tgfn.device_put(tgfn.random.key(3), dev)
    assert key.device == dev
    draws = [tgfn.random.normal(key, (64,)), tgfn.random.gumbel(key, (8,)), tgfn.random.truncated_normal(key, -1.5, 0.5, (8,)),
             tgfn.random.uniform(key, (8,), minval=-3.3, maxval=7.1)]
    results[dev] = [np.asarray(d) for d in draws]
  for got, want in zip(results["WEBGPU"], results["PYTHON"], strict=True):
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * 2.0 ** -23)


def test_float32_sorts_need_no_64_bit_keys(monkeypatch) -> None:
  """sort, argsort (stable, with ties and NaN, ascending and descending) and median of float32 by rank counts and by
  the bitonic network (3000 entries): the position is a second 32-bit key instead of packed with the value in 64 bits."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  rng = np.random.default_rng(0)
  x = rng.normal(size=(3, 40)).astype(np.float32)
  x[0, :5], x[1, :10], x[2, 3] = np.nan, 1.0, -0.0
  ties = rng.integers(-5, 5, size=3000).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(tnp.sort(tnp.asarray(x), axis=1)), np.sort(x, axis=1))
  np.testing.assert_array_equal(np.asarray(tnp.argsort(tnp.asarray(x), axis=1)), np.argsort(x, axis=1, kind="stable"))
  np.testing.assert_array_equal(np.asarray(tnp.median(tnp.asarray(x), axis=1)), np.median(x, axis=1))
  np.testing.assert_array_equal(np.asarray(tnp.argsort(tnp.asarray(ties))), np.argsort(ties, kind="stable"))
  np.testing.assert_array_equal(np.asarray(tnp.argsort(tnp.asarray(ties), descending=True)), np.argsort(-ties, kind="stable"))


def test_erf_and_gammaln_run_in_float32(monkeypatch) -> None:
  """Without float64 the special functions run their algorithms in float32: within the documented ulps of the
  CPU's float64 evaluation (tests/scipy/test_special.py FLOAT32_ONLY_ULPS), with the same NaN and infinities.
  (SwiftShader takes about 30 s to compile erf's kernel.)"""
  _webgpu_or_skip()
  x = np.array([-5, -1.5, -0.3, 0, 1e-8, 0.7, 1, 2.5, 4, np.inf, -np.inf, np.nan], np.float32)
  g = np.array([-2.5, -0.4, 1e-9, 0.3, 1, 1.46, 2, 7, 9.99, 10, 150, 1e12, -3, 0, np.inf], np.float32)
  for name, v in (("erf", x), ("gammaln", g)):
    want = np.asarray(getattr(tgfn.scipy.special, name)(tgfn.device_put(tnp.asarray(v), "CPU"))).astype(np.float64)
    got = np.asarray(getattr(tgfn.scipy.special, name)(tgfn.device_put(tnp.asarray(v), "WEBGPU"))).astype(np.float64)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    np.testing.assert_array_less(np.abs(got - want)[finite] / np.maximum(np.abs(want[finite]), 1), 18 * 2.0 ** -23)


def test_what_the_device_cannot_hold_names_the_users_line(monkeypatch) -> None:
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  wide = tnp.asarray(np.arange(3, dtype=np.int64))
  with pytest.raises(NotImplementedError, match=r"no int64 buffers.*\n  in the kernel of the operation at .*test_webgpu.py:\d+"):
    (wide * 3).numpy()


def test_a_browser_that_died_says_so() -> None:
  """A command to a Chromium that exited raises with its exit code, instead of waiting for an answer."""
  webgpu = _webgpu_or_skip()
  second = webgpu._Browser()  # not the process's shared one
  try:
    os.killpg(second.process.pid, signal.SIGKILL)
    second.process.wait()
    with pytest.raises(RuntimeError, match="Chromium exited with code"):
      second.call({"op": "sync"}, timeout=30)
  finally:
    second.close()


def test_a_long_queue_is_run_before_it_grows_further(monkeypatch) -> None:
  webgpu = _webgpu_or_skip()
  monkeypatch.setattr(webgpu, "MAX_PENDING", 4)
  monkeypatch.setenv("DEV", "WEBGPU")
  x = tnp.zeros(8)
  for _ in range(10): x = (x + 1).realize()
  assert len(webgpu.browser().pending) < 4
  assert np.asarray(x).tolist() == [10.0] * 8


def _random_floats(n: int, seed: int, top: int = 2 ** 32) -> np.ndarray:
  """float32 values from uniformly random bits below `top` (all signs, exponents, denormals, inf and NaN)."""
  bits = np.random.default_rng(seed).integers(0, top, n, dtype=np.uint64).astype(np.uint32)
  return bits.view(np.float32)


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


def test_float_arithmetic_is_ieee_with_denormals(monkeypatch) -> None:
  """SwiftShader flushes denormal operands and results to zero and divides by a constant through its
  reciprocal: + - * / sqrt, 1/x, negation and the comparisons must still be NumPy's, bit for bit, on random bits,
  on pairs below 2^-100 (where denormals decide), and on denormals with normal numbers."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  n = 3000
  tiny = 0x0E000000  # the bits of 2^-99
  x = np.concatenate([_random_floats(n, 40), _random_floats(n, 41, tiny), _random_floats(n, 42, tiny), SPECIAL_F32])
  with np.errstate(invalid="ignore"):  # denormals with normal numbers (and NaN from inf)
    y = np.concatenate([_random_floats(n, 43), -_random_floats(n, 44, tiny), _random_floats(n, 45) % 8, SPECIAL_F32[::-1]])
  a, b = tnp.asarray(x), tnp.asarray(y)
  with np.errstate(all="ignore"):
    results = {"+": (a + b, x + y), "-": (a - b, x - y), "*": (a * b, x * y), "/": (a / b, x / y),
               "/ 3": (a / 3.0, x / np.float32(3)), "1/x": (1 / a, np.float32(1) / x), "sqrt": (tnp.sqrt(a), np.sqrt(x)),
               "-x": (-a, -x), "trunc": (tnp.trunc(a), np.trunc(x))}
    for name, (got, want) in results.items():
      bad = ~_same_bits(np.asarray(got), want)
      assert not bad.any(), f"{name}: {x[bad][:4]}, {y[bad][:4]} gave {np.asarray(got)[bad][:4]}, NumPy {want[bad][:4]}"
    for name, got, want in (("==", a == b, x == y), ("<", a < b, x < y), ("<=", a <= b, x <= y), ("!=", a != b, x != y)):
      np.testing.assert_array_equal(np.asarray(got), want, err_msg=name)


def test_known_constants_are_not_folded(monkeypatch) -> None:
  """x * 0.0 with x = inf is NaN (SwiftShader folded it to 0): the mean of nothing is NaN, and (-0.0) ** -1 is -inf."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  assert np.isnan(np.asarray(tnp.mean(tnp.zeros((0, 3)), axis=0))).all()
  assert np.isnan(np.asarray(tnp.asarray(np.float32([np.inf, -np.inf, np.nan])) * 0.0)).all()
  assert np.asarray(tnp.power(tnp.asarray(np.float32([-0.0, 0.0])), -1.0)).tolist() == [-np.inf, np.inf]


def _ulps(got: np.ndarray, x: np.ndarray, exact: object) -> float:
  """The largest error of `got` in float32 ulps of the float64 result; inf, NaN and zero must match exactly."""
  with np.errstate(all="ignore"):
    want = exact(x.astype(np.float64))
    rounded = want.astype(np.float32)
  special = ~np.isfinite(rounded) | (rounded == 0)
  assert _same_bits(got[special], rounded[special]).all(), (x[special][~_same_bits(got[special], rounded[special])][:4])
  spacing = np.spacing(np.abs(rounded[~special])).astype(np.float64)
  return float(np.max(np.abs(got[~special].astype(np.float64) - want[~special]) / spacing, initial=0.0))


def test_transcendentals_are_within_a_few_ulp(monkeypatch) -> None:
  """exp2, log2, sin and cos (tgfn/renderer/wgsl_math.py) within 3 ulp of the float64 result on random bits,
  near 1, on large and denormal arguments, and exact at the special values. SwiftShader's builtins missed by
  180 ulp (log2 near 1) and 2e-4 absolute (sin, cos), and gave log2(0) = -126 and 0 for denormal exp2."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  rng = np.random.default_rng(46)
  specials = np.float32([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40, 1.0, 2.0, 0.5, 3.4e38, 16367173 * 2.0 ** 72,
                         np.pi / 2, np.pi, 2 * np.pi, np.pi / 4, 0.78539819])
  x = np.concatenate([_random_floats(4000, 47), (1 + rng.standard_normal(2000) * 1e-3).astype(np.float32),
                      (rng.standard_normal(2000) * 1e4).astype(np.float32), specials])
  powers = np.concatenate([(rng.random(3000) * 300 - 150).astype(np.float32), specials])  # denormal results too
  a, p = tnp.asarray(x), tnp.asarray(powers)
  for name, got, arg, exact in (("log2", tnp.log2(a), x, np.log2), ("sin", tnp.sin(a), x, np.sin),
                                ("cos", tnp.cos(a), x, np.cos), ("exp2", tnp.exp2(p), powers, np.exp2)):
    assert _ulps(np.asarray(got), arg, exact) <= 3.0, name
  assert np.signbit(np.asarray(tnp.sin(tnp.asarray(np.float32([-0.0])))))[0]


def test_donated_memory_is_read_and_written_by_one_kernel(monkeypatch) -> None:
  """An output in a donated input's memory: WebGPU forbids binding one buffer read-only and writable at once,
  so the read goes through a copy; the update is in place and right."""
  _webgpu_or_skip()
  monkeypatch.setenv("DEV", "WEBGPU")
  step = tgfn.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
  w = tnp.asarray(np.float32([1.0, 2.0, 3.0]))
  memory = w.uop.buffer.arg
  new_w = step(w, tnp.asarray(np.float32([2.0, 2.0, 2.0])))
  assert np.asarray(new_w).tolist() == [0.0, 1.0, 2.0] and new_w.uop.buffer.arg == memory
