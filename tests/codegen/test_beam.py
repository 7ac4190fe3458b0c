"""BEAM=n kernel search (tgfn/codegen/search.py): searched kernels compute what the reference does, the
winner is cached on disk per kernel and machine, a corrupt entry is rebuilt, a wrong candidate is never
chosen. Tiny kernels and a small candidate budget keep each test to a few compiles."""
from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.codegen import search
from tgfn.codegen.search import SearchCounters, outputs_match
from tgfn.device import Device
from tgfn.dtype import dtypes
from tgfn.engine import realize as realize_mod
from tests.conftest import panel_columns


@pytest.fixture
def beam(tmp_path, monkeypatch):
  """BEAM=2 with an empty cache folder of its own, a small search, and an empty in-memory kernel cache."""
  monkeypatch.setenv("BEAM", "2")
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  monkeypatch.setenv("DEV", "CPU")
  monkeypatch.setattr(search, "MAX_CANDIDATES", 3)
  monkeypatch.setattr(search, "MAX_ROUNDS", 1)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  return tmp_path


def _inputs():
  rng = np.random.default_rng(0)
  return rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  # + ones, not + 1.0: an eager Python scalar is a kernel parameter, and such kernels are not searched
  return np.asarray(tnp.array(a) @ tnp.array(b) + tnp.ones(b.shape[1]))


def _counts() -> tuple[int, int, int]:
  return SearchCounters.searches, SearchCounters.runs, SearchCounters.cache_hits


def _entries(cache):
  return sorted(p for p in (cache / "beam").rglob("*") if p.is_file())


def test_searched_kernels_equal_the_reference(beam, monkeypatch, capsys):
  a, b = _inputs()
  searches = SearchCounters.searches
  got = _matmul(a, b)
  assert SearchCounters.searches > searches, "BEAM=2 did not search"
  assert "BEAM=2" in capsys.readouterr().err  # the progress line
  monkeypatch.setenv("DEV", "PYTHON")
  np.testing.assert_allclose(got, _matmul(a, b), rtol=2e-5, atol=1e-5)


def test_second_compile_reads_the_cache_and_times_nothing(beam, monkeypatch):
  a, b = _inputs()
  first = _matmul(a, b)
  assert _entries(beam), "the search wrote no cache entry"
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())  # as a new process would start
  searches, runs, hits = _counts()
  np.testing.assert_array_equal(_matmul(a, b), first)
  assert (SearchCounters.searches, SearchCounters.runs) == (searches, runs)
  assert SearchCounters.cache_hits == hits + len(_entries(beam))


@pytest.mark.parametrize("damage", ["payload", "truncate"])
def test_a_corrupt_cache_entry_is_ignored_and_rebuilt(beam, monkeypatch, damage):
  a, b = _inputs()
  want = _matmul(a, b)
  entries = _entries(beam)
  head = len(search._MAGIC) + 32  # magic, payload hash, payload
  for p in entries:  # another valid opt list under the old hash, or a torn write
    blob = p.read_bytes()
    p.write_bytes(blob[:head] + b'{"opts": []}' if damage == "payload" else blob[:20])
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  searches = SearchCounters.searches
  np.testing.assert_allclose(_matmul(a, b), want, rtol=2e-5, atol=1e-5)
  assert SearchCounters.searches == searches + len(entries)
  assert all(search._MAGIC in p.read_bytes() and len(p.read_bytes()) > 60 for p in entries)  # rewritten whole


def test_the_key_depends_on_the_machine(beam, monkeypatch):
  a, b = _inputs()
  _matmul(a, b)
  searches = SearchCounters.searches
  compiler = Device["CPU"].compiler
  other = compiler.target_macros() + "#define ANOTHER_CPU 1\n"
  monkeypatch.setattr(compiler, "target_macros", lambda: other)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  _matmul(a, b)
  assert SearchCounters.searches > searches, "a winner timed on another machine was reused"


def test_the_in_memory_cache_keys_on_beam(beam, monkeypatch):
  a, b = _inputs()
  monkeypatch.delenv("BEAM")
  _matmul(a, b)
  monkeypatch.setenv("BEAM", "2")
  searches = SearchCounters.searches
  _matmul(a, b)
  assert SearchCounters.searches > searches, "BEAM=2 reused the heuristic's kernels from memory"


def test_beam_is_ignored_on_the_reference_interpreter(beam, monkeypatch):
  monkeypatch.setenv("DEV", "PYTHON")
  searches = SearchCounters.searches
  _matmul(*_inputs())
  assert SearchCounters.searches == searches and not (beam / "beam").exists()


def test_a_wrong_candidate_is_never_chosen(beam, monkeypatch):
  """Every candidate but the heuristic's (the first program the search loads) does nothing -- the
  fastest kernel there is, and a wrong one: the search must keep the heuristic's."""
  dev = Device["CPU"]
  real, first = dev.runtime, []

  def runtime(name, binary):
    if not first: first.append(binary)
    program = real(name, binary)
    return program if binary == first[0] else (lambda *args: None)
  monkeypatch.setattr(dev, "runtime", runtime)
  x = np.arange(64, dtype=np.float32).reshape(8, 8)
  got = np.asarray(tnp.array(x) * 2.0 + 1.0)
  np.testing.assert_array_equal(got, x * 2 + 1)
  (searched,) = realize_mod._compiled.values()
  monkeypatch.delenv("BEAM")
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  np.asarray(tnp.array(x) * 2.0 + 1.0)
  (heuristic,) = realize_mod._compiled.values()
  assert searched.opts == heuristic.opts


def test_outputs_match_allows_reordering_only():
  want = np.array([1.0, -2.0, 0.0, np.nan, np.inf], np.float32)
  assert outputs_match(want + np.float32(1e-6), want, dtypes.float32)  # sums in another order
  assert not outputs_match(np.array([1.0, -2.0, 0.01, np.nan, np.inf], np.float32), want, dtypes.float32)
  assert not outputs_match(np.array([1.0, -2.0, 0.0, 0.0, np.inf], np.float32), want, dtypes.float32)  # NaN moved
  assert outputs_match(np.array([3, 4]), np.array([3, 4]), dtypes.int32)
  assert not outputs_match(np.array([3, 5]), np.array([3, 4]), dtypes.int32)  # integers: exact


def test_beam_must_be_a_width(monkeypatch):
  monkeypatch.setenv("BEAM", "two")
  with pytest.raises(ValueError, match="BEAM= must be a beam width"): search.beam_width()


def test_jit_beam_argument_overrides_the_variable(beam, monkeypatch):
  x = np.arange(64, dtype=np.float32).reshape(8, 8)
  monkeypatch.delenv("BEAM")
  searches = SearchCounters.searches
  np.testing.assert_array_equal(np.asarray(tgfn.jit(lambda v: v * 3.0, beam=2)(tnp.array(x))), x * 3)
  assert SearchCounters.searches == searches + 1
  monkeypatch.setenv("BEAM", "2")
  np.testing.assert_array_equal(np.asarray(tgfn.jit(lambda v: v * 5.0, beam=0)(tnp.array(x))), x * 5)
  assert SearchCounters.searches == searches + 1
  with pytest.raises(ValueError, match="beam must be a beam width"): tgfn.jit(lambda v: v, beam=-1)(tnp.array(x))


def test_the_search_varies_the_heuristic_and_swaps_loops(beam, monkeypatch):
  """After the heuristic's list, the search tries it varied one opt at a time (another tile amount, an opt
  left out); the rounds also try exchanging two output loops."""
  monkeypatch.setattr(search, "MAX_CANDIDATES", 200)
  calls: list[list] = []  # the candidates of each _evaluate call
  evaluate = search._Search._evaluate
  monkeypatch.setattr(search._Search, "_evaluate", lambda self, cands: calls.append(cands) or evaluate(self, cands))
  rng = np.random.default_rng(0)
  a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
  np.testing.assert_allclose(np.asarray(tnp.array(a) @ tnp.array(b) + tnp.ones(64)), a @ b + 1, rtol=2e-5, atol=1e-4)
  # the contraction's search: its first calls time the heuristic's list alone (twice), the next its neighbours
  at = next(i for i, c in enumerate(calls) if len(c) == 1 and any(o.op is search.OptOps.UPCAST for o in c[0]))
  (heuristic,) = calls[at]
  at = next(i for i in range(at + 1, len(calls)) if calls[i] != [heuristic])
  neighbours = calls[at]
  upcast = next(i for i, o in enumerate(heuristic) if o.op is search.OptOps.UPCAST)
  assert heuristic[:upcast] + heuristic[upcast + 1:] in neighbours
  assert any(len(c) == len(heuristic) and c[upcast].op is search.OptOps.UPCAST and c[upcast] != heuristic[upcast]
             and c[:upcast] == heuristic[:upcast] for c in neighbours)
  extended = [c for call in calls[at + 1:] for c in call]
  assert any(c[-1].op is search.OptOps.SWAP for c in extended)


def test_the_search_varies_blocks_of_rows(beam, monkeypatch):
  """A heuristic list that cuts the column panels into groups (BLOCK) is varied with groups of other lengths,
  and the rounds try cutting an output loop into blocks; every candidate still computes the product."""
  from tgfn.codegen import heuristic
  panel = panel_columns()
  monkeypatch.setattr(heuristic, "PANEL_GROUP_BYTES", 2 * 64 * panel * 4)
  monkeypatch.setattr(search, "MAX_CANDIDATES", 200)
  calls: list[list] = []
  evaluate = search._Search._evaluate
  monkeypatch.setattr(search._Search, "_evaluate", lambda self, cands: calls.append(cands) or evaluate(self, cands))
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 8 * panel)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(tnp.array(a) @ tnp.array(b) + tnp.ones(8 * panel)), a @ b + 1, rtol=2e-5, atol=1e-4)
  heuristic_list = next(c[0] for c in calls if len(c) == 1 and any(o.op is search.OptOps.BLOCK for o in c[0]))
  block = next(i for i, o in enumerate(heuristic_list) if o.op is search.OptOps.BLOCK)
  tried = [c for call in calls for c in call]
  assert any(len(c) == len(heuristic_list) and c[block].op is search.OptOps.BLOCK and c[block] != heuristic_list[block]
             for c in tried)
  assert any(c and c[-1].op is search.OptOps.BLOCK for c in tried)


def test_a_winner_must_beat_the_heuristic_clearly():
  """The search's winner replaces the heuristic only when its median time is CONFIRM_GAIN faster: a draw
  (or a win by noise) keeps the heuristic."""
  from tgfn.codegen.search import CONFIRM_GAIN, clearly_faster
  heuristic = [1.0, 1.02, 0.98, 1.01, 0.99]
  assert not clearly_faster([0.99, 1.0, 0.985, 1.01, 0.99], heuristic)  # 1% faster: a draw
  assert clearly_faster([t * (1 - 2 * CONFIRM_GAIN) for t in heuristic], heuristic)
  assert not clearly_faster(heuristic, heuristic)
