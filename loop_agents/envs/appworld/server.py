"""One AppWorld environment server: `uvicorn appworld.serve.environment:app` on 127.0.0.1.

A server process holds at most one world (two worlds in one process corrupt each other, and
freezegun stops that process's clock), so the pool runs one per concurrent episode. It runs in
its own session so that teardown can SIGKILL the whole process group: SIGTERM is not reliable
for these servers (appworld-offline.md §4).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from loop_agents.child_process import die_with_parent
from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.redaction import child_environment


class ServerError(RuntimeError):
    """The server failed (died, timed out, answered 5xx or garbage); it must be recycled."""


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class AppWorldServer:
    """A single env-server subprocess and its HTTP client."""

    def __init__(self, config: AppWorldConfig, port: int, log_dir: Path) -> None:
        self.config = config
        self.port = port
        self.url = f"http://{config.host}:{port}"
        self.log_path = log_dir / f"server_{port}.log"
        self.process: subprocess.Popen | None = None
        self.client = httpx.AsyncClient(base_url=self.url, timeout=config.request_timeout_s)
        self.started_at = 0.0

    # ---- lifecycle -------------------------------------------------------------------------
    def spawn(self) -> None:
        """Starts the process (returns at once; `wait_ready` waits for HTTP)."""
        root = self.config.root_path
        env = child_environment(
            {
                "APPWORLD_ROOT": str(root),
                "APPWORLD_CACHE": str(root / ".appworld_cache"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.pop("PYTHONPATH", None)  # nothing of the main venv may leak into the AppWorld venv
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it until it exits
        cmd = [
            str(self.config.python_path), "-m", "uvicorn", "appworld.serve.environment:app",
            "--host", self.config.host, "--port", str(self.port), "--log-level", "warning",
        ]  # fmt: skip
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log.close()

    async def wait_ready(self) -> float:
        """Polls `GET /` until it answers; returns seconds since spawn."""
        deadline = self.started_at + self.config.start_timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServerError(f"server on port {self.port} exited at start-up: {self.log_tail()}")
            try:
                reply = await self.client.get("/", timeout=2.0)
                if reply.status_code == 200:
                    return time.monotonic() - self.started_at
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.25)
        raise ServerError(f"server on port {self.port} not ready after {self.config.start_timeout_s} s")

    async def warm_up(self, task_id: str) -> None:
        """One initialize/execute/close, so the ~8 s first-world cost is not paid by an episode."""
        experiment = f"{self.config.experiment_prefix}_warmup_{self.port}"
        await self.call("initialize", task_id=task_id, experiment_name=experiment,
                        timeout=self.config.initialize_timeout_s)  # fmt: skip
        await self.call("execute", task_id=task_id, code="print('warm')")
        await self.call("close", task_id=task_id)
        _remove_tree(self.config.root_path / "experiments" / "outputs" / experiment)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def healthy(self) -> bool:
        """Process alive and answering `GET /` within 5 s (a hung server is soft-dead)."""
        if not self.alive():
            return False
        try:
            return (await self.client.get("/", timeout=5.0)).status_code == 200
        except httpx.HTTPError:
            return False

    async def stop(self) -> None:
        """`/close_all` (so it does not hang on exit), then SIGKILL the process group."""
        if self.alive():
            try:
                await self.client.post("/close_all", json={"task_id": ""}, timeout=3.0)
            except httpx.HTTPError:
                pass
        self.kill()
        await self.client.aclose()

    def kill(self) -> None:
        """SIGKILL the server's process group and reap it (safe to call twice)."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # ---- HTTP ------------------------------------------------------------------------------
    async def call(self, method: str, timeout: float | None = None, **body: Any) -> Any:
        """POST /<method> with a JSON body; returns the reply's `output`. Raises ServerError."""
        limit = self.config.max_output_bytes
        try:
            async with self.client.stream(
                "POST", f"/{method}", json=body, timeout=timeout or self.config.request_timeout_s
            ) as reply:
                chunks, size = [], 0
                async for chunk in reply.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise OutputTooLarge(size)
                    chunks.append(chunk)
        except httpx.TimeoutException as error:
            raise ServerError(f"/{method} on port {self.port} timed out ({type(error).__name__})") from error
        except httpx.HTTPError as error:
            raise ServerError(f"/{method} on port {self.port} failed: {error!r}") from error
        payload = b"".join(chunks)
        if reply.status_code != 200:
            raise ServerError(
                f"/{method} on port {self.port} answered HTTP {reply.status_code}: {payload[:500]!r}"
            )
        try:
            return json.loads(payload)["output"]
        except (ValueError, KeyError, TypeError) as error:
            raise ServerError(f"/{method} on port {self.port} sent garbage: {payload[:200]!r}") from error


class OutputTooLarge(ServerError):
    """A reply exceeded `max_output_bytes` (the model printed megabytes); the server is recycled."""

    def __init__(self, size: int) -> None:
        super().__init__(f"reply exceeded {size} bytes")
        self.size = size


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
