"""A folder named `tgfn` in the current directory (a clone of the repository) must not break imports
with a confusing error: tgfn names the folder that shadows it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tgfn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(tgfn.__file__)))

# What an editable install (setuptools >= 64) adds: a finder *after* the path finder, so a stray `tgfn`
# folder on sys.path wins the top-level name while submodules still resolve to the real files.
_EDITABLE_LIKE = textwrap.dedent(f"""
  import sys
  from importlib.machinery import PathFinder
  from importlib.util import spec_from_file_location
  class EditableLike:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
      folder = {REPO!r} + "/" + fullname
      if fullname in ("tgfn", "tgfn_drivers"):
        return spec_from_file_location(fullname, folder + "/__init__.py", submodule_search_locations=[folder])
      parent, _, child = fullname.rpartition(".")
      if parent in ("tgfn", "tgfn_drivers"): return PathFinder.find_spec(fullname, [{REPO!r} + "/" + parent])
      return None
  sys.meta_path.insert(sys.meta_path.index(PathFinder) + 1, EditableLike)
  sys.path.insert(0, "")  # as `python -c` does: the current directory first
""")


@pytest.mark.parametrize("module", ["tgfn.numpy", "tgfn.transforms.trace", "tgfn.device"])
def test_clone_in_current_directory_gives_a_clear_error(tmp_path, module):
  (tmp_path / "tgfn").mkdir()  # the clone: no __init__.py at its top
  proc = subprocess.run([sys.executable, "-c", _EDITABLE_LIKE + f"import {module}"], cwd=tmp_path,
                        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
  assert proc.returncode != 0
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("ImportError"), proc.stderr
  assert str(tmp_path / "tgfn") in last and "shadows the real package" in last


def test_shadowed_drivers_package_is_named(tmp_path):
  (tmp_path / "tgfn_drivers").mkdir()
  code = _EDITABLE_LIKE + "import tgfn\ntgfn.Device['CPU']"
  proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": ""})
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("ImportError") and str(tmp_path / "tgfn_drivers") in last, proc.stderr

