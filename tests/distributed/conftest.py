import pytest


@pytest.fixture(autouse=True)
def _four_cpu_devices(monkeypatch):
  """Four CPU device instances (virtual devices are cheap): CPU, CPU:1, CPU:2, CPU:3."""
  monkeypatch.setenv("TGFN_CPU_DEVICES", "4")
