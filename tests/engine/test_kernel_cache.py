"""The in-memory kernel cache is bounded (TGFN_KERNEL_CACHE_SIZE), and a CPU kernel's shared object is
unloaded once neither the cache nor a jitted function holds its program."""
from __future__ import annotations

import gc
import re
import sys

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn.engine import realize

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")


def _mapped_kernel_objects() -> int:
  with open("/proc/self/maps") as f:
    return len(set(re.findall(r"\S*/tgfn[^\s]*\.so", f.read())))


def _run_new_kernels(count: int, salt: float) -> None:
  for i in range(count):
    value = np.float32(salt + i / 64)
    # full() bakes its value into the kernel (a Python scalar operand would be a kernel argument)
    np.testing.assert_array_equal(np.asarray(tnp.arange(4, dtype=tnp.float32) * tnp.full(4, value, tnp.float32)),
                                  np.arange(4, dtype=np.float32) * value)


def test_kernel_cache_is_bounded_and_unreferenced_kernels_are_unloaded(monkeypatch):
  monkeypatch.setenv("DEV", "CPU")
  monkeypatch.setenv("TGFN_KERNEL_CACHE_SIZE", "8")
  jitted = tgfn.jit(lambda x: x * 3.25 + 1)
  x = tnp.arange(5, dtype=tnp.float32)
  expected = np.arange(5, dtype=np.float32) * np.float32(3.25) + 1
  np.testing.assert_array_equal(np.asarray(jitted(x)), expected)
  _run_new_kernels(8, 7000.5)
  gc.collect()
  before = _mapped_kernel_objects()
  _run_new_kernels(40, 8000.5)
  gc.collect()
  assert len(realize._compiled) <= 8
  assert _mapped_kernel_objects() <= before  # 40 new kernels, but only the cached ones stay mapped
  # the jitted function's kernel left the cache long ago; the function still holds (and runs) it
  np.testing.assert_array_equal(np.asarray(jitted(x)), expected)
