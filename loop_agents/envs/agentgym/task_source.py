"""Task source for AgentGym-protocol environments: item ids per split, clients, and (optionally) our server."""

from __future__ import annotations

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
        c = self.config
        return AgentGymEnvClient(self.url, c.env, c.request_timeout_s, c.retries, c.retry_backoff_s,
                                 c.system_prompt, c.reward_scale)  # fmt: skip

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
