"""Arrays committed to a device other than the default one (docs/backends.md, "Which device an operation
runs on"): every op runs where its committed operand lives, as in JAX. Uncommitted operands (arrays made
without naming a device) and the constants an op makes for itself (iotas, masks, zeros) follow it; two
operands committed to different devices are an error naming both and the user's line.

The default device stays CPU while the operands are committed to PYTHON (always present), OPENCL (where
an OpenCL runtime is installed) or WEBGPU (where headless Chromium has a WebGPU adapter). The op suite is
driven by tests/op_registry.py (every elementwise function and reduction, against NumPy) and by the STRUCTURAL table
of tests/transforms/test_grad_registry.py (movement, indexing, scatter, contractions, convolution, against
the same function on the default device, itself checked against NumPy elsewhere)."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.op_registry import ALL_RECORDS, OpRecord, Tol
from tests.strategies import assert_matches, cast_host, reference
from tests.transforms.test_grad_registry import STRUCTURAL, Case, seed_of
from tests.transforms.test_vmap_registry import domain_values, record_fn
from tgfn.dtype import DType, dtypes, result_type
from tgfn.engine.realize import Counters
from tgfn.tree import flatten


def _opencl_missing() -> str:
  from tgfn_drivers import opencl
  try:
    opencl.runtime()
  except opencl.OpenCLUnavailable as e:
    return str(e)
  return ""


def _webgpu_missing() -> str:
  from tgfn_drivers import BackendUnavailable
  try:
    from tgfn_drivers import webgpu
    webgpu.browser()
  except (BackendUnavailable, RuntimeError) as e:
    return str(e)
  return ""


_MISSING = {"PYTHON": lambda: "", "OPENCL": _opencl_missing, "WEBGPU": _webgpu_missing}


@pytest.fixture(params=["PYTHON", "OPENCL", "WEBGPU"])
def target(request: Any, monkeypatch: Any) -> str:
  """The device the operands are committed to; the default device is CPU."""
  monkeypatch.setenv("DEV", "CPU")
  if why := _MISSING[request.param](): pytest.skip(f"{request.param} is not available here: {why}")
  return request.param


def _wgsl_limits_skip(test: Callable[..., None]) -> Callable[..., None]:
  """On WEBGPU, a kernel that needs a 64-bit type (float32 sort keys packed in uint64, a float64 step of
  floor_divide, NumPy's int64 indices) stops at WGSL's documented limit (docs/backends.md), whatever the
  placement: that test is skipped, naming the limit."""
  @functools.wraps(test)
  def run(target: str, *args: Any, **kwargs: Any) -> None:
    try:
      test(target, *args, **kwargs)
    except NotImplementedError as e:
      if target != "WEBGPU" or "WGSL (DEV=WEBGPU) has no" not in str(e): raise
      pytest.skip(f"a limit of WGSL, not of placement: {str(e).splitlines()[0]}")
  return run


def _dtype_for(rec: OpRecord, i: int) -> DType:
  """float32 where the argument takes it (WGSL has no 64-bit types), else int32, else its first dtype."""
  options = rec.dtypes_of(i)
  return next((dt for dt in (dtypes.float32, dtypes.int32) if dt in options), options[0])


def _reduction_reference(rec: OpRecord, host: np.ndarray, dt: DType) -> tuple[np.ndarray, Tol]:
  """tests/ops/test_reduction.py's reference for a reduction over axis 1 (kept), and its tolerance."""
  kwargs = dict(rec.kwargs, keepdims=True) if rec.keepdims else dict(rec.kwargs)
  comp, out = rec.compute(dt), rec.result_dtype(dt)
  operand = cast_host(host, comp)
  with np.errstate(all="ignore"):
    want = cast_host(rec.ref(operand.astype(np.float64) if comp.is_float else operand, 1, **kwargs), out)
  if not out.is_float: return want, None
  finite = operand[np.isfinite(operand)].astype(np.float64)
  scale, count, eps = float(np.abs(finite).max(initial=0.0)), host.shape[1], float(np.finfo(np.float32).eps)
  base = rec.tol[out]
  return want, Tol(base.rtol + 4 * eps * count, base.atol + 4 * eps * count * scale ** rec.scale_power)


def _assert_on(target: str, got: Any, what: str) -> None:
  for leaf in flatten(got)[0]: assert leaf.device == target, f"{what}: ran on {leaf.device}, not {target}"


@pytest.mark.parametrize("rec", ALL_RECORDS, ids=str)
@_wgsl_limits_skip
def test_record_runs_where_its_committed_operand_is(target: str, rec: OpRecord) -> None:
  """The first operand is committed to `target`, the others are uncommitted arrays on the default device:
  they move to `target`, and so do the iotas and masks that argmax, cumsum, sort... make."""
  f, shapes = record_fn(rec, axis=1)
  rng = np.random.default_rng(seed_of(rec.name))
  dts = [_dtype_for(rec, i) for i in range(rec.nargs)]
  hosts = [domain_values(rec.domain(i), dt, s, rng) for i, (dt, s) in enumerate(zip(dts, shapes))]
  args = [tnp.array(h, dtype=dt) for h, dt in zip(hosts, dts)]
  got = f(tgfn.device_put(args[0], target), *args[1:])
  _assert_on(target, got, rec.name)
  out = rec.result_dtype(dts[0] if rec.kind == "reduction" else result_type(*dts))
  if rec.kind == "reduction": want, tol = _reduction_reference(rec, hosts[0], dts[0])
  else: want, tol = reference(rec, hosts, dts), rec.tol.get(out)
  assert_matches(got, want, out, tol, f"{rec.name} on {target}")


@pytest.mark.parametrize("case", STRUCTURAL, ids=str)
@_wgsl_limits_skip
def test_structural_op_runs_where_its_committed_operands_are(target: str, case: Case) -> None:
  hosts = [h.astype(np.float32) for h in case.args(np.random.default_rng(seed_of(case.name)))]
  got = case.fn(*[tgfn.device_put(tnp.array(h), target) for h in hosts])
  _assert_on(target, got, case.name)
  for g, w in zip(flatten(got)[0], flatten(case.fn(*map(tnp.array, hosts)))[0]):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=2e-6, err_msg=case.name)


def test_the_issue_examples(target: str) -> None:
  """Issue 28, item 3: each of these ran on the default device reading the other device's memory."""
  x = tgfn.device_put(tnp.arange(4.0), target)
  if target != "WEBGPU":  # (WGSL has no uint64 for sort's keys)
    np.testing.assert_array_equal(tnp.sort(-x).numpy(), [-3, -2, -1, 0])
  np.testing.assert_array_equal(tnp.cumsum(x).numpy(), [0, 1, 3, 6])
  np.testing.assert_array_equal(tnp.cumprod(x + 1).numpy(), [1, 2, 6, 24])
  np.testing.assert_array_equal(tnp.where(tnp.arange(4) < 2, x, 0.0).numpy(), [0, 1, 0, 0])
  assert int(tnp.argmax(x)) == 3 and int(tnp.argmin(x)) == 0
  for out in (tnp.cumsum(x), tnp.where(tnp.arange(4) < 2, x, 0.0), tnp.argmax(x)): assert out.device == target


def test_constants_and_creation_like_ops_follow(target: str) -> None:
  host = np.arange(6.0, dtype=np.float32).reshape(2, 3)
  x = tgfn.device_put(tnp.array(host), target)
  outs = {"zeros_like": x + tnp.zeros_like(x), "ones_like": x * tnp.ones_like(x),
          "full_like": tnp.full_like(x, 2) - x,
          "eye": tnp.eye(2, 3) * x, "arange mask": tnp.where(tnp.arange(3) % 2 == 0, x, -1.0),
          "linspace": x + tnp.linspace(0, 1, 3), "tril": tnp.tril(x), "indices": x[tnp.array([1, 0])],
          "at.set": x.at[tnp.array([0])].set(tnp.array([7.0, 8.0, 9.0]))}
  wants = {"zeros_like": host, "ones_like": host, "full_like": 2 - host, "eye": np.eye(2, 3) * host,
           "arange mask": np.where(np.arange(3) % 2 == 0, host, -1), "linspace": host + np.linspace(0, 1, 3),
           "tril": np.tril(host), "indices": host[[1, 0]], "at.set": np.array([[7, 8, 9], [3, 4, 5]])}
  for name, out in outs.items():
    assert out.device == target, f"{name}: ran on {out.device}"
    np.testing.assert_allclose(out.numpy(), wants[name], rtol=1e-6, err_msg=name)


def test_host_calls_follow(target: str) -> None:
  """LAPACK and FFT run on the host; their results come back to the committed operand's device."""
  a = np.array([[4.0, 1.0], [1.0, 3.0]], np.float32)
  x = tgfn.device_put(tnp.array(a), target)
  np.testing.assert_allclose(tnp.linalg.inv(x).numpy(), np.linalg.inv(a), rtol=1e-5)
  solved = tnp.linalg.solve(x, tnp.ones(2))
  np.testing.assert_allclose(solved.numpy(), np.linalg.solve(a, np.ones(2)), rtol=1e-5)
  np.testing.assert_allclose(tnp.abs(tnp.fft.fft(x[0])).numpy(), np.abs(np.fft.fft(a[0])), rtol=1e-5)
  for out in (tnp.linalg.inv(x), solved, tnp.fft.fft(x[0])): assert out.device == target


def test_transforms_follow(target: str) -> None:
  x = tgfn.device_put(tnp.array([1.0, 2.0, 3.0]), target)
  f = lambda v: (tnp.cumsum(v) * tnp.arange(3.0)).sum()
  g = tgfn.grad(f)(x)
  assert g.device == target
  np.testing.assert_allclose(g.numpy(), [3.0, 3.0, 2.0])  # d/dv_j of sum_i i * cumsum_i = sum_{i >= j} i
  y = tgfn.jit(tnp.cumsum)(x)
  np.testing.assert_allclose(y.numpy(), [1.0, 3.0, 6.0])
  assert y.device == target and tnp.cumsum(y).device == target  # a jitted function's result stays committed
  uncommitted = tnp.array([1.0, 2.0, 4.0])  # an argument on the default device follows the committed one
  for transformed in (tgfn.jit(tnp.multiply), tgfn.vmap(tnp.multiply)):
    out = transformed(x, uncommitted)
    assert out.device == target
    np.testing.assert_allclose(out.numpy(), [1.0, 4.0, 12.0])
  np.testing.assert_allclose(tgfn.vmap(tnp.argmax)(tnp.stack([x, -x])).numpy(), [2, 0])


def test_an_uncommitted_operand_is_computed_on_the_committed_device(target: str) -> None:
  """power(x, n) with n uncommitted: n's bit tests run inside the one kernel on x's device, not in a kernel
  on the default device whose 30-odd outputs are each copied over (past WebGPU's 10 buffers a kernel)."""
  x = tgfn.device_put(tnp.array([2, 3], dtype=tnp.int32), target)
  before = Counters.kernels_launched
  np.testing.assert_array_equal(tnp.power(x, tnp.array([5, 7], dtype=tnp.int32)).numpy(), [32, 2187])
  assert Counters.kernels_launched - before == 1


def test_plans_tell_committed_from_uncommitted_buffers(monkeypatch: Any) -> None:
  """Two graphs alike but for a buffer's commitment run on different devices: they need different plans."""
  monkeypatch.setenv("DEV", "PYTHON")
  loose = tnp.array([1.0, 2.0])  # made while PYTHON was the default: uncommitted, on PYTHON
  monkeypatch.setenv("DEV", "CPU")
  a, pinned = tnp.array([10.0, 20.0]), tgfn.device_put(tnp.array([1.0, 2.0]), "PYTHON").realize()
  for b, device in ((pinned, "PYTHON"), (loose, "CPU")):  # without a committed operand: the first one's device
    out = a + b
    np.testing.assert_array_equal(out.numpy(), [11.0, 22.0])
    assert out.device == device


def test_a_computed_value_stays_committed(target: str) -> None:
  y = tgfn.device_put(tnp.array([1.0, 2.0]), target) * 2
  y.numpy()  # now a buffer: still committed, so an uncommitted operand still follows it
  assert (tnp.array([1.0, 1.0]) + y).device == target
  assert (tgfn.device_put(tnp.array([1.0]), "CPU") + 1).device == "CPU"
  assert not tgfn.device_put(tnp.array([1.0])).uop.committed  # without a device, as in JAX: uncommitted


def test_two_committed_devices_are_an_error_at_the_users_line(target: str) -> None:
  x = tgfn.device_put(tnp.arange(3.0), target)
  on_cpu = tgfn.device_put(tnp.arange(3.0), "CPU")
  with pytest.raises(ValueError, match=rf"different devices \['CPU', '{target}'\].*device_put") as error:
    x + on_cpu  # noqa: B018
  assert "test_committed_arrays.py" in str(error.value) and "x + on_cpu" in str(error.value)
  with pytest.raises(ValueError, match="different devices"): tnp.where(x > 1, x, on_cpu)
  with pytest.raises(ValueError, match="different devices"): tnp.concatenate([x, on_cpu])
  indices = tgfn.device_put(tnp.array([0, 2]), "CPU")  # ops that do not promote their operands check too
  with pytest.raises(ValueError, match="different devices"): x[indices]
  with pytest.raises(ValueError, match="different devices"): x.at[indices].add(1.0)
