"""The device contract: registry, errors, the on-disk compile cache, moving data between devices."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tests.conftest import assert_close
from tgfn.device import Device, cache_dir
from tgfn_drivers.cpu import CCompiler, find_c_compiler

KERNEL_SRC = "void k(float* restrict data0) { data0[0] = 42.0f; }\n"


def test_unknown_device_lists_the_available_ones(monkeypatch):
  with pytest.raises(ValueError, match="unknown device 'TPU'.*CPU.*PYTHON"):
    Device["TPU"]
  monkeypatch.setenv("DEV", "NOPE")
  with pytest.raises(ValueError, match="unknown device 'NOPE'"):
    tnp.array([1.0])


def test_device_names_are_case_insensitive():
  assert Device["cpu"] is Device["CPU"]


def test_missing_c_compiler_is_a_clear_error(monkeypatch, tmp_path):
  monkeypatch.setenv("PATH", str(tmp_path))
  monkeypatch.setenv("CC", "definitely-not-a-compiler")
  with pytest.raises(RuntimeError, match="needs a C compiler.*DEV=PYTHON"):
    find_c_compiler()


def test_compile_errors_show_the_source():
  with pytest.raises(RuntimeError, match="(?s)C compilation failed.*this is not C"):
    CCompiler().compile("this is not C")


def test_compiled_kernels_are_cached_on_disk_and_corrupt_entries_rebuilt(monkeypatch, tmp_path):
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  compiler = CCompiler()
  first = compiler.compile_cached(KERNEL_SRC)
  entries = [p for p in (cache_dir() / "kernels").rglob("*") if p.is_file()]
  assert len(entries) == 1
  entries[0].write_bytes(entries[0].read_bytes()[:-10] + b"corrupted!")
  assert compiler.compile_cached(KERNEL_SRC) == first
  assert entries[0].read_bytes().endswith(first)


def test_two_processes_compiling_the_same_kernel_both_succeed(tmp_path):
  script = textwrap.dedent(f"""
    from tgfn_drivers.cpu import CCompiler
    print(len(CCompiler().compile_cached({KERNEL_SRC!r})))
  """)
  env = {"TGFN_CACHE_DIR": str(tmp_path), "PATH": __import__("os").environ["PATH"]}
  procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE) for _ in range(2)]
  outs = [p.communicate()[0] for p in procs]
  assert all(p.returncode == 0 for p in procs)
  assert outs[0] == outs[1] and int(outs[0]) > 0
  assert not list(tmp_path.rglob("*.tmp"))


def test_device_put_moves_data_between_devices():
  x = tnp.array(np.arange(6, dtype=np.float32))
  y = tgfn.device_put(x * 2, "PYTHON")
  assert y.device == "PYTHON"
  z = tgfn.device_put(y + 1, "CPU")
  assert z.device == "CPU"
  assert_close(z, np.arange(6, dtype=np.float32) * 2 + 1)


def test_mixing_devices_without_device_put_is_an_error():
  """Arrays committed to two devices cannot meet (an uncommitted one follows: test_committed_arrays.py)."""
  a = tgfn.device_put(tnp.array([1.0, 2.0]), "CPU")
  b = tgfn.device_put(tnp.array([1.0, 2.0]), "PYTHON")
  with pytest.raises(ValueError, match="different devices.*device_put"):
    a + b


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.int64, np.bool_])
def test_cpu_matches_the_python_reference_interpreter(dtype):
  rng = np.random.default_rng(0)
  data = (rng.standard_normal((5, 7)) * 20).astype(dtype)

  def program(x):
    y = x * x + x
    return (y.max(0), (x >= x.min()).astype(tnp.int32).sum(1), y[::2, 1:4].reshape(-1))

  cpu = program(tgfn.device_put(tnp.array(data), "CPU"))
  ref = program(tgfn.device_put(tnp.array(data), "PYTHON"))
  for c, r in zip(cpu, ref):
    np.testing.assert_array_equal(np.asarray(c), np.asarray(r))


def test_debug_levels_print_kernels_and_source(monkeypatch, capsys):
  monkeypatch.setenv("DEBUG", "4")
  x = tnp.array(np.ones((3, 5), np.float32))
  (x * 7.5 + 1).sum(1).numpy()
  out = capsys.readouterr().out
  assert "realized 1 output(s) with 1 kernel(s)" in out
  assert "void r_3" in out and "acc" in out   # the generated C
  assert "GFLOP/s" in out                     # the per-kernel line of DEBUG=2


def test_constant_graphs_follow_the_default_device_of_the_moment(monkeypatch):
  assert_close(tnp.full((2,), 3.0) * 2, np.full(2, 6.0, np.float32))   # computed on the CPU
  monkeypatch.setenv("DEV", "PYTHON")
  again = tnp.full((2,), 3.0) * 2                                     # the same graph, now on PYTHON
  assert again.device == "PYTHON"
  assert_close(again + tnp.ones(2), np.full(2, 7.0, np.float32))
