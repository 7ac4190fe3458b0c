"""Process replay: kernels compiled while TGFN_CAPTURE is set are recorded, a capture compared with
itself shows no change, and a renderer that prints differently shows up as changed kernels."""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import tgfn.numpy as tnp
from tgfn.device import Device
from tgfn.engine import realize
from tgfn.tools import process_replay as pr


def corpus() -> None:
  """A small fixed workload: an elementwise kernel, a reduction and a broadcast."""
  x = tnp.array(np.arange(12, dtype=np.float32).reshape(3, 4))
  np.asarray(tnp.exp(x) * 2 + 1)
  np.asarray(x.sum(axis=1))
  np.asarray(x - x.max(axis=0, keepdims=True))


def capture_in_process(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
  out.mkdir()
  with monkeypatch.context() as m:
    m.setenv("TGFN_CAPTURE", str(out))
    m.setattr(realize, "_compiled", OrderedDict())  # compile (and so record) every kernel again
    corpus()


def test_capture_compare_and_changed_renderer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
  device = "CPU"  # a C comment is a harmless change to its source
  monkeypatch.setenv("DEV", device)
  capture_in_process(tmp_path / "a", monkeypatch)
  kernels = pr.index(tmp_path / "a")
  assert len(kernels) >= 3 and {d for d, _ in kernels} == {device}
  entry = next(iter(kernels.values()))
  assert pr.ast_of(entry).op.name == "SINK" and pr.canonical_ast(pr.ast_of(entry)) == entry["ast_text"]

  capture_in_process(tmp_path / "b", monkeypatch)
  same = pr.differences(tmp_path / "a", tmp_path / "b")
  assert not same["changed"] and not same["only_old"] and not same["only_new"] and len(same["same"]) == len(kernels)

  renderer = type(Device[device].renderer)
  original = renderer.render
  # only the reduction kernels (named r_...) print differently
  monkeypatch.setattr(renderer, "render", lambda self, name, *a: original(self, name, *a) +
                      ("\n// changed" if name.startswith("r_") else ""))
  capture_in_process(tmp_path / "c", monkeypatch)
  diff = pr.differences(tmp_path / "a", tmp_path / "c")
  text = pr.report(diff, True, "a", "c")
  assert diff["changed"], text
  assert not diff["only_old"] and not diff["only_new"]
  assert sorted(after["name"] for _, after in diff["changed"]) == ["r_1_4", "r_3"], text
  assert "+// changed" in text and f"changed: {device} " in text
