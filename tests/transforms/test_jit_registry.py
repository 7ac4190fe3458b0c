"""jit(f)(*args) equals f(*args) run eagerly, in values (NaN included), shapes and dtypes, for every record
of tests/op_registry.py in each of a few dtypes it takes, and for every function of the STRUCTURAL table
(movement, indexing, linear algebra) in float32 and int32. Each jitted function is called twice, on two
draws of the same signature: the second call replays the compiled kernels on new buffers without
retracing. The sweeps run on CPU only; one smoke test runs on the PYTHON reference device."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.op_registry import ALL_RECORDS, REDUCTIONS, OpRecord
from tests.transforms.test_grad_registry import STRUCTURAL, Case, seed_of
from tests.transforms.test_vmap_registry import assert_same, domain_values, record_fn
from tgfn.dtype import DType, dtypes
from tgfn.tree import flatten

# buffers of 2, 4 and 1 bytes (the compiled graph plans their memory); float16 also takes the path that
# computes half types in float32 and rounds once
JIT_DTYPES = (dtypes.float16, dtypes.float32, dtypes.int32, dtypes.bool)


@pytest.fixture(autouse=True)
def _cpu_unless_device(request: Any, monkeypatch: Any) -> None:
  """The sweeps run on CPU whatever DEV says; a test that asks for the `device` fixture picks its own."""
  if "device" not in request.fixturenames: monkeypatch.setenv("DEV", "CPU")


def check_jit_matches_eager(f: Callable[..., Any], draws: Sequence[Sequence[np.ndarray]], what: str) -> None:
  """jit(f) on each draw (all of one signature) equals f eagerly, and traces only once."""
  jitted = tgfn.jit(f)
  for hosts in draws:
    args = [tnp.array(h) for h in hosts]
    assert_same(jitted(*args), flatten(f(*args))[0], what)
  assert jitted.trace_count == 1, f"{what}: retraced for the same signature"


def record_draws(rec: OpRecord, dt: DType, shapes: Sequence[tuple[int, ...]]) -> list[list[np.ndarray]]:
  rng = np.random.default_rng(seed_of(rec.name + dt.name))
  options = [rec.dtypes_of(i) for i in range(rec.nargs)]
  arg_dts = [dt if dt in opts else opts[0] for opts in options]  # a where's condition stays bool
  return [[domain_values(rec.domain(i), d, s, rng) for i, (d, s) in enumerate(zip(arg_dts, shapes))]
          for _ in range(2)]


@pytest.mark.parametrize("rec", ALL_RECORDS, ids=str)
def test_record_jit_equals_eager(rec: OpRecord) -> None:
  f, shapes = record_fn(rec, axis=1)
  for dt in JIT_DTYPES:
    if dt in rec.dtypes: check_jit_matches_eager(f, record_draws(rec, dt, shapes), f"{rec.name}[{dt.name}]")


@pytest.mark.parametrize("case", STRUCTURAL, ids=str)
def test_structural_jit_equals_eager(case: Case) -> None:
  rng = np.random.default_rng(seed_of(case.name))
  for dt in (np.float32, np.int32):
    draws = [[(a * 10).astype(dt) for a in case.args(rng)] for _ in range(2)]
    check_jit_matches_eager(case.fn, draws, f"{case.name}[{np.dtype(dt).name}]")


@pytest.mark.parametrize("rec", REDUCTIONS, ids=str)
def test_reduction_over_all_axes_jit_equals_eager(rec: OpRecord) -> None:
  """The sweep above reduces over axis 1; here each reduction also runs over the whole array."""
  f, shapes = record_fn(rec, axis=None)
  check_jit_matches_eager(f, record_draws(rec, dtypes.float32, shapes), f"{rec.name}[axis=None]")


def test_an_output_that_is_an_input_is_each_calls_own_input() -> None:
  """A jitted identity (tnp.positive, abs of a bool, floor of an int) returns its traced input: each call
  must return its own argument, not the one of the call that compiled."""
  jitted = tgfn.jit(lambda x, y: (x, y * 2, tnp.positive(y)))
  for k in (1.0, 5.0):
    x, y = tnp.array([k, k + 1]), tnp.array([k * 10])
    got = jitted(x, y)
    assert_same(got, [x, y * 2, y], "identity outputs")


@pytest.mark.parametrize("device", ["PYTHON"], indirect=True)
def test_smoke_on_the_reference_device(device: str) -> None:
  """An elementwise function, a reduction and a gather, jitted on the PYTHON interpreter."""
  f = lambda x, n: (tnp.tanh(x) * n, (x * x).sum(0), x[np.array([1, 0, 1])])
  rng = np.random.default_rng(0)
  draw = [rng.uniform(-1, 1, (3,)).astype(np.float32), np.arange(3, dtype=np.int32)]
  check_jit_matches_eager(f, [draw, [d * 2 for d in draw]], "smoke")
