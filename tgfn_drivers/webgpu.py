"""WEBGPU: kernels rendered as WGSL (tgfn/renderer/wgsl.py), run by the WebGPU of a headless Chromium that
this module starts on first use and keeps for the life of the process (killed at exit). With
`--use-webgpu-adapter=swiftshader` Chromium offers a software adapter, so no GPU is needed.

The browser loads a page (tgfn_drivers/_webgpu_page.py) from an HTTP server on 127.0.0.1 in a thread of
this process, and long-polls it for work. Commands that need no answer (allocate, free, copy in, launch)
queue up here and travel with the next one that does (compile, copy out, synchronize), so a jitted step
is one round trip per copy out, not per kernel. The device runs commands in order, so a copy out sees
every launch before it.

Compiling is building the pipeline in the browser: a "binary" is the WGSL source behind a JSON line
(entry point, grid, bindings), and it is not cached on disk (a pipeline lives in one browser)."""
from __future__ import annotations

import atexit
import base64
import ctypes
import http.server
import itertools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, Optional

import numpy as np

from tgfn.device import Allocator, Compiled, Compiler
from tgfn.dtype import DType, dtypes
from tgfn.uop.alu import float_to_bf16_bits
from tgfn.renderer.wgsl import MEMORY_DTYPES, WGSLRenderer, parse_launch, unsupported, workgroups
from tgfn_drivers import require_backend
from tgfn_drivers._webgpu_page import PAGE

require_backend("WEBGPU")

INSTALL_HINT = "install Chromium (Debian: `apt-get install chromium`), or set TGFN_CHROMIUM to its path"
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader",
                  "--enable-features=Vulkan,WebGPU", "--disable-background-timer-throttling", "--no-first-run")
START_TIMEOUT_S = 60.0
_POLL_S = 10.0
MAX_PENDING = 1024  # queued commands before send() runs them  # a long poll with no work is answered empty after this long


class WebGPUUnavailable(RuntimeError):
  """No Chromium, or it offers no WebGPU adapter."""


def chromium_path() -> Optional[str]:
  return os.environ.get("TGFN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def _die_with_parent() -> None:
  """In the child before exec: Chromium gets SIGKILL when this process dies, even without atexit."""
  try:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    pass


class _Browser:
  """One headless Chromium, its page, and the queue of commands for it."""
  def __init__(self) -> None:
    path = chromium_path()
    if path is None: raise WebGPUUnavailable(f"the WEBGPU device needs Chromium; {INSTALL_HINT}")
    self.outbox: queue.Queue = queue.Queue()   # batches for the page
    self.inbox: queue.Queue = queue.Queue()    # its replies
    self.pending: list[dict] = []              # commands that wait for the next batch
    self.ids = itertools.count(1)
    self.lock = threading.RLock()
    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
    threading.Thread(target=self.server.serve_forever, daemon=True, name="tgfn-webgpu-http").start()
    self.profile = tempfile.mkdtemp(prefix="tgfn-webgpu-")
    url = f"http://127.0.0.1:{self.server.server_address[1]}/"
    # its log goes to a file: Chromium writes much of it (D-Bus complaints), and a full pipe would stall it
    self.log = os.path.join(self.profile, "chromium.log")
    with open(self.log, "wb") as log:
      self.process = subprocess.Popen([path, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", url],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                      start_new_session=True, preexec_fn=_die_with_parent)
    atexit.register(self.close)
    try:
      info = self.call({"op": "hello"}, timeout=START_TIMEOUT_S)
    except (TimeoutError, RuntimeError) as e:
      self.close()
      raise WebGPUUnavailable(f"headless Chromium ({path}) did not start WebGPU: {e}") from e
    if "error" in info:
      self.close()
      raise WebGPUUnavailable(f"headless Chromium ({path}) offers no WebGPU: {info['error']}")
    self.adapter, self.limits = info["adapter"], info["limits"]

  def send(self, cmd: dict) -> None:
    """Queue a command that needs no answer. A long queue (a loop that never copies out) is run and waited
    for, so neither side holds an unbounded backlog."""
    with self.lock:
      self.pending.append(cmd)
      if len(self.pending) >= MAX_PENDING: self.call({"op": "sync"})

  def call(self, cmd: dict, timeout: float = 600.0) -> dict:
    """Run the queued commands and `cmd`, and return `cmd`'s answer; an error the device reported meanwhile
    (a failed launch) raises."""
    with self.lock:
      batch = {"id": next(self.ids), "cmds": [*self.pending, cmd]}
      self.pending = []
      self.outbox.put(batch)
      deadline = time.monotonic() + timeout
      while True:
        try:
          reply = self.inbox.get(timeout=1.0)
        except queue.Empty:
          if self.process.poll() is not None:
            raise RuntimeError(f"Chromium exited with code {self.process.returncode}: {self._stderr_tail()}") from None
          if time.monotonic() > deadline: raise TimeoutError(f"no answer from the WebGPU page in {timeout:.0f} s") from None
          continue
        if reply["id"] == batch["id"]: break
    failed = [r["error"] for r in reply["results"][:-1] if r and "error" in r] + reply["errors"]
    if failed: raise RuntimeError("WebGPU reported: " + "; ".join(failed))
    return reply["results"][-1]

  def _stderr_tail(self) -> str:
    try:
      with open(self.log, "rb") as f: return f.read()[-2000:].decode(errors="replace")
    except OSError:
      return ""

  def close(self) -> None:
    if self.process.poll() is None:
      try:
        os.killpg(self.process.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      self.process.wait()
    self.server.shutdown()
    shutil.rmtree(self.profile, ignore_errors=True)


def _handler(browser: _Browser) -> type:
  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None: self._answer(PAGE.encode(), "text/html")

    def do_POST(self) -> None:
      reply = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"null")
      if reply is not None: browser.inbox.put(reply)
      try:
        batch = browser.outbox.get(timeout=_POLL_S)
      except queue.Empty:
        batch = {"id": None, "cmds": []}
      self._answer(json.dumps(batch).encode(), "application/json")

    def _answer(self, body: bytes, kind: str) -> None:
      self.send_response(200)
      self.send_header("Content-Type", kind)
      self.send_header("Content-Length", str(len(body)))
      self.end_headers()
      self.wfile.write(body)

    def log_message(self, *args: Any) -> None: pass
  return Handler


_browser: Optional[_Browser] = None
_start_lock = threading.Lock()


def browser() -> _Browser:
  """The Chromium of this process, started on first use; WebGPUUnavailable says what to install."""
  global _browser
  with _start_lock:
    if _browser is None: _browser = _Browser()
  return _browser


def _words(nbytes: int) -> int: return max(4, -(-nbytes // 4) * 4)  # WebGPU copies whole 4-byte words


class GPUBuffer:
  """A buffer in the browser, named by an integer. Not an int itself: tgfn.engine.call takes an int handle
  for a raw address and makes views by adding offsets, which here would name another buffer."""
  __slots__ = ("id",)
  def __init__(self, id: int): self.id = id


class WebGPUAllocator(Allocator):
  """Buffers in the browser; copies in queue up, a copy out runs everything queued."""
  _ids = itertools.count(1)

  def alloc(self, nbytes: int) -> GPUBuffer:
    handle = GPUBuffer(next(self._ids))
    browser().send({"op": "alloc", "id": handle.id, "size": _words(nbytes)})
    return handle

  def free(self, handle: GPUBuffer) -> None:
    if _browser is not None and _browser.process.poll() is None: _browser.send({"op": "free", "id": handle.id})

  def copyin(self, handle: GPUBuffer, data: memoryview) -> None:
    if not data.nbytes: return
    raw = bytes(data) + b"\0" * (_words(data.nbytes) - data.nbytes)
    browser().send({"op": "write", "id": handle.id, "data": base64.b64encode(raw).decode()})

  def copyout(self, handle: GPUBuffer, nbytes: int) -> bytes:
    if not nbytes: return b""
    return base64.b64decode(browser().call({"op": "read", "id": handle.id, "size": _words(nbytes)})["data"])[:nbytes]

  def copy_region(self, dst: GPUBuffer, dst_offset: int, src: GPUBuffer, src_offset: int, nbytes: int) -> None:
    """copyBufferToBuffer, queued in order with the launches. WebGPU copies whole 4-byte words only, and
    rounding a copy out to words would overwrite the neighbouring elements, so other regions raise."""
    if not nbytes: return
    if dst_offset % 4 or src_offset % 4 or nbytes % 4:
      raise NotImplementedError(f"WebGPU copies buffer regions in whole 4-byte words only (copyBufferToBuffer), "
                                f"got {nbytes} bytes from offset {src_offset} to offset {dst_offset}: a lax loop "
                                f"body on WEBGPU needs slices of a multiple of 4 bytes (e.g. 32-bit dtypes)")
    browser().send({"op": "copy", "src": src.id, "src_offset": src_offset, "dst": dst.id, "dst_offset": dst_offset,
                    "size": nbytes})

  def copy(self, dst: GPUBuffer, src: GPUBuffer, nbytes: int) -> None:
    """A whole buffer, on the device (Buffer.copy_from): both are allocated in whole words, so any size copies."""
    self.copy_region(dst, 0, src, 0, _words(nbytes))


_BINDING = re.compile(r"@binding\((\d+)\) var<storage, (read|read_write)>")
compile_times_ms: list[float] = []  # the browser's shader module + pipeline time of each kernel built here


class WebGPUCompiler(Compiler):
  """WGSL -> a pipeline in the browser. The returned bytes are the source behind a JSON line; the pipeline
  stays in the browser under the source's id (`_pipelines`)."""
  cachekey = "webgpu"

  def compile(self, src: str) -> bytes:
    entry, grid = parse_launch(src)
    bindings = ["storage" if access == "read_write" else "read-only-storage" for _, access in _BINDING.findall(src)]
    _pipeline(src, entry, bindings)
    header = {"entry": entry, "grid": grid, "bindings": bindings}
    return json.dumps(header).encode() + b"\n" + src.encode()

  def compile_cached(self, src: str) -> bytes: return self.compile(src)  # a pipeline lives in one browser


_pipelines: dict[str, int] = {}


def _pipeline(src: str, entry: str, bindings: list[str]) -> int:
  """The id of the browser's pipeline for `src`, built on first use."""
  if src not in _pipelines:
    pipe = next(_pipe_ids)
    try:  # a parse error arrives as the device's error, a pipeline's as the answer's
      answer = browser().call({"op": "compile", "id": pipe, "src": src, "entry": entry, "bindings": bindings})
      if "error" in answer: raise RuntimeError(answer["error"])
    except RuntimeError as e:
      raise RuntimeError(f"WebGPU could not build kernel {entry}: {e}\n--- source ---\n{src}") from e
    compile_times_ms.append(answer["ms"])
    _pipelines[src] = pipe
  return _pipelines[src]


_pipe_ids = itertools.count(1)


class WebGPUProgram:
  """One kernel: launching it queues a dispatch over its grid."""
  def __init__(self, name: str, lib: bytes):
    header, src = lib.split(b"\n", 1)
    meta = json.loads(header)
    self.name, self.groups = name, workgroups(tuple(meta["grid"]))
    self.pipe = _pipeline(src.decode(), meta["entry"], meta["bindings"])
    self.buffers = len(meta["bindings"]) - (1 if b"var<storage, read> params" in src else 0)

  def __call__(self, *args: Any) -> None:
    """Buffer ids, then scalar parameters as u32 words (from scalar_arg)."""
    if 0 in self.groups: return
    browser().send({"op": "launch", "pipe": self.pipe, "bufs": list(args[:self.buffers]),
                    "params": list(args[self.buffers:]), "groups": list(self.groups)})


def scalar_arg(value: Any, dtype: DType) -> int:
  """A scalar parameter as the u32 word the kernel reads from its parameter buffer."""
  if dtype.name not in MEMORY_DTYPES: raise unsupported("parameters", dtype)
  if dtype is dtypes.float32: return int(np.array([value], np.float32).view(np.uint32)[0])
  if dtype is dtypes.float16:  # its bits, rounded once here as a constant of it is
    with np.errstate(over="ignore"): return int(np.array([value], np.float16).view(np.uint16)[0])
  if dtype is dtypes.bfloat16: return float_to_bf16_bits(value)
  if dtype is dtypes.bool: return int(bool(value))
  return int(value) & 0xFFFFFFFF  # narrow ints arrive in their range: sign-extended by the kernel's bitcast


def synchronize() -> None:
  """Wait for every queued kernel (a copy out already does)."""
  browser().call({"op": "sync"})


def kernel_arg(handle: GPUBuffer) -> int: return handle.id


DEVICE = Compiled("WEBGPU", WebGPUAllocator(), WGSLRenderer(), WebGPUCompiler(), WebGPUProgram, scalar_arg=scalar_arg,
                  kernel_arg=kernel_arg, synchronize=synchronize)
