"""Task source for AgentGym-protocol environments: item ids per split, clients, and (optionally) our server.

Our server is restarted when it has died (killed, crashed), as the vLLM watchdog restarts its server: the episodes
that were on it fail with EnvironmentFailure, the collector retries them, and each retry's `make_env()` first
starts the server again on the same port.
"""

from __future__ import annotations

import asyncio
import sys

import httpx

from loop_agents.envs.agentgym.client import AgentGymEnvClient
from loop_agents.envs.agentgym.config import AgentGymEnvConfig
from loop_agents.envs.agentgym.launcher import EnvServerProcess


class AgentGymTaskSource:
    """Starts our server for `config.env` on 127.0.0.1 unless `config.url` names one; `close()` stops it."""

    def __init__(self, config: AgentGymEnvConfig) -> None:
        self.config = config
        self.server: EnvServerProcess | None = None
        if config.url is None:
            self.server = EnvServerProcess(config.env, startup_timeout_s=config.startup_timeout_s)
            self.url = self.server.start()
        else:
            self.url = config.url.rstrip("/")
        self._splits: dict[str, list[int]] | None = None
        self.restarts = 0  # times our server was found dead and started again
        self._restart: asyncio.Future | None = None  # the restart in progress, awaited by every make_env

    def splits(self) -> dict[str, list[int]]:
        if self._splits is None:
            if self.config.splits:
                self._splits = {k: list(v) for k, v in self.config.splits.items()}
            else:
                try:
                    response = httpx.get(f"{self.url}/splits", timeout=self.config.startup_timeout_s)
                except httpx.HTTPError as err:
                    raise ConnectionError(
                        f"{self.config.env} env server {self.url} not reachable: {err!r}"
                    ) from err
                if response.status_code != 200:
                    raise ValueError(
                        f"{self.config.env} env server {self.url} has no /splits (HTTP {response.status_code}); "
                        "list the item indices per split in env.options.splits"
                    )
                self._splits = response.json()
        return self._splits

    def task_ids(self, split: str) -> list[str]:
        splits = self.splits()
        if split not in splits:
            raise ValueError(f"unknown split {split!r} for {self.config.env}; choose one of {sorted(splits)}")
        return [f"{self.config.env}_{i}" for i in splits[split]]

    async def make_env(self) -> AgentGymEnvClient:
        """A client for one episode; our server is started again first if it has died."""
        if self.server is not None:
            await self._ensure_server()
        c = self.config
        return AgentGymEnvClient(self.url, c.env, c.request_timeout_s, c.retries, c.retry_backoff_s,
                                 c.system_prompt, c.reward_scale)  # fmt: skip

    async def _ensure_server(self) -> None:
        """Start our dead server again on its port; every episode that finds it dead awaits the same restart.

        The process is spawned on the event loop's thread (no await between the check and the spawn, so one
        restart however many episodes find it dead): the server's parent-death signal follows the thread that
        forked it, and a pool thread (asyncio.to_thread) may exit while the server is still needed."""
        server = self.server
        if self._restart is None:
            if server.alive():
                return
            print(
                f"[agentgym] {self.config.env} env server {self.url} died (exit code {server.process.returncode}); "
                "starting it again on the same port",
                file=sys.stderr,
                flush=True,
            )
            server.spawn()
            self.restarts += 1
            self._restart = asyncio.ensure_future(asyncio.to_thread(server.wait_ready))
        restart = self._restart
        try:
            await asyncio.shield(restart)
        finally:
            if restart.done() and self._restart is restart:
                self._restart = None

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
