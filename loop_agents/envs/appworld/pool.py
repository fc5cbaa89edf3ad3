"""A pool of AppWorld env servers: one per concurrent episode, recycled whenever one fails.

`acquire()` hands out an idle, healthy server (a dead or soft-dead one is replaced first);
`release(server, healthy=False)` kills it and starts a fresh one in the background (new port,
readiness check, warm-up), so a crash, timeout or poisoned world never reaches the next episode.
With `fork_hosts` (the default) every host, replacements included, is forked from one warmed-up
factory process, restarted if it dies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.host_factory import HostFactory
from loop_agents.envs.appworld.server import AppWorldServer, ServerError, probe_sandbox
from loop_agents.envs.appworld.splits import first_task_id
from loop_agents.ports import free_port

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    """Counters for logging and tests."""

    started: int = 0
    recycled: int = 0
    start_seconds: list[float] = field(default_factory=list)  # spawn -> ready (+ warm-up) per server


class AppWorldServerPool:
    """Owns `config.pool_size` servers; use `async with AppWorldServerPool(cfg) as pool`."""

    def __init__(self, config: AppWorldConfig) -> None:
        config.check_installed()
        self.config = config
        self.log_dir = config.root_path / "experiments" / "server_logs"
        self.stats = PoolStats()
        self._idle: asyncio.Queue[AppWorldServer] = asyncio.Queue()
        self._servers: set[AppWorldServer] = set()
        self._replacements: set[asyncio.Task] = set()
        self._next_port = config.base_port
        self._warm_up_task = config.warm_up_task_id or first_task_id(config.root_path)
        self.factory = (
            HostFactory(config, self.log_dir, self._warm_up_task if config.warm_up else "")
            if config.fork_hosts
            else None
        )
        self._closed = False
        self.sandbox_line = ""

    async def __aenter__(self) -> AppWorldServerPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> float:
        """Checks the sandbox (one line; exit 2 in strict mode when a layer is missing), then starts all
        servers concurrently; returns the wall time in seconds."""
        began = time.monotonic()
        self.sandbox_line = probe_sandbox(self.config)
        print(f"[appworld] {self.sandbox_line}", flush=True)
        if self.factory is not None:
            self.factory.start()
        servers = await asyncio.gather(*(self._start_server() for _ in range(self.config.pool_size)))
        for server in servers:
            self._idle.put_nowait(server)
        return time.monotonic() - began

    def _port(self) -> int:
        if self.config.base_port == 0:
            return free_port(self.config.host)
        port, self._next_port = self._next_port, self._next_port + 1
        return port

    async def _start_server(self, attempts: int = 3) -> AppWorldServer:
        last_error: Exception | None = None
        for _ in range(attempts):  # a port grabbed by someone else between pick and bind: retry
            server = AppWorldServer(self.config, self._port(), self.log_dir)
            self._servers.add(server)
            try:
                await self._launch(server)
                await server.wait_ready()
            except ServerError as error:
                last_error = error
                log.warning("AppWorld server on port %d failed to start: %s", server.port, error)
                await self._discard(server)
                continue
            self.stats.started += 1
            self.stats.start_seconds.append(time.monotonic() - server.started_at)
            return server
        raise ServerError(f"could not start an AppWorld server after {attempts} attempts: {last_error}")

    async def _launch(self, server: AppWorldServer) -> None:
        if self.factory is None:
            server.spawn(self._warm_up_task if self.config.warm_up else "")
            return
        if not self.factory.alive():
            log.warning("the AppWorld host factory is gone; starting a new one")
            self.factory.start()
        try:
            await server.fork_from(self.factory)
        except ServerError:
            self.factory.stop()  # hung or broken: the next attempt starts a fresh one
            raise

    async def _discard(self, server: AppWorldServer) -> None:
        self._servers.discard(server)
        await server.stop()

    async def acquire(self) -> AppWorldServer:
        """An idle server that is alive and answers; waits up to `acquire_timeout_s`."""
        if self._closed:
            raise ServerError("the AppWorld server pool is closed")
        try:
            server = await asyncio.wait_for(self._idle.get(), self.config.acquire_timeout_s)
        except TimeoutError as error:
            raise ServerError(f"no AppWorld server free within {self.config.acquire_timeout_s} s") from error
        if await server.healthy():
            return server
        log.warning("AppWorld server on port %d is dead or hung; replacing it", server.port)
        await self._discard(server)
        self.stats.recycled += 1
        return await self._start_server()

    def release(self, server: AppWorldServer, healthy: bool) -> None:
        """Returns a server to the pool; an unhealthy one is replaced in the background."""
        if self._closed:
            asyncio.ensure_future(self._discard(server))
            return
        if healthy:
            self._idle.put_nowait(server)
            return
        self.stats.recycled += 1
        task = asyncio.ensure_future(self._replace(server))
        self._replacements.add(task)
        task.add_done_callback(self._replacements.discard)

    async def _replace(self, server: AppWorldServer) -> None:
        await self._discard(server)
        while not self._closed:
            try:
                self._idle.put_nowait(await self._start_server())
                return
            except ServerError as error:
                log.error("AppWorld server replacement failed, retrying in 5 s: %s", error)
                await asyncio.sleep(5)

    async def settle(self) -> None:
        """Waits until every background replacement has finished (or failed)."""
        await asyncio.gather(*list(self._replacements), return_exceptions=True)

    async def close(self) -> None:
        """Stops every server (close_all, then SIGKILL of its process group)."""
        self._closed = True
        for task in list(self._replacements):
            task.cancel()
        await asyncio.gather(*self._replacements, return_exceptions=True)
        await asyncio.gather(*(server.stop() for server in list(self._servers)), return_exceptions=True)
        self._servers.clear()
        if self.factory is not None:
            self.factory.stop()

    def kill_all_now(self) -> None:
        """Synchronous last-resort teardown (atexit / signal handlers): SIGKILL every server."""
        for server in list(self._servers):
            server.kill()
        if self.factory is not None:
            self.factory.stop()

    @property
    def ports(self) -> list[int]:
        return sorted(server.port for server in self._servers)

    @property
    def servers(self) -> list[AppWorldServer]:
        return list(self._servers)

    @property
    def outputs_dir(self) -> Path:
        return self.config.root_path / "experiments" / "outputs"
