"""Task source for AgentGym-protocol environments: item ids per split, clients, and (optionally) our server.

Our server is restarted when it has died (killed, crashed), as the vLLM watchdog restarts its server: the episodes
that were on it fail with EnvironmentFailure, the collector retries them, and each retry's `make_env()` first
starts the server again on the same port.
"""

from __future__ import annotations

import asyncio
import sys
import threading

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
        self._restart_lock = threading.Lock()

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
        if self.server is not None and not self.server.alive():
            await asyncio.to_thread(self._restart_if_dead)
        c = self.config
        return AgentGymEnvClient(self.url, c.env, c.request_timeout_s, c.retries, c.retry_backoff_s,
                                 c.system_prompt, c.reward_scale)  # fmt: skip

    def _restart_if_dead(self) -> None:
        """Start our dead server again on its port (one restart however many episodes find it dead)."""
        with self._restart_lock:
            server = self.server
            if server is None or server.alive():
                return
            print(
                f"[agentgym] {self.config.env} env server {self.url} died (exit code {server.process.returncode}); "
                "starting it again on the same port",
                file=sys.stderr,
                flush=True,
            )
            server.start()
            self.restarts += 1

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
