"""A vector square root on the CPU is one x86 builtin (NativeCRenderer.vector_sqrt), not a lane loop (which
stays scalar code at LIGHT_OPT's -O1), and equals the PYTHON reference bit for bit."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.codegen.opts import Opt, OptError, OptOps, kernel_axes
from tgfn.codegen.pipeline import optimize
from tgfn.device import Device
from tgfn.engine import realize as realize_mod
from tgfn.uop.ops import AxisType


def _vector_opts(lanes: int):
  def opts(ast, renderer) -> list[Opt]:
    if not renderer.supports_opts: return []
    opt = Opt(OptOps.VECTOR, len([a for a in kernel_axes(ast) if a.kind is not AxisType.REDUCE]) - 1, lanes)
    try:
      optimize(ast, [opt])
    except OptError:
      return []
    return [opt]
  return opts


def _sqrt(x: np.ndarray, device: str, lanes: int, monkeypatch) -> tuple[np.ndarray, list[str]]:
  monkeypatch.setenv("DEV", device)
  monkeypatch.setattr(realize_mod, "_compiled", OrderedDict())
  monkeypatch.setattr(realize_mod, "default_opts", _vector_opts(lanes))
  out = np.asarray(tgfn.jit(lambda v: tnp.sqrt(v))(tnp.array(x)))
  return out, [k.source for k in realize_mod._compiled.values()]


@pytest.mark.parametrize("dtype, lanes", [("float32", 4), ("float32", 8), ("float32", 16), ("float64", 2), ("float64", 4),
                                          ("float64", 8)])
def test_vector_sqrt_is_one_builtin_and_exact(dtype, lanes, monkeypatch):
  renderer = Device["CPU"].renderer
  if lanes * np.dtype(dtype).itemsize > renderer.vector_bytes: pytest.skip(f"no {dtype}x{lanes} vectors on this CPU")
  builtin = renderer.vector_sqrt.get(f"{dtype}x{lanes}")
  assert builtin is not None, f"this CPU has {dtype}x{lanes} vectors but no square root builtin for them"
  rng = np.random.default_rng(0)
  edges = [0.0, -0.0, 1.0, 2.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, 3.3e-39, 1e30]
  x = np.concatenate([edges, np.abs(rng.standard_normal(64 - len(edges))) * 1e3]).astype(dtype)
  got, sources = _sqrt(x, "CPU", lanes, monkeypatch)
  want, _ = _sqrt(x, "PYTHON", lanes, monkeypatch)
  nan = np.isnan(want)
  np.testing.assert_array_equal(np.isnan(got), nan)
  np.testing.assert_array_equal(got[~nan].view(f"u{got.itemsize}"), want[~nan].view(f"u{want.itemsize}"))
  assert any(builtin.split("(")[0] in s for s in sources), "the square root was not the vector builtin"
  assert not any("_l++" in s for s in sources), "a vector square root was computed lane by lane"
