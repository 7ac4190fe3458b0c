"""DEV=LLVM against the PYTHON reference: elementwise ops at their edges (casts, division by zero, NaN max,
shifts past the width, half types), reductions, matmul (on the worker pool), gathers, transforms, a jitted
MLP step and a few steps of the main job; each eagerly and under jit, with the optimizer's opts and with
every kernel forced onto 16-lane vectors. Also: tgfn.backends() and the error for a missing llvmlite."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import pytest

import tgfn
import tgfn.lax as lax
import tgfn.numpy as tnp
from tests.codegen.test_vector_ops import _vector_opts  # VECTOR of 16 lanes on the last output axis
from tgfn.engine import realize as realize_mod
from tgfn_drivers import BackendUnavailable, require_backend

try:
  require_backend("LLVM")
  LLVM_MISSING = ""
except BackendUnavailable as e:
  LLVM_MISSING = str(e)
needs_llvm = pytest.mark.skipif(bool(LLVM_MISSING), reason=LLVM_MISSING)

LANES = 16
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextmanager
def on(device: str) -> Iterator[None]:
  with tgfn.Context(DEV=device): yield


def _run(device: str, fn: Callable, inputs: list[np.ndarray], jit: bool) -> list[np.ndarray]:
  with on(device):
    out = (tgfn.jit(fn) if jit else fn)(*[tnp.array(x) for x in inputs])
    return [np.asarray(leaf) for leaf in tgfn.tree_util.tree_leaves(out)]


@pytest.fixture(params=["heuristic", "vector16"])
def opts(request, monkeypatch, tmp_path) -> str:
  """The optimizer's own opts, or every kernel on 16-lane vectors (the reference takes no opts either way).
  Fresh kernel caches, in memory and on disk (a jitted batch's prepared sources are kept there)."""
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  if request.param == "vector16": monkeypatch.setattr(realize_mod, "default_opts", _vector_opts)
  return request.param


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
  """Bit for bit (NaN payloads aside) when rtol is 0, else close; NaN in the same places either way."""
  assert got.dtype == want.dtype and got.shape == want.shape, f"{got.dtype}{got.shape} != {want.dtype}{want.shape}"
  if got.dtype.kind != "f": return np.testing.assert_array_equal(got, want)
  nan = np.isnan(want)
  np.testing.assert_array_equal(np.isnan(got), nan)
  if rtol == 0: np.testing.assert_array_equal(got[~nan].view(f"u{got.itemsize}"), want[~nan].view(f"u{want.itemsize}"))
  else: np.testing.assert_allclose(got[~nan].astype(np.float64), want[~nan].astype(np.float64), rtol=rtol, atol=rtol)


def check(fn: Callable, *inputs: np.ndarray, rtol: float = 0.0) -> None:
  want = _run("PYTHON", fn, list(inputs), jit=False)
  for jit in (False, True):
    got = _run("LLVM", fn, list(inputs), jit)
    assert len(got) == len(want), f"{len(got)} outputs on LLVM, {len(want)} on PYTHON"
    for g, w in zip(got, want): assert_same(g, w, rtol)


FLOATS = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 127.6, -128.9, 255.5, 300.0, 65504.0, 65520.0, 2.0**31, -2.0**31,
                   2.0**32, 2.0**63, -2.0**64, 1e30, -1e30, np.nan, -np.nan, np.inf, -np.inf, 3.3e-39, 1e-7, 6e-8] * 2,
                  np.float32)[:48].reshape(3, 16)
INTS = np.array([0, 1, -1, 2, 7, -7, 31, 32, 33, 63, 64, -(2**31), 2**31 - 1, 100, -100, 5] * 3, np.int32).reshape(3, 16)


def _ints(dtype: str) -> np.ndarray:
  info = np.iinfo(dtype)
  return np.clip(INTS.astype(np.int64), info.min, info.max).astype(dtype)


@needs_llvm
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"])
def test_integer_arithmetic_division_by_zero_and_shifts(dtype, opts):
  a, b = _ints(dtype), np.roll(_ints(dtype), 3, axis=1)
  check(lambda x, y: (x + y, x - y, x * y, lax.div(x, y), lax.rem(x, y), x // y, x % y, tnp.maximum(x, y),
                      x < y, x != y, x & y, x | y, x ^ y, -x), a, b)
  amounts = np.roll(_ints(dtype), 5).astype(dtype)  # amounts past the width, and negative ones (huge unsigned)
  check(lambda x, s: (lax.shift_left(x, s), lax.shift_right_arithmetic(x, s), lax.shift_right_logical(x, s)), a, amounts)
  check(lambda x: (lax.div(x, tnp.zeros_like(x)), x // 3, x % 5, x >> 3, x << 2), a)


@needs_llvm
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_arithmetic_and_nan_propagating_max(dtype, opts):
  a = FLOATS.astype(dtype)
  b = np.roll(a, 7)
  check(lambda x, y: (x + y, x - y, x * y, x / y, tnp.maximum(x, y), tnp.minimum(x, y), x < y, x != y, -x,
                      tnp.where(x < y, x, y), tnp.trunc(x), tnp.sqrt(tnp.abs(x)), tnp.reciprocal(x)), a, b)
  check(lambda x: (tnp.max(x, axis=1), tnp.min(x, axis=0)), a)
  if opts == "vector16":  # (codegen vectorizes 32- and 64-bit lanes only)
    assert any(f"<{LANES} x {'float' if dtype == 'float32' else 'double'}>" in k.source
               for k in realize_mod._compiled.values()), "no kernel was vectorized"


@needs_llvm
@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64", "float16",
                                 "bfloat16", "float32", "float64"])
def test_saturating_float_casts(src, dst, opts):
  check(lambda x: x.astype(dst).astype("float32") if dst == "bfloat16" else x.astype(dst), FLOATS.astype(src))


@needs_llvm
@pytest.mark.parametrize("src", ["bool", "int8", "uint8", "int32", "uint32", "int64", "uint64"])
def test_integer_casts(src, opts):
  x = _ints(src) if src != "bool" else INTS % 2 == 0
  for dst in ("bool", "int8", "uint16", "int32", "uint64", "float16", "float32", "float64"):
    check(lambda v: v.astype(dst), x)


@needs_llvm
def test_half_types_compute_in_float32_and_round_once(opts):
  # 1 + 2^-11 + 2^-40 rounds up to float16's 1 + 2^-10 directly, but to 1.0 through float32 (a tie to even)
  doubles = np.array([1 + 2.0**-11 + 2.0**-40, 65519.99, 65520.0, -2.0**-25, 2.0**-25 * 1.5, 1e-10, np.nan] * 2 + [3.0, 5e-5])
  check(lambda x: x.astype(tnp.float16), np.stack([doubles, -doubles]))
  with np.errstate(over="ignore"): h = FLOATS.astype(np.float16)
  check(lambda x, y: (x + y, x * y, x / y, tnp.maximum(x, y), x.astype(tnp.int16), x.astype(tnp.float32)), h, np.roll(h, 1))
  bf = np.asarray(tnp.array(FLOATS).astype(tnp.bfloat16).astype(tnp.float32))
  check(lambda x: (x.astype(tnp.bfloat16) * 3).astype(tnp.float32), bf)
  check(lambda x: (x.astype(tnp.float16) + 1).sum(axis=1), FLOATS)


@needs_llvm
def test_transcendentals_within_an_ulp(opts):
  x = np.linspace(-20, 20, 64, dtype=np.float32).reshape(4, 16)
  check(lambda v: (tnp.exp(v), tnp.log(tnp.abs(v) + 1), tnp.sin(v), tnp.cos(v), tnp.tanh(v), tnp.exp2(v)), x, rtol=1e-6)


@needs_llvm
def test_reductions(opts):
  rng = np.random.default_rng(0)
  x = rng.standard_normal((8, 48)).astype(np.float32)
  check(lambda v: (v.sum(), v.sum(axis=0), v.max(axis=1), tnp.argmax(v, axis=1), v.mean(axis=0), v.prod(axis=1),
                   tnp.cumsum(v, axis=1)), x, rtol=1e-5)
  i = rng.integers(-1000, 1000, (8, 48)).astype(np.int32)
  check(lambda v: (v.sum(axis=1), v.max(axis=0), tnp.argmin(v, axis=1), (v > 0).any(axis=1)), i)
  check(lambda v: v.sum(), np.ones(20_000, np.float32))  # a long reduction: blocked, exact


@needs_llvm
def test_matmul_small_and_on_the_worker_pool(opts):
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((40, 16)).astype(np.float32)
  check(lambda x, y: (x @ y, x.T @ x), a, b, rtol=1e-4)
  big = rng.standard_normal((256, 256)).astype(np.float32)
  with on("LLVM"):
    got = np.asarray(tnp.array(big) @ tnp.array(big))
  np.testing.assert_allclose(got, big.astype(np.float64) @ big, rtol=1e-4, atol=1e-3)
  sources = [k.source for k in realize_mod._compiled.values() if "define" in k.source]
  if opts == "heuristic": assert any("@tg_parallel_for" in s for s in sources), "the large matmul did not use the pool"


@needs_llvm
def test_gathers(opts):
  x = np.arange(48, dtype=np.float32).reshape(6, 8)
  idx = np.array([[0, 5, 2, 9, -1, 3, 3, 1]] * 2, np.int32)
  check(lambda v, i: (v[i[0] % 6], tnp.take(v, i, axis=1, mode="clip"), tnp.take_along_axis(v[:2], i % 8, axis=1)),
        x, idx)


@needs_llvm
def test_jvp_vjp_and_vmap():
  f = lambda x, w: tnp.tanh(x @ w).sum() * tnp.max(x)  # noqa: E731
  rng = np.random.default_rng(2)
  x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)
  check(lambda a, b: tgfn.jvp(f, (a, b), (tnp.ones_like(a), tnp.zeros_like(b))), x, w, rtol=1e-5)
  check(lambda a, b: tgfn.grad(f, argnums=(0, 1))(a, b), x, w, rtol=1e-5)
  check(lambda a, b: tgfn.vmap(lambda r: f(r[None], b))(a), x, w, rtol=1e-5)


@needs_llvm
def test_a_jitted_mlp_training_step():
  rng = np.random.default_rng(3)
  params = [rng.standard_normal((16, 32)).astype(np.float32) * 0.3, np.zeros(32, np.float32),
            rng.standard_normal((32, 4)).astype(np.float32) * 0.3, np.zeros(4, np.float32)]
  x, y = rng.standard_normal((8, 16)).astype(np.float32), rng.integers(0, 4, 8).astype(np.int32)

  def loss(p, xb, yb):
    h = tnp.maximum(xb @ p[0] + p[1], 0)
    logits = h @ p[2] + p[3]
    logp = logits - tnp.log(tnp.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)) \
        - logits.max(axis=1, keepdims=True)
    return -tnp.take_along_axis(logp, yb[:, None], axis=1).mean()

  def step(w0, b0, w1, b1, xb, yb):
    p = [w0, b0, w1, b1]
    value, grads = tgfn.value_and_grad(loss)(p, xb, yb)
    return value, [a - 0.1 * g for a, g in zip(p, grads)]
  check(step, *params, x, y, rtol=1e-5)


@needs_llvm
def test_a_few_steps_of_the_main_job():
  pytest.importorskip("sklearn")
  args = [sys.executable, "-m", "tgfn.train_digits", "--steps", "3", "--hidden", "8", "--batch", "4"]
  outs = {dev: subprocess.run(args, env={**os.environ, "DEV": dev}, capture_output=True, text=True, timeout=600)
          for dev in ("LLVM", "PYTHON")}
  for dev, proc in outs.items(): assert proc.returncode == 0, f"{dev}: {proc.stderr}"
  assert "device LLVM" in outs["LLVM"].stdout
  numbers = {dev: [float(v) for v in re.findall(r"(?:loss|accuracy) ([0-9.]+)", proc.stdout)] for dev, proc in outs.items()}
  np.testing.assert_allclose(numbers["LLVM"], numbers["PYTHON"], atol=2e-4)


@needs_llvm
def test_kernels_compile_in_process():
  from tgfn_drivers.cpu import CompilerRuns
  before = CompilerRuns.count
  with on("LLVM"):
    out = np.asarray(tnp.array(np.arange(5, dtype=np.float32)) * 3 + 0.25)
  np.testing.assert_array_equal(out, np.arange(5, dtype=np.float32) * 3 + 0.25)
  assert CompilerRuns.count == before, "a compiler process was started for an LLVM kernel"


@needs_llvm
def test_without_a_c_compiler_threaded_kernels_run_on_one_thread(tmp_path):
  script = ("import numpy as np, tgfn.numpy as tnp\n"
            "b = np.arange(200 * 200, dtype=np.float32).reshape(200, 200) % 7\n"
            "assert (np.asarray(tnp.array(b) @ tnp.array(b)) == b @ b).all()\n")
  env = {**os.environ, "DEV": "LLVM", "CC": "no-such-compiler", "TGFN_CACHE_DIR": str(tmp_path)}
  proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr
  assert "LLVM kernels run on one thread: the CPU worker pool needs a C compiler" in proc.stderr


def test_backends_lists_each_with_what_to_install():
  listed = {b.name: b for b in tgfn.backends()}
  assert list(listed) == ["CPU", "PYTHON", "LLVM", "OPENCL", "CUDA", "WEBGPU"]
  assert listed["PYTHON"].available
  for b in listed.values():
    assert b.available == (b.reason == "") == (b.install == ""), b
  assert listed["LLVM"].available == (LLVM_MISSING == "")


def test_selecting_llvm_without_llvmlite_says_what_to_install():
  script = ("import sys; sys.modules['llvmlite'] = None\n"  # as if it were not installed
            "import tgfn.numpy as tnp\n"
            "(tnp.array([1.0]) + 1).numpy()\n")
  proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "DEV": "LLVM"}, capture_output=True,
                        text=True, timeout=120, cwd=ROOT)
  assert proc.returncode != 0
  assert "BackendUnavailable" in proc.stderr and "llvmlite is not installed" in proc.stderr, proc.stderr
  assert "pip install 'tgfn[llvm]'" in proc.stderr
