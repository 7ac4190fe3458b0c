"""The research programs of bench/programs/, written once against JAX's API, run on tgfn by passing the module
instead of `jax`, and give JAX's losses step for step (small configurations of each)."""
import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import tgfn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
try:
  programs = {name: importlib.import_module(f"programs.{name}") for name in ("transformer", "vae", "neural_ode", "convnet")}
finally:
  sys.path.pop(0)

SMALL = {
  "transformer": SimpleNamespace(layers=1, heads=2, d=16, context=8, batch=2, vocab=65, lr=3e-3),
  "vae": SimpleNamespace(hidden=16, latent=4, batch=8, lr=1e-3),
  "neural_ode": SimpleNamespace(hidden=8, steps=5, dt=0.05, batch=4, lr=3e-3),
  "convnet": SimpleNamespace(channels=(4, 8), batch=8, lr=1e-3),
}


def losses(framework, name: str, steps: int = 3) -> list[float]:
  program = programs[name].build(framework, SMALL[name])
  state, out = program.init(), []
  for i in range(steps):
    state, loss = program.step(state, program.batch(i))
    out.append(float(loss))
  return out


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_program_written_for_jax_runs_on_tgfn_with_jaxs_losses(name):
  jax = pytest.importorskip("jax")
  ours = losses(tgfn, name)
  assert np.all(np.isfinite(ours)), ours
  np.testing.assert_allclose(ours, losses(jax, name), rtol=2e-4, atol=1e-5)
