"""tgfn.settings: read from the environment once, overridden by config.update and Context blocks
(nestable, thread-safe), recorded by each VIZ capture (tgfn/helpers.py)."""
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
import tgfn.viz
from tgfn.helpers import SWITCHES, Context, settings

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_values_are_typed_attributes_with_defaults():
  assert settings.DEBUG == 0 and settings.NOOPT is False and settings.DEV == "CPU"
  assert settings.TGFN_KERNEL_CACHE_SIZE == 4096 and settings.TGFN_MPI_TIMEOUT == 300.0
  assert tgfn.settings is settings and tgfn.Context is Context
  with pytest.raises(AttributeError, match="read-only"):
    settings.DEBUG = 3


def test_contexts_nest_and_restore():
  with Context(DEBUG=2, BEAM=1):
    assert settings.DEBUG == 2 and settings.BEAM == "1"
    with Context(DEBUG=4):
      assert settings.DEBUG == 4 and settings.BEAM == "1"
    assert settings.DEBUG == 2
  assert settings.DEBUG == 0 and settings.BEAM == "0"


def test_one_context_object_entered_twice():
  ctx = Context(NOOPT=True)
  with ctx:
    with ctx:
      assert settings.NOOPT
    assert settings.NOOPT
  assert not settings.NOOPT


def test_blocks_in_two_threads_leave_in_any_order():
  """Thread A enters, B enters, A leaves (before B): B's value must survive A's exit, and once B leaves
  nothing of either is left."""
  a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
  seen = {}

  def thread_a():
    with Context(DEBUG=3):
      a_in.set()
      b_in.wait()
    a_out.set()

  def thread_b():
    a_in.wait()
    with Context(STRICT_FLOAT=True):
      b_in.set()
      a_out.wait()
      seen["after a left"] = (settings.DEBUG, settings.STRICT_FLOAT)
  threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert seen["after a left"] == (0, True)
  assert settings.DEBUG == 0 and settings.STRICT_FLOAT is False


def test_config_update_and_reload(monkeypatch):
  tgfn.config.update("DEBUG", 1)
  assert settings.DEBUG == 1 and tgfn.config.read("DEBUG") == 1
  with Context(DEBUG=5):
    assert settings.DEBUG == 5  # a block wins inside itself
  assert settings.DEBUG == 1
  tgfn.config.update("log_compiles", True)  # JAX's name
  assert settings.TGFN_LOG_COMPILES is True
  monkeypatch.setitem(os.environ, "DEBUG", "2")  # os.environ changed after import: not seen until reload
  assert settings.DEBUG == 1
  settings.reload()
  assert settings.DEBUG == 2


def test_bad_values_and_names_are_refused():
  with pytest.raises(ValueError, match="setting DEBUG: cannot read 'lots' as integer"):
    Context(DEBUG="lots")
  with pytest.raises(ValueError, match="unknown tgfn setting 'DEBUGG'"):
    Context(DEBUGG=1)
  with pytest.raises(ValueError, match="unknown tgfn setting"):
    tgfn.config.update("no_such_option", 1)


def test_the_environment_is_read_at_import():
  script = "import tgfn; s = tgfn.settings; print(s.DEBUG, s.NOOPT, s.BEAM, s.TGFN_KERNEL_CACHE_SIZE)"
  env = {**os.environ, "DEBUG": "0", "NOOPT": "1", "BEAM": "3", "TGFN_KERNEL_CACHE_SIZE": "12", "PYTHONPATH": str(ROOT)}
  out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
  assert out.stdout.split() == ["0", "True", "3", "12"], out.stderr


def test_a_capture_records_the_settings_in_effect():
  x = tnp.array(np.arange(29, dtype=np.float32))
  with tgfn.viz.record() as rec:
    with Context(NOOPT=True, STRICT_FLOAT=True):
      (x * 3 - 1).numpy()
    tgfn.jit(lambda x: x * 5 + 2)(x).numpy()
  eager, jitted = rec.recorder.captures[0], rec.recorder.captures[-1]
  assert eager.settings["NOOPT"] is True and eager.settings["STRICT_FLOAT"] is True
  assert jitted.settings["NOOPT"] is False
  assert "NOOPT=True" in rec.html()


def test_settings_change_the_compiled_plan():
  """A realize under other codegen settings compiles again (plans key on settings.code_key)."""
  x = tnp.array(np.arange(31, dtype=np.float32))
  before = settings.code_key
  with Context(NOOPT=True):
    assert settings.code_key != before
    with tgfn.viz.record() as rec:
      (x * 7 + 3).numpy()
  assert rec.recorder.captures and rec.recorder.captures[0].settings["NOOPT"] is True


def test_docs_list_every_setting():
  text = (ROOT / "docs" / "observability.md").read_text()
  missing = [name for name in SWITCHES if f"`{name}`" not in text]
  assert not missing, f"docs/observability.md does not list {missing}"
