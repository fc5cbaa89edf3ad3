"""Serves a built site on 127.0.0.1 only (the pages also work straight from disk)."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


def start_server(site_dir: str | Path, port: int = 0) -> ThreadingHTTPServer:
    """Starts a loopback HTTP server for `site_dir` in a daemon thread; port 0 picks a free one."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, name="loop-agents-viewer", daemon=True).start()
    return server
