"""Every notebook in notebooks/ executes without error, so the documentation cannot rot; the quickstart
shows its pictures (digit images, a loss curve, a drawn graph) and the messages it advertises."""
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def _execute(path: pathlib.Path) -> nbformat.NotebookNode:
  nb = nbformat.read(path, as_version=4)
  NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent.parent)}}).execute()
  return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
  if path.name == "quickstart.ipynb": pytest.skip("executed, and its outputs checked, by test_quickstart_shows_pictures")
  nb = _execute(path)
  errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == "error"]
  assert not errors


def test_quickstart_shows_pictures():
  pytest.importorskip("matplotlib")
  nb = _execute(pathlib.Path(__file__).parent.parent / "notebooks" / "quickstart.ipynb")
  outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
  assert not [o for o in outputs if o.output_type == "error"]
  assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2      # digit images, the loss curve
  assert any('<svg class="graph"' in o.get("data", {}).get("text/html", "") for o in outputs)  # a drawn graph
  text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
  assert "\nvoid " in text                                # the kernel's source from its signature, not mid-word
  assert "needs a concrete value" in text and "\n  at " in text   # the error names the user's line
