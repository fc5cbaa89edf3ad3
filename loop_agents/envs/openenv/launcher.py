"""An OpenEnv server started here on 127.0.0.1: one of our families (`serve_family`) or any app (`app`).

A family is served by `python -m loop_agents.envs.openenv serve` (OpenEnv's own server code in `.venv-openenv`, in
simulation mode unless `mode="production"`). The process runs in its own session (its children stop with it) and dies with its parent. `start()` blocks until
`GET /health` answers; the URL of a family server comes from its `[openenv] serving ... on <url>` line (it binds a
free port itself, so no port can be taken between choosing and binding). An app runs under `app_python` (`openenv`:
.venv-openenv's interpreter, OpenEnv 0.10).
"""

from __future__ import annotations

import re
import sys
import time

from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.openenv.version import openenv_python
from loop_agents.envs.server_process import LocalServerProcess, answers_health
from loop_agents.ports import free_port

SERVING = re.compile(r"\[openenv\] serving \S+ on (http://127\.0\.0\.1:\d+)")


class OpenEnvServerProcess(LocalServerProcess):
    """One local OpenEnv server process; `start()` again after it died starts a new one (a new port)."""

    def __init__(self, settings: OpenEnvSettings, mode: str = "simulation") -> None:
        super().__init__()
        self.settings, self.mode = settings, mode
        self.url: str | None = None
        self.starts = 0

    @property
    def what(self) -> str:
        s = self.settings
        return f"OpenEnv server of family {s.serve_family}" if s.serve_family else f"OpenEnv app {s.app}"

    def command(self) -> tuple[list[str], str | None]:
        """The command line, and the URL when it is known before start (an app on a port chosen here)."""
        s = self.settings
        if s.serve_family:
            # the overrides right after the family: argparse takes no positional after the options
            cmd = [sys.executable, "-m", "loop_agents.envs.openenv", "serve", s.serve_family, *s.serve_overrides,
                   "--port", "0", "--max-sessions", str(s.max_sessions), "--mode", self.mode]  # fmt: skip
            return cmd, None
        port = free_port()
        python = str(openenv_python()) if s.app_python == "openenv" else (s.app_python or sys.executable)
        cmd = [python, "-m", "uvicorn", str(s.app), "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "warning", "--ws-max-size", str(64 * 1024 * 1024)]  # fmt: skip
        if s.app_dir:
            cmd += ["--app-dir", s.app_dir]
        return cmd, f"http://127.0.0.1:{port}"

    def start(self) -> str:
        """Launch and block until the server answers `GET /health`; returns its base URL."""
        self.stop()
        cmd, self.url = self.command()
        self._log.seek(0)
        self._log.truncate()
        self.launch(cmd)
        self.starts += 1
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.what} exited with code {self.process.returncode} during start-up: "
                                   f"{self.log_tail(600)!r}")  # fmt: skip
            if self.url is None:
                found = SERVING.search(self.log_tail(100_000))
                self.url = found.group(1) if found else None
            if self.url is not None and answers_health(self.url):
                return self.url
            time.sleep(0.2)
        tail = self.log_tail(600)
        self.stop()
        raise TimeoutError(f"{self.what} not ready after {self.settings.start_timeout_s} s: {tail!r}")
