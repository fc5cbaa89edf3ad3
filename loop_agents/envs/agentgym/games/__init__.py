"""The games our AgentGym-protocol server can host, by env name."""

from __future__ import annotations

from collections.abc import Callable

from loop_agents.envs.agentgym.games.base import TextGame

ENV_NAMES = ("babyai", "textcraft", "sciworld", "gemhunt")


def game_factory(env_name: str) -> Callable[[], TextGame]:
    """A constructor of fresh game instances for `env_name` (imports the game's package lazily)."""
    if env_name == "babyai":
        from loop_agents.envs.agentgym.games.babyai import BabyAIGame as game
    elif env_name == "textcraft":
        from loop_agents.envs.agentgym.games.textcraft import TextCraftGame as game
    elif env_name == "sciworld":
        from loop_agents.envs.agentgym.games.sciworld import SciWorldGame as game
    elif env_name == "gemhunt":
        from loop_agents.envs.agentgym.games.gemhunt import GemHuntServerGame as game
    else:
        raise ValueError(f"unknown AgentGym env name {env_name!r}; choose one of {ENV_NAMES}")
    return game
