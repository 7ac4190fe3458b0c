"""Per-process scratch folders: where the C compiler writes and shared objects are loaded from.

Each process works in `<root>/<host>-<pid>`, removed at exit. A process killed without cleaning up
(SIGKILL) leaves its folder behind; the next process that uses the same root removes every folder of
its host whose process is gone, so leftovers never accumulate. The host is part of the name because a
cache folder may be shared by machines or containers whose process ids mean nothing to each other.
"""
from __future__ import annotations

import atexit
import os
import shutil
import socket
import threading
from pathlib import Path

_HOST = socket.gethostname().replace(os.sep, "_") or "host"
_lock = threading.Lock()
_mine: dict[tuple[Path, int], Path] = {}  # (root, pid) -> this process's folder under root


def _process_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process
    return True
  return True


def _remove_folders_of_dead_processes(root: Path) -> None:
  for entry in root.iterdir():
    host, _, pid = entry.name.rpartition("-")
    if host == _HOST and pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
      shutil.rmtree(entry, ignore_errors=True)


def _remove_my_folders() -> None:
  for (_, pid), folder in list(_mine.items()):
    if pid == os.getpid(): shutil.rmtree(folder, ignore_errors=True)


def scratch_dir(root: Path) -> Path:
  """This process's folder under `root`, created on first use (OSError if it cannot be)."""
  key = (root, os.getpid())  # a forked child gets a folder of its own
  with _lock:
    folder = _mine.get(key)
    if folder is not None and folder.is_dir(): return folder
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if hasattr(os, "getuid") and root.stat().st_uid != os.getuid():  # e.g. a folder planted in a shared /tmp
      raise PermissionError(f"{root} belongs to another user")
    _remove_folders_of_dead_processes(root)
    folder = root / f"{_HOST}-{os.getpid()}"
    folder.mkdir(exist_ok=True, mode=0o700)
    if not _mine: atexit.register(_remove_my_folders)
    _mine[key] = folder
  return folder
