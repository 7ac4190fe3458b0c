"""Shared test setup: every op test runs on each device (CPU and the PYTHON reference interpreter).

TGFN_TEST_DEVICE=LLVM (or any name `tgfn.backends()` lists) runs the suite on that device instead of the
CPU: it is the default device of every test, and the `device` fixture's pair becomes (it, PYTHON). Tests
of one driver's own machinery (the C compiler's batching and cache, the CPU worker pool) pin DEV=CPU
and still run there."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from tgfn.helpers import settings as tgfn_settings

# The default profile is deterministic: every run (a fresh clone, CI) draws the same examples, and a
# failure prints the @reproduce_failure blob that replays it. HYPOTHESIS_PROFILE=explore searches with
# random seeds and more examples (each failure still prints its blob).
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
settings.register_profile("tgfn", deadline=None, max_examples=25, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=_SUPPRESSED)
settings.register_profile("explore", deadline=None, max_examples=200, print_blob=True,
                          suppress_health_check=_SUPPRESSED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tgfn"))

TEST_DEVICE = os.environ.get("TGFN_TEST_DEVICE", "").strip().upper() or "CPU"
DEVICES = list(dict.fromkeys([TEST_DEVICE, "PYTHON"]))


def pytest_addoption(parser) -> None:
  parser.addoption("--fuzz", action="store_true",
                   help="run the fuzzers in tests/fuzz long: TGFN_FUZZ examples per test (default 2000)")


def pytest_configure(config) -> None:
  if config.getoption("--fuzz"): os.environ.setdefault("TGFN_FUZZ", "2000")  # read by tests/fuzz/settings.py
  if TEST_DEVICE != "CPU":
    from tgfn_drivers import BackendUnavailable, require_backend
    if TEST_DEVICE not in {b.name for b in __import__("tgfn").backends()}:
      raise pytest.UsageError(f"TGFN_TEST_DEVICE={TEST_DEVICE!r} is not a backend; tgfn.backends() lists them")
    try:
      require_backend(TEST_DEVICE)
    except BackendUnavailable as e:
      raise pytest.UsageError(str(e)) from e
    # from collection on, so that arrays a test module builds at import live on the test device too
    os.environ["DEV"] = TEST_DEVICE
    tgfn_settings.reload("DEV")


def pytest_collection_modifyitems(config, items) -> None:
  """A test marked needs_64bit (its point is a 64-bit dtype) is skipped, with its reason, on a device without
  64-bit numbers (WEBGPU); any other failure there fails."""
  if TEST_DEVICE == "CPU":
    return
  from tgfn.device import has_64bit
  if has_64bit(TEST_DEVICE):
    return
  for item in items:
    if (mark := item.get_closest_marker("needs_64bit")) is not None:
      item.add_marker(pytest.mark.skip(reason=f"needs 64-bit numbers, which {TEST_DEVICE} has not: {mark.args[0]}"))


# Which tests ran on TGFN_TEST_DEVICE: the default device while the test body ran (autouse fixtures pin some
# modules to the CPU, and the `device` fixture's partner is PYTHON); the summary counts them apart
_DEFAULT_DEVICE = pytest.StashKey[str]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  from tgfn.device import Device
  item.stash[_DEFAULT_DEVICE] = Device.DEFAULT
  yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  outcome = yield
  if call.when == "call": outcome.get_result().user_properties.append(("default_device", item.stash.get(_DEFAULT_DEVICE, "?")))


def pytest_terminal_summary(terminalreporter) -> None:
  """On TGFN_TEST_DEVICE: how many tests ran with it as their default device, by outcome."""
  if TEST_DEVICE == "CPU": return
  counts: dict[tuple[str, bool], int] = {}
  for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
    if report.when != "call": continue
    on_it = dict(report.user_properties).get("default_device") == TEST_DEVICE
    counts[report.outcome, on_it] = counts.get((report.outcome, on_it), 0) + 1
  line = ", ".join(f"{counts.get((o, True), 0)} {o}" for o in ("passed", "failed"))
  other = sum(n for (o, on_it), n in counts.items() if not on_it)
  terminalreporter.write_line(f"on {TEST_DEVICE}: {line}; {other} more ran with another default device "
                              "(pinned to the CPU, or the PYTHON partner of the device fixture)")


class _SettingsMonkeyPatch(pytest.MonkeyPatch):
  """monkeypatch whose setenv/delenv of a tgfn setting take effect at once: tgfn reads the environment into
  `tgfn.settings` at import, and `settings.reload` is its documented way to read it again."""
  def setenv(self, name: str, value: str, prepend=None) -> None:
    super().setenv(name, value, prepend)
    tgfn_settings.reload(name)

  def delenv(self, name: str, raising: bool = True) -> None:
    super().delenv(name, raising)
    tgfn_settings.reload(name)

  def undo(self) -> None:
    super().undo()
    tgfn_settings.reload()  # also drops what the test set with tgfn.config.update


@pytest.fixture
def monkeypatch():
  patch = _SettingsMonkeyPatch()
  yield patch
  patch.undo()


@pytest.fixture(autouse=True)
def _test_device(monkeypatch) -> None:
  """The default device of every test: TGFN_TEST_DEVICE (a test asking for `device` overrides it)."""
  if TEST_DEVICE != "CPU": monkeypatch.setenv("DEV", TEST_DEVICE)


@pytest.fixture(params=DEVICES)
def device(request, monkeypatch) -> str:
  """Run the test with `request.param` as the default device."""
  monkeypatch.setenv("DEV", request.param)
  return request.param


@pytest.fixture(autouse=True)
def _isolated_cache_and_spec_checks(tmp_path_factory, monkeypatch):
  """Kernels compile into a per-run cache, and every graph is checked against tgfn/uop/spec.py."""
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tgfn-cache"))
  monkeypatch.setenv("SPEC", "1")


def panel_columns(large: bool = False) -> int:
  """The float32 columns of a tiled contraction's panel on this machine: two vectors (16 with AVX2, 32 with
  AVX-512), or for a `large` one (SMALL_TILE_WORK or more) with 32 registers four (64 with AVX-512)."""
  from tgfn.codegen.heuristic import WIDE_TILE_REGISTERS, WIDE_TILE_VECTORS
  from tgfn.device import Device
  renderer = Device["CPU"].renderer
  vectors = WIDE_TILE_VECTORS if large and renderer.registers >= WIDE_TILE_REGISTERS else 2
  return vectors * renderer.vector_bytes // 4


def assert_close(actual, expected, rtol: float = 1e-6, atol: float = 1e-6, check_dtype: bool = True) -> None:
  """Compare a tgfn Array (or anything array-like) with a NumPy reference: values, shape, and dtype."""
  got = np.asarray(actual)
  want = np.asarray(expected)
  assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
  if check_dtype: assert got.dtype == want.dtype, f"dtype {got.dtype} != expected {want.dtype}"
  if want.dtype.kind in "biu": np.testing.assert_array_equal(got, want)
  else: np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
