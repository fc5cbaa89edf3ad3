"""The warm start's demonstrations, loss weights and checks, asked of the selected environment family.

The family gives (task id, messages) demonstrations; here they become token-exact trajectories (assistant turns
trainable) with the run's chat format. A family without a demonstrator cannot warm-start (`learner.sft_epochs`
must stay 0).
"""

from __future__ import annotations

from omegaconf import DictConfig

from loop_agents.envs.selected import selected_family
from loop_agents.envs.settings import env_settings
from loop_agents.progress_lines import ticked
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.demonstration import demonstration_trajectory
from loop_agents.rollout.trajectory import Trajectory


def demonstrations(cfg: DictConfig, chat: ChatFormat) -> list[Trajectory]:
    """Warm-start demonstrations of the selected family as token-exact trajectories."""
    drawn = selected_family(cfg).demonstrations(cfg, env_settings(cfg), chat)
    if drawn is None:
        raise ValueError(
            f"learner.sft_epochs > 0 needs demonstrations, which env={cfg.env.name!r} does not generate "
            "(set learner.sft_epochs=0)"
        )
    return [
        demonstration_trajectory(chat, messages, task_id)
        for task_id, messages in ticked(drawn, "warm start", len(drawn), "demonstrations tokenized")
    ]


def demonstration_weights(
    cfg: DictConfig, chat: ChatFormat, demos: list[Trajectory]
) -> list[list[float]] | None:
    """Per-token loss weights of the warm start's demonstrations, or None (every token alike)."""
    return selected_family(cfg).demonstration_weights(cfg, env_settings(cfg), chat, demos)


def warm_start_checks(cfg: DictConfig, chat: ChatFormat, training_task_ids: set[str]):
    """(readiness, stall probe) of the warm start; (None, None) when the family has none."""
    return selected_family(cfg).warm_start_checks(cfg, env_settings(cfg), chat, training_task_ids)
