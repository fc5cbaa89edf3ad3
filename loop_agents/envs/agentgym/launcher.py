"""Start our AgentGym-protocol server as a subprocess on 127.0.0.1, wait until it answers, stop it."""

from __future__ import annotations

import sys
import time

from loop_agents.envs.server_process import LocalServerProcess, answers_health
from loop_agents.ports import free_port


class EnvServerProcess(LocalServerProcess):
    """One server process (its own session, so its children, e.g. SciWorld's JVMs, stop with it)."""

    def __init__(self, env_name: str, port: int | None = None, startup_timeout_s: float = 120.0) -> None:
        super().__init__()
        self.env_name = env_name
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Launch and block until GET /health answers; returns the base URL."""
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Launch the process without waiting (from a thread that lives as long as the server: `launch`)."""
        self.launch([sys.executable, "-m", "loop_agents.envs.agentgym.server", "--env", self.env_name,
                     "--host", "127.0.0.1", "--port", str(self.port)])  # fmt: skip

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
            if answers_health(self.url):
                return self.url
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(
            f"{self.env_name} env server on port {self.port} not ready after {self.startup_timeout_s} s"
        )

    def __enter__(self) -> EnvServerProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
