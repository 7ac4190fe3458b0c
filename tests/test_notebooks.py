"""Every notebook in notebooks/ executes without error, so the documentation cannot rot."""
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
  nb = nbformat.read(path, as_version=4)
  NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent.parent)}}).execute()
  errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == "error"]
  assert not errors
