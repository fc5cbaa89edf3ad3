"""The selected environment family of a run's config, and the pieces every caller asks it for.

The driver, the rollout workers, the evaluator and the eval tools go through these functions; none of them names a
family (`loop_agents.envs.registry` finds it by `env.name`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.family import EnvironmentFamily
from loop_agents.envs.registry import family
from loop_agents.envs.settings import env_settings
from loop_agents.errors import ConfigError


def selected_family(cfg: DictConfig) -> EnvironmentFamily:
    return family(str(cfg.env.name))


def make_task_source(cfg: DictConfig) -> Any:
    """The task source of `env.name`; `await start_task_source(...)` before use (a pool may need starting)."""
    return selected_family(cfg).task_source(env_settings(cfg), cfg)


def make_agent(cfg: DictConfig) -> Any:
    return selected_family(cfg).agent(cfg)


def scenario_function(cfg: DictConfig) -> Callable[[str], str]:
    """task id -> scenario id, for SGC."""
    return selected_family(cfg).scenario_of


def check_environment(cfg: DictConfig) -> None:
    """Start-up check of what the selected family needs on this machine (ConfigError, one line); a warm start
    (`learner.sft_epochs` > 0, e.g. a preset's) needs a family that generates demonstrations."""
    selected = selected_family(cfg)
    selected.check(cfg, env_settings(cfg))
    if int(OmegaConf.select(cfg, "learner.sft_epochs", default=0) or 0) > 0 and (
        type(selected).demonstrations is EnvironmentFamily.demonstrations
    ):
        raise ConfigError(f"learner.sft_epochs={cfg.learner.sft_epochs} needs warm-start demonstrations, which "
                          f"env={cfg.env.name!r} does not generate (set learner.sft_epochs=0)")  # fmt: skip


def prepare_environment(cfg: DictConfig) -> None:
    """Driver side, once per run: whatever the family must have before a worker starts."""
    selected_family(cfg).prepare(cfg, env_settings(cfg))


async def start_task_source(source: Any) -> None:
    """Start the task source's servers if it has any (a pool); a no-op otherwise."""
    start = getattr(source, "start", None)
    if start is not None:
        await start()


async def close_task_source(source: Any) -> None:
    closer = getattr(source, "close", None)
    if closer is not None:
        result = closer()
        if hasattr(result, "__await__"):
            await result
