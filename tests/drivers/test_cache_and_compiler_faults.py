"""Faults around the CPU driver's compiler and caches: each is either survived with one warning or a
clear error that names what to change -- never a raw OSError from deep inside."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import tgfn
import tgfn.numpy as tnp
from tgfn import device as device_module
from tgfn_drivers import cpu
from tgfn_drivers.cpu import CCompiler

REPO = os.path.dirname(os.path.dirname(os.path.abspath(tgfn.__file__)))
KERNEL_SRC = "void k(float* restrict data0) { data0[0] = 42.0f; }\n"


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
  monkeypatch.setattr(device_module, "_warned", set())
  monkeypatch.setattr(cpu, "_unloadable_roots", set())


def _run_new_kernels(count: int, salt: float) -> list[warnings.WarningMessage]:
  """Compile and run `count` kernels never seen before in this process; return the warnings they gave."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for i in range(count):
      value = salt + i / 64
      # a constant made by full() is baked into the kernel (a Python scalar operand would be a kernel argument)
      np.testing.assert_array_equal(np.asarray(tnp.arange(3, dtype=tnp.float32) + tnp.full(3, value, tnp.float32)),
                                    np.arange(3, dtype=np.float32) + np.float32(value))
  return [w for w in caught if issubclass(w.category, RuntimeWarning)]


def test_unwritable_cache_warns_once_and_runs_uncached(monkeypatch):
  def refuse(path, data): raise PermissionError(13, "Permission denied", str(path))
  monkeypatch.setattr(device_module, "write_atomic", refuse)  # root ignores chmod, so refuse the write itself
  caught = _run_new_kernels(2, 1000.25)
  assert len(caught) == 1 and "cannot write the kernel cache" in str(caught[0].message)
  assert "TGFN_CACHE_DIR" in str(caught[0].message)


def test_uncreatable_cache_folder_warns_once_and_runs_uncached(monkeypatch, tmp_path):
  (tmp_path / "a-file").write_text("")
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
  caught = _run_new_kernels(2, 2000.25)
  assert len(caught) == 1 and "cannot create the kernel cache folder" in str(caught[0].message)


def test_a_cache_entry_that_is_a_folder_is_a_miss(monkeypatch, tmp_path):
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path))
  compiler = CCompiler()
  key = hashlib.sha256((compiler.cachekey + "\0" + KERNEL_SRC).encode()).hexdigest()
  (tmp_path / "kernels" / key[:2] / key).mkdir(parents=True)
  with pytest.warns(RuntimeWarning, match="cannot write the kernel cache entry"):
    binary = compiler.compile_cached(KERNEL_SRC)
  assert binary[:4] == b"\x7fELF"


def test_cc_naming_no_executable_is_an_error_naming_cc(monkeypatch):
  monkeypatch.setenv("CC", "/nonexistent")
  with pytest.raises(RuntimeError, match="CC='/nonexistent' names no executable"):
    CCompiler().compile(KERNEL_SRC)


def test_a_compiler_that_writes_nothing_is_a_clear_error(monkeypatch):
  monkeypatch.setenv("CC", "echo")
  with pytest.raises(RuntimeError, match="C compiler 'echo' exited successfully but wrote no shared object"):
    CCompiler().compile(KERNEL_SRC)


def _noexec_loader(monkeypatch, tmp_path, blocked: list[str]):
  """Make loading from the given folders fail as the kernel does on a noexec mount."""
  real = cpu._dlopen
  def dlopen(path: str):
    if any(path.startswith(b) for b in blocked):
      raise OSError(f"{path}: failed to map segment from shared object")
    return real(path)
  monkeypatch.setattr(cpu, "_dlopen", dlopen)


def test_noexec_tmpdir_falls_back_to_the_cache_folder_with_one_warning(monkeypatch, tmp_path):
  monkeypatch.setenv("TMPDIR", str(tmp_path / "noexec"))
  _noexec_loader(monkeypatch, tmp_path, [str(tmp_path / "noexec")])
  caught = _run_new_kernels(2, 3000.25)
  assert len(caught) == 1
  assert "failed to map segment" in str(caught[0].message) and "TMPDIR" in str(caught[0].message)


def test_noexec_everywhere_is_an_error_saying_what_to_set(monkeypatch, tmp_path):
  monkeypatch.setenv("TMPDIR", str(tmp_path / "noexec"))
  monkeypatch.setenv("TGFN_CACHE_DIR", str(tmp_path / "noexec-cache"))
  _noexec_loader(monkeypatch, tmp_path, [str(tmp_path)])
  with pytest.raises(RuntimeError, match="(?s)failed to map segment.*set TMPDIR or TGFN_CACHE_DIR"):
    cpu.CPUProgram("k", CCompiler().compile(KERNEL_SRC))


def _leftovers(folder) -> list[str]:
  return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or not any(p.iterdir()))


def test_a_compile_killed_with_sigkill_leaves_no_growing_litter(tmp_path):
  """Kill the whole process group mid-compile twice, then run normally: at most one killed run's folder
  exists at any time, and after a clean run nothing is left."""
  marker, tmpdir, cache = tmp_path / "compiling", tmp_path / "tmp", tmp_path / "cache"
  tmpdir.mkdir()
  slow_cc = tmp_path / "slow-cc"
  slow_cc.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 600\n")
  slow_cc.chmod(0o755)
  script = "import tgfn.numpy as tnp; print((tnp.arange(3) * 7).tolist())"
  env = {**os.environ, "TMPDIR": str(tmpdir), "TGFN_CACHE_DIR": str(cache)}
  for run in range(2):
    proc = subprocess.Popen([sys.executable, "-c", script], env={**env, "CC": str(slow_cc)}, cwd=REPO,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not marker.exists():  # the compiler is running
      assert proc.poll() is None, "the run ended before compiling"
      try:
        proc.wait(0.05)
      except subprocess.TimeoutExpired:
        pass
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    marker.unlink()
    # the folder of the run just killed may remain; the one before it is gone
    stale = [p for p in tmpdir.rglob("*") if p.is_dir() and p.name != f"tgfn-{os.getuid()}"]
    assert len(stale) <= 1, _leftovers(tmpdir)
  done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True)
  assert done.stdout.strip() == "[0, 7, 14]", done.stderr
  assert _leftovers(tmpdir) == [f"tgfn-{os.getuid()}"]


def _running(pid: int) -> bool:
  """Whether process `pid` exists and has not exited (a zombie waiting for its parent has)."""
  try:
    with open(f"/proc/{pid}/stat") as f: return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


def _group_members(group: int) -> list[int]:
  """The running processes of process group `group`."""
  members = []
  for pid in (int(entry) for entry in os.listdir("/proc") if entry.isdigit()):
    try:
      with open(f"/proc/{pid}/stat") as f: fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):  # (it exited meanwhile)
      continue
    if fields[0] != "Z" and int(fields[2]) == group: members.append(pid)
  return members


def _survivors(started: list[list[int]]) -> list[int]:
  """Of the fake compilers' (driver, child, group) rows: the processes still running."""
  return sorted(p for driver, child, group in started for p in {driver, child, *_group_members(group)} if _running(p))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
@pytest.mark.parametrize("script", [
  "import tgfn.numpy as tnp; print((tnp.arange(3) * 7).tolist())",  # one kernel
  "import tgfn, tgfn.numpy as tnp; print(tgfn.jit(lambda x: tnp.sin(x) + tnp.exp(x).sum())(tnp.ones(3)).tolist())",
], ids=["eager", "jit-batch"])
def test_an_interrupted_compile_takes_its_compiler_processes_with_it(tmp_path, stop, script):
  """A compile interrupted by Ctrl-C (SIGINT: KeyboardInterrupt in the compiling process), or whose process is
  killed outright, leaves no compiler process running: neither the driver nor what it started (its cc1).
  The fake compiler starts such a child and records both pids and its process group."""
  pids = tmp_path / "pids"
  slow_cc = tmp_path / "slow-cc"
  slow_cc.write_text(textwrap.dedent(f"""\
    #!/bin/sh
    case "$*" in *-dM*) exec cc "$@";; esac  # the target query answers at once
    sleep 600 &
    read -r stat < /proc/$$/stat; set -- $stat
    echo "$$ $! $5" >> {pids}
    wait
    """))
  slow_cc.chmod(0o755)
  env = {**os.environ, "CC": str(slow_cc), "TMPDIR": str(tmp_path), "TGFN_CACHE_DIR": str(tmp_path / "cache")}
  proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=REPO, start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  started: list[list[int]] = []
  try:
    while not pids.exists():  # until a compile is running
      assert proc.poll() is None, "the run ended before compiling"
      try:
        proc.wait(0.05)
      except subprocess.TimeoutExpired:
        pass
    os.kill(proc.pid, stop)
    proc.wait(60)
    started = [[int(n) for n in line.split()] for line in pids.read_text().splitlines()]
    deadline = time.monotonic() + 30  # (the processes are signalled at once; a loaded machine may take a moment)
    while (survivors := _survivors(started)) and time.monotonic() < deadline: time.sleep(0.05)
    assert not survivors, f"compiler processes {survivors} outlived a compile stopped by {stop.name}"
  finally:
    if proc.poll() is None: proc.kill()
    for pid in {p for row in started for p in row[:2]}:
      if _running(pid): os.kill(pid, signal.SIGKILL)
