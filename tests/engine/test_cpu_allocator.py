"""The CPU allocator: large blocks are whole 2 MiB pages marked for transparent huge pages."""
from __future__ import annotations

import numpy as np

import tgfn.numpy as tnp
from tgfn_drivers import cpu


def test_large_blocks_are_huge_page_aligned_and_marked(monkeypatch):
  calls = []
  real = cpu._madvise
  monkeypatch.setattr(cpu, "_madvise", lambda ptr, size, advice: (calls.append((ptr, size, advice)), real(ptr, size, advice))[1])
  allocator = cpu.MallocAllocator()
  small = allocator.alloc(cpu.MallocAllocator.HUGE_BLOCK - 64)
  assert calls == []
  nbytes = cpu.MallocAllocator.HUGE_BLOCK + 12348
  big = allocator.alloc(nbytes)
  [(ptr, size, advice)] = calls
  assert ptr == big and ptr % (2 << 20) == 0 and size % (2 << 20) == 0 and size >= nbytes and advice == 14
  data = np.arange(nbytes // 4, dtype=np.float32)
  allocator.copyin(big, memoryview(data).cast("B"))
  assert np.frombuffer(allocator.copyout(big, nbytes), np.float32)[-1] == data[-1]
  allocator.free(big)
  allocator.free(small)


def test_without_madvise_large_blocks_still_work(monkeypatch):
  monkeypatch.setattr(cpu, "_madvise", None)
  x = np.random.default_rng(0).standard_normal(3 << 20).astype(np.float32)  # 12 MiB
  np.testing.assert_array_equal(np.asarray(tnp.array(x) * 2), x * 2)


def test_prefault_maps_whole_pages_around_a_block_and_keeps_its_contents(monkeypatch):
  calls = []
  real = cpu._madvise
  monkeypatch.setattr(cpu, "_madvise", lambda ptr, size, advice: (calls.append((ptr, size, advice)), real(ptr, size, advice))[1])
  allocator = cpu.MallocAllocator()
  nbytes = 300_000
  block = allocator.alloc(nbytes)
  data = np.arange(nbytes // 4, dtype=np.float32)
  allocator.copyin(block, memoryview(data).cast("B"))
  allocator.prefault(block, nbytes)
  [(ptr, size, advice)] = calls
  assert advice == 23 and ptr % 4096 == 0 and size % 4096 == 0 and ptr <= block and block + nbytes <= ptr + size
  np.testing.assert_array_equal(np.frombuffer(allocator.copyout(block, nbytes), np.float32), data)
  allocator.free(block)
