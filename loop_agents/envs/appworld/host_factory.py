"""The pool's handle on the host factory (`episode_host.py --factory`, see host/factory.py) and on the hosts it
forks, which are not our children: `ForkedProcess` gives them Popen's `pid` / `poll` / `wait` through a pidfd."""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from pathlib import Path

from loop_agents.child_process import die_with_parent
from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.server import ServerError, host_command, host_environment

REPLY_PREFIX = (
    b"@@FACTORY@@ "  # host/factory.py's; that file runs in the AppWorld venv and is not imported here
)


class ForkedProcess:
    """A host forked by the factory: alive until its pidfd turns readable. `returncode` is -1 once it has
    exited (the factory's kernel-reaped children leave no status to read)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # died before we looked
            self._pidfd, self.returncode = None, -1

    def _exited(self, timeout: float) -> bool:
        if self._pidfd is not None and select.select([self._pidfd], [], [], timeout)[0]:
            os.close(self._pidfd)
            self._pidfd, self.returncode = None, -1
        return self.returncode is not None

    def poll(self) -> int | None:
        self._exited(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited(timeout if timeout is not None else 1e9):
            raise subprocess.TimeoutExpired(f"host {self.pid}", timeout or 0)
        return -1

    def __del__(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)


class HostFactory:
    """Starts the factory process and asks it for hosts, one request at a time (thread-safe, blocking).

    Start it from the thread that owns the pool (the factory's parent-death signal follows that thread).
    """

    def __init__(self, config: AppWorldConfig, log_dir: Path, warm_up_task: str) -> None:
        self.config = config
        self.log_path = log_dir / "host_factory.log"
        self.warm_up_task = warm_up_task
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self._lock = threading.RLock()
        self._buffer = b""
        self._ready = False

    def start(self) -> None:
        """Spawns the factory (returns at once; its warm-up runs while the first `fork` waits)."""
        with self._lock:
            self.stop()
            self._spawn()

    def _spawn(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                host_command(self.config, "--factory", "--warm-up-task", self.warm_up_task),
                cwd=self.config.root_path,
                env=host_environment(self.config),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.starts += 1
        self._buffer, self._ready = b"", False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def fork(self, port: int, log_path: Path) -> ForkedProcess:
        """A new host for `port` logging to `log_path`. Raises ServerError (the caller
        restarts the factory) if the factory is dead, answers garbage or takes longer than the start timeout."""
        with self._lock:
            if not self.alive():
                raise ServerError(f"the AppWorld host factory is not running: {self._log_tail()}")
            deadline = time.monotonic() + self.config.start_timeout_s
            if not self._ready:  # its warm-up: the first world costs seconds
                self._read_reply(deadline)
                self._ready = True
            try:
                self.process.stdin.write(json.dumps({"port": port, "log": str(log_path)}).encode() + b"\n")
                self.process.stdin.flush()
            except OSError as error:
                raise ServerError(f"the AppWorld host factory stopped reading: {error}") from error
            reply = self._read_reply(deadline)
            if reply.get("port") != port or not isinstance(reply.get("pid"), int):
                raise ServerError(f"the AppWorld host factory answered {reply} for port {port}")
            return ForkedProcess(reply["pid"])

    def _read_reply(self, deadline: float) -> dict:
        """The next `@@FACTORY@@` line of the factory's stdout (other lines, e.g. its sandbox line, skipped)."""
        fd = self.process.stdout.fileno()
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                if line.startswith(REPLY_PREFIX):
                    try:
                        return json.loads(line[len(REPLY_PREFIX) :])
                    except ValueError as error:
                        raise ServerError(
                            f"the AppWorld host factory sent garbage: {line[:200]!r}"
                        ) from error
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise ServerError(
                    f"the AppWorld host factory did not answer within {self.config.start_timeout_s} s"
                )
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ServerError(f"the AppWorld host factory exited: {self._log_tail()}")
            self._buffer += chunk

    def _log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGKILLs the factory (its hosts die with it: their parent-death signal) and reaps it; safe to call
        twice."""
        with self._lock:
            if self.process is None:
                return
            self.process.kill()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (self.process.stdin, self.process.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.process = None
