"""The VIZ page over HTTP on 127.0.0.1 (a daemon thread: it never keeps a program alive by itself)."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tgfn.viz.page import render
from tgfn.viz.recorder import Recorder


def serve(recorder: Recorder, port: int = 0) -> ThreadingHTTPServer:
  """Start serving `recorder`'s page; the server's address is `server.server_address`."""
  cache: dict[str, tuple[int, bytes]] = {}

  class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
      if self.path.split("?")[0] not in ("/", "/index.html"):
        self.send_error(404)
        return
      version = recorder.version
      if cache.get("page", (-1, b""))[0] != version: cache["page"] = (version, render(recorder).encode())
      body = cache["page"][1]
      self.send_response(200)
      self.send_header("Content-Type", "text/html; charset=utf-8")
      self.send_header("Content-Length", str(len(body)))
      self.end_headers()
      self.wfile.write(body)

    def log_message(self, *args: object) -> None: pass  # quiet: the program's own output matters

  server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
  server.daemon_threads = True
  threading.Thread(target=server.serve_forever, name="tgfn-viz", daemon=True).start()
  return server
