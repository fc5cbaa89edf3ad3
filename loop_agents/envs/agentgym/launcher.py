"""Start our AgentGym-protocol server as a subprocess on 127.0.0.1, wait until it answers, stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx

from loop_agents.child_process import die_with_parent
from loop_agents.redaction import child_environment


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EnvServerProcess:
    """One server process (its own session, so its children, e.g. SciWorld's JVMs, stop with it)."""

    def __init__(self, env_name: str, port: int | None = None, startup_timeout_s: float = 120.0) -> None:
        self.env_name = env_name
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Launch and block until GET /health answers; returns the base URL."""
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Launch the process without waiting. Its parent-death signal is tied to the calling *thread* (Linux
        PR_SET_PDEATHSIG), so call this from a thread that lives as long as the server is needed."""
        cmd = [sys.executable, "-m", "loop_agents.envs.agentgym.server", "--env", self.env_name,
               "--host", "127.0.0.1", "--port", str(self.port)]  # fmt: skip
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=die_with_parent, env=child_environment({"PYTHONUNBUFFERED": "1"}))  # fmt: skip

    def wait_ready(self) -> str:
        """Block until the spawned server answers GET /health; returns the base URL (any thread may wait)."""
        assert self.process is not None, "spawn() first"
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.env_name} env server exited with code {self.process.returncode} during start-up:\n"
                    f"{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(
            f"{self.env_name} env server on port {self.port} not ready after {self.startup_timeout_s} s"
        )

    def alive(self) -> bool:
        """True while the server process started by `start()` has not exited."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL the server's whole process group (used to test failure handling)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> EnvServerProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
