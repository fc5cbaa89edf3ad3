"""One AppWorld episode host (`episode_host.py` in the AppWorld venv) on 127.0.0.1, and its HTTP client.

The host is a pre-imported, warmed-up parent that never runs policy code: it forks one sandboxed
process per episode and one evaluator process per evaluation (see episode_host.py). A process
holds at most one world, so the pool runs one host per concurrent episode. The host runs in its
own session so that teardown can SIGKILL the whole process group.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from loop_agents.child_process import die_with_parent
from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.redaction import child_environment


class ServerError(RuntimeError):
    """The server failed (died, timed out, answered 5xx or garbage); it must be recycled."""


HOST_SCRIPT = Path(__file__).resolve().with_name("episode_host.py")


def host_command(config: AppWorldConfig, *extra: str) -> list[str]:
    """The command line of an episode host (or of its `--probe`) with the config's sandbox and limits."""
    return [
        str(config.python_path), str(HOST_SCRIPT), "--host", config.host, "--root", str(config.root_path),
        "--sandbox", config.sandbox, "--memory-mb", str(config.memory_limit_mb),
        "--file-size-mb", str(config.file_size_limit_mb), "--cpu-s", str(config.cpu_limit_s),
        "--open-files", str(config.open_files_limit), "--max-output-bytes", str(config.max_output_bytes),
        "--scratch-mb", str(config.scratch_limit_mb), "--scratch-inodes", str(config.scratch_inodes),
        "--grace-s", str(config.grace_s), "--evaluate-timeout-s", str(max(1.0, config.evaluate_timeout_s - 5)),
        "--initialize-timeout-s", str(max(1.0, config.initialize_timeout_s - 5)), *extra,
    ]  # fmt: skip


def host_environment(config: AppWorldConfig) -> dict[str, str]:
    """The host's environment: secrets scrubbed, nothing of the main venv (no PYTHONPATH)."""
    root = config.root_path
    env = child_environment(
        {"APPWORLD_ROOT": str(root), "APPWORLD_CACHE": str(root / ".appworld_cache"), "PYTHONUNBUFFERED": "1"}
    )
    env.pop("PYTHONPATH", None)
    return env


def probe_sandbox(config: AppWorldConfig) -> str:
    """The host's one start line naming the sandbox layers that are on (and a warning for missing ones).

    In `strict` mode a missing layer prints the host's one line naming it and how to enable it, and
    exits 2 (SystemExit), before any server starts.
    """
    done = subprocess.run(
        host_command(config, "--probe"),
        env=host_environment(config),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode == 2:
        print(
            (done.stderr.strip().splitlines() or ["[sandbox] strict mode: a layer is missing"])[-1],
            file=sys.stderr,
        )
        raise SystemExit(2)
    if done.returncode != 0 or not done.stdout.strip():
        raise ServerError(f"AppWorld sandbox probe failed (rc {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


class AppWorldServer:
    """A single env-server subprocess and its HTTP client."""

    def __init__(self, config: AppWorldConfig, port: int, log_dir: Path) -> None:
        self.config = config
        self.port = port
        self.url = f"http://{config.host}:{port}"
        self.log_path = log_dir / f"server_{port}.log"
        self.process: subprocess.Popen | Any | None  # Any: host_factory.ForkedProcess = None
        self.client = httpx.AsyncClient(base_url=self.url, timeout=config.request_timeout_s)
        self.started_at = 0.0

    # ---- lifecycle -------------------------------------------------------------------------
    def spawn(self, warm_up_task: str = "") -> None:
        """Starts the process (returns at once; `wait_ready` waits for HTTP, after the host's warm-up)."""
        root = self.config.root_path
        env = host_environment(self.config)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it until it exits
        cmd = host_command(self.config, "--port", str(self.port), "--warm-up-task", warm_up_task)
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,  # the episode processes inherit it: never the trainer's terminal
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log.close()

    async def fork_from(self, factory: Any) -> None:
        """Has the warm host factory fork this host (returns once forked; `wait_ready` waits for HTTP)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        self.process = await asyncio.to_thread(factory.fork, self.port, self.log_path)

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
