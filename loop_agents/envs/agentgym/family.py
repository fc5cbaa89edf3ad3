"""The AgentGym-protocol families: our own server for one game (babyai, textcraft, sciworld), started on
127.0.0.1, or any AgentGym env server already running (`agentgym_http`, by `env.options.url`)."""

from __future__ import annotations

from typing import Any

from loop_agents.envs.agentgym.config import AgentGymEnvConfig
from loop_agents.envs.agentgym.configured_source import ConfiguredAgentGymTaskSource
from loop_agents.envs.family import EnvironmentFamily
from loop_agents.errors import ConfigError
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.tools.spec import generic_action_tool


class AgentGymFamily(EnvironmentFamily):
    """One AgentGym game served by our server (`game` set) or a running server of any game (`game` None)."""

    settings_class = AgentGymEnvConfig

    def __init__(self, name: str, label: str, game: str | None) -> None:
        self.name, self.label, self.game = name, label, game

    def settings_defaults(self, env_cfg: Any, options: dict[str, Any]) -> dict[str, Any]:
        if self.game is not None:
            return {"env": self.game, **options}
        if options.get("url") is None:
            raise ConfigError(f"env.options.url: {self.name} needs the URL of a running AgentGym env server")
        return options

    def task_source(self, settings: AgentGymEnvConfig, cfg: Any) -> ConfiguredAgentGymTaskSource:
        return ConfiguredAgentGymTaskSource(settings)

    def agent(self, cfg: Any) -> TextActionAgent:
        return TextActionAgent()

    def tools(self, settings: AgentGymEnvConfig):
        """The game's text action as one tool, `act(action)` (the game's prompt lists its actions)."""
        return [generic_action_tool("Take one action in the game, written as the game's instructions say.")]

    def endpoint(self, settings: AgentGymEnvConfig) -> str | None:
        return settings.url


BABYAI = AgentGymFamily("babyai", "AgentGym", "babyai")
TEXTCRAFT = AgentGymFamily("textcraft", "AgentGym", "textcraft")
SCIWORLD = AgentGymFamily("sciworld", "AgentGym", "sciworld")
AGENTGYM_HTTP = AgentGymFamily("agentgym_http", "AgentGym", None)
