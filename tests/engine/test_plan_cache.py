"""The jit plan cache (tgfn/engine/plan_cache.py): a jitted function compiled in one process is loaded,
not scheduled, in the next; any change to the graph, its inputs or codegen's settings misses; a damaged
entry is ignored and rewritten."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.device import cache_write
from tgfn.engine import plan_cache
from tgfn.engine.plan_cache import Counters

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
  """A fresh plan cache, consulted: SPEC=1 (the suite's default) bypasses it, as it checks every graph."""
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.delenv("SPEC", raising=False)
  for name in ("hits", "misses", "stores"): monkeypatch.setattr(Counters, name, 0)
  return tmp_path


def _plan_files(folder: Path) -> list[Path]:
  return sorted(p for p in (folder / "plans").glob("*/*") if not p.name.endswith(".tmp"))


def _layer(w, b, x, y):
  return tnp.maximum(x @ w + b, 0.0) * 0.5 - y.sum()


def _inputs(n: int = 4, dtype=np.float32):
  rng = np.random.default_rng(0)
  return [tnp.array(rng.standard_normal(s).astype(dtype)) for s in ((3, 5), (5,), (n, 3), (2,))]


def _counts() -> tuple[int, int, int]:
  return Counters.hits, Counters.misses, Counters.stores


def test_second_compile_loads_the_plan_and_gives_the_same_result(cache):
  first = np.asarray(tgfn.jit(_layer)(*_inputs()))
  assert _counts() == (0, 1, 1) and len(_plan_files(cache)) == 1
  jitted = tgfn.jit(_layer)  # a new function object: compiles again, from the disk plan
  second = np.asarray(jitted(*_inputs()))
  assert _counts() == (1, 1, 1)
  np.testing.assert_array_equal(first, second)
  np.testing.assert_array_equal(np.asarray(jitted(*_inputs())), first)  # and replays as usual


@pytest.mark.parametrize("change", ["shape", "dtype", "scalar constant", "NOOPT", "TRANSCENDENTAL", "donation"])
def test_a_changed_graph_shape_dtype_or_setting_misses(cache, monkeypatch, change):
  def f(w, b, x, y, scale=0.5): return tnp.exp(x @ w + b) * scale - y.sum()
  tgfn.jit(f)(*_inputs())
  assert _counts() == (0, 1, 1)
  inputs, jitted = _inputs(), tgfn.jit(f)
  if change == "shape": inputs = _inputs(n=6)
  if change == "dtype": inputs = _inputs(dtype=np.float64)
  if change == "scalar constant": jitted = tgfn.jit(lambda *a: f(*a, scale=0.25))
  if change in ("NOOPT", "TRANSCENDENTAL"): monkeypatch.setenv(change, "1")
  if change == "donation": jitted = tgfn.jit(f, donate_argnums=2)
  expected = np.exp(np.asarray(inputs[2], np.float64) @ np.asarray(inputs[0], np.float64) + np.asarray(inputs[1])) * \
    (0.25 if change == "scalar constant" else 0.5) - np.asarray(inputs[3], np.float64).sum()
  np.testing.assert_allclose(np.asarray(jitted(*inputs)), expected, rtol=1e-5, atol=1e-5)
  assert _counts() == (0, 2, 2)


def test_captured_constants_are_this_traces_values(cache):
  """The key numbers captured arrays by position, not value: a hit binds the new trace's arrays."""
  def make(c): return tgfn.jit(lambda x: x * c + 1)
  x = tnp.arange(4, dtype=tnp.float32)
  np.testing.assert_array_equal(np.asarray(make(tnp.array(np.full(4, 2, np.float32)))(x)), np.arange(4) * 2 + 1)
  np.testing.assert_array_equal(np.asarray(make(tnp.array(np.full(4, 3, np.float32)))(x)), np.arange(4) * 3 + 1)
  assert _counts() == (1, 1, 1)


@pytest.mark.parametrize("damage", ["truncated", "garbage payload", "inconsistent plan"])
def test_a_damaged_plan_is_ignored_and_rewritten(cache, damage):
  expected = np.asarray(tgfn.jit(_layer)(*_inputs()))
  (path,) = _plan_files(cache)
  if damage == "truncated": path.write_bytes(path.read_bytes()[:100])
  elif damage == "garbage payload": cache_write("plans", path.name, b"{not json")  # a valid frame, bad content
  else:  # well-formed JSON whose slot numbers point past the slots
    payload = json.loads(path.read_bytes()[37:])
    payload["outputs"] = [len(payload["slots"]) + 5]
    cache_write("plans", path.name, json.dumps(payload).encode())
  np.testing.assert_array_equal(np.asarray(tgfn.jit(_layer)(*_inputs())), expected)
  assert _counts() == (0, 2, 2)  # a miss, compiled and stored again
  np.testing.assert_array_equal(np.asarray(tgfn.jit(_layer)(*_inputs())), expected)
  assert _counts() == (1, 2, 2)


def test_a_plan_whose_kernels_cannot_be_loaded_is_recompiled_with_a_warning(cache, monkeypatch):
  expected = np.asarray(tgfn.jit(_layer)(*_inputs()))
  (path,) = _plan_files(cache)
  payload = json.loads(path.read_bytes()[37:])
  payload["kernels"][0][1] = "NO_SUCH_DEVICE"
  cache_write("plans", path.name, json.dumps(payload).encode())
  monkeypatch.setattr("tgfn.device._warned", set())
  with pytest.warns(RuntimeWarning, match="jit plan cache entry whose kernels could not be loaded"):
    np.testing.assert_array_equal(np.asarray(tgfn.jit(_layer)(*_inputs())), expected)
  assert _counts() == (0, 2, 2)


def test_threads_compiling_one_function_at_once_leave_a_sound_plan(cache):
  expected = np.asarray(tgfn.jit(_layer)(*_inputs()))
  for p in _plan_files(cache): p.unlink()
  with ThreadPoolExecutor(4) as pool:
    results = list(pool.map(lambda _: np.asarray(tgfn.jit(_layer)(*_inputs())), range(4)))
  for r in results: np.testing.assert_array_equal(r, expected)
  assert len(_plan_files(cache)) == 1 and not list((cache / "plans").glob("*/*.tmp"))
  np.testing.assert_array_equal(np.asarray(tgfn.jit(_layer)(*_inputs())), expected)
  assert Counters.hits >= 1 and Counters.stores >= 2


def test_donation_is_replayed_from_the_plan(cache):
  step = lambda p, g: p - 0.1 * g  # noqa: E731
  p0, g = np.arange(6, dtype=np.float32), np.ones(6, np.float32)
  for expect_hit in (0, 1):
    p = tnp.array(p0)
    out = tgfn.jit(step, donate_argnums=0)(p, tnp.array(g))
    np.testing.assert_array_equal(np.asarray(out), p0 - np.float32(0.1) * g)
    assert Counters.hits == expect_hit
    with pytest.raises(Exception, match="donated"): np.asarray(p)


def test_lower_after_a_hit_has_full_kernels(cache):
  tgfn.jit(_layer)(*_inputs())
  jitted = tgfn.jit(_layer)
  jitted(*_inputs())
  assert Counters.hits == 1
  assert all(k.linear for k in jitted.lower(*_inputs()).kernels)


def test_graphs_with_a_loop_are_not_kept(cache):
  def f(x): return tgfn.lax.fori_loop(0, 3, lambda i, c: c * 2 + 1, x)
  np.testing.assert_array_equal(np.asarray(tgfn.jit(f)(tnp.zeros(3))), np.full(3, 7.0, np.float32))
  assert _counts() == (0, 0, 0) and not _plan_files(cache)


def test_switches_that_inspect_graphs_bypass_it(cache, monkeypatch):
  monkeypatch.setenv("SPEC", "1")
  tgfn.jit(_layer)(*_inputs())
  assert _counts() == (0, 0, 0)
  monkeypatch.setenv("SPEC", "0")
  monkeypatch.setenv("TGFN_DISABLE_PLAN_CACHE", "1")
  tgfn.jit(_layer)(*_inputs())
  assert _counts() == (0, 0, 0) and plan_cache.enabled() is False


WORKER = textwrap.dedent("""
  import json, sys
  import numpy as np
  import tgfn, tgfn.numpy as tnp
  import tgfn.engine.jit as engine_jit
  from tgfn.engine import realize
  from tgfn.engine.plan_cache import Counters
  calls = {"schedule": 0, "codegen": 0}
  def counting(name, fn):
    def wrapped(*a, **k):
      calls[name] += 1
      return fn(*a, **k)
    return wrapped
  engine_jit.create_schedule = counting("schedule", engine_jit.create_schedule)
  realize.prepare_kernel = counting("codegen", realize.prepare_kernel)
  rng = np.random.default_rng(1)
  w, b, x = (tnp.array(rng.standard_normal(s).astype(np.float32)) for s in ((6, 8), (8,), (4, 6)))
  table = tnp.array(rng.standard_normal(8).astype(np.float32))  # captured by the function
  step = tgfn.jit(lambda w, b, x: (w - 0.1 * tgfn.grad(lambda w: (tnp.tanh(x @ w + b) * table).sum())(w),
                                    (x @ w).max()), donate_argnums=0)
  new_w, top = step(w, b, x)
  print(json.dumps({"w": np.asarray(new_w).tolist(), "top": float(top), "calls": calls,
                    "hits": Counters.hits, "compiled": realize.Counters.kernels_compiled}))
""")


def test_a_warm_process_neither_schedules_nor_generates_code(tmp_path):
  env = {k: v for k, v in os.environ.items() if k not in ("SPEC", "DEBUG", "TGFN_DISABLE_PLAN_CACHE")}
  env.update(TGFN_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))

  def run() -> dict:
    out = subprocess.run([sys.executable, "-c", WORKER], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])

  cold, warm = run(), run()
  assert cold["hits"] == 0 and cold["calls"]["schedule"] == 1 and cold["compiled"] > 0
  assert warm["hits"] == 1 and warm["calls"] == {"schedule": 0, "codegen": 0} and warm["compiled"] == 0
  assert warm["w"] == cold["w"] and warm["top"] == cold["top"]
