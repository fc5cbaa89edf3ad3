"""The AgentGym task source with the per-instance options of AgentGymEnvConfig (action_set, task_set,
action_format, score_scale) applied to every client it makes, and the splits of the chosen task set."""

from __future__ import annotations

import httpx

from loop_agents.envs.agentgym.client import AgentGymEnvClient
from loop_agents.envs.agentgym.config import AgentGymEnvConfig
from loop_agents.envs.agentgym.task_source import AgentGymTaskSource


class ConfiguredAgentGymTaskSource(AgentGymTaskSource):
    """`AgentGymTaskSource` whose clients carry the config's options (sent in each `/create` body)."""

    def __init__(self, config: AgentGymEnvConfig) -> None:
        super().__init__(config)
        if config.task_set and not config.splits:
            # our server lists the items of the chosen task set; AgentGym's servers have no /splits,
            # and then the base class asks for env.options.splits
            try:
                response = httpx.get(f"{self.url}/splits", params={"task_set": config.task_set},
                                     timeout=config.startup_timeout_s)  # fmt: skip
            except httpx.HTTPError:
                response = None
            if response is not None and response.status_code == 200:
                config.splits = response.json()

    async def make_env(self) -> AgentGymEnvClient:
        client = await super().make_env()
        c = self.config
        client.create_options = {
            k: v for k, v in (("action_set", c.action_set), ("task_set", c.task_set)) if v
        }
        client.action_format = c.action_format
        if c.score_scale is not None:
            client.score_scale = c.score_scale
        return client
