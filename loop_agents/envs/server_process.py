"""An environment server this process starts on 127.0.0.1: the launch, its log, and stopping it.

Shared by the AgentGym launcher and the OpenEnv launcher. The process runs in its own session (so its children,
e.g. SciWorld's JVMs, stop with it), gets a parent-death signal, and writes stdout and stderr to a temporary file
whose tail goes into start-up errors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile

import httpx

from loop_agents.child_process import die_with_parent
from loop_agents.redaction import child_environment


def answers_health(url: str) -> bool:
    """True when `GET <url>/health` answers 200 within 2 s."""
    try:
        return httpx.get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class LocalServerProcess:
    """One server process at a time; subclasses build the command and decide when it is ready."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()

    def launch(self, cmd: list[str]) -> None:
        """Start `cmd` in its own session. Its parent-death signal is tied to the calling *thread* (Linux
        PR_SET_PDEATHSIG), so call this from a thread that lives as long as the server is needed."""
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=die_with_parent,
                                        env=child_environment({"PYTHONUNBUFFERED": "1"}))  # fmt: skip

    def alive(self) -> bool:
        """True while the launched process has not exited."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL the server's whole process group (tests of failure handling and restarts use it)."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        if not self.alive():
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
