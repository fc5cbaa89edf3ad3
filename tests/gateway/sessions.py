"""An EpisodeSession of the gem hunt for the gateway's tests: the real renderer and Hermes parser on `tokenizer`,
the gem hunt's tools, and whatever generator, environment and settings a test gives."""

from __future__ import annotations

from typing import Any

from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.gateway.recorder import EpisodeRecorder
from loop_agents.gateway.render import ConversationRenderer
from loop_agents.gateway.session import EpisodeSession
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.trajectory import Trajectory
from loop_agents.tools.parsers import parser_for


def gem_hunt_session(
    tokenizer: Any,
    generator: Any,
    cfg: EpisodeConfig,
    *,
    task: dict | None = None,
    env: Any = None,
    reset: Any = None,
    agent: Any = None,
    group_id: str = "g",
) -> EpisodeSession:
    task = task or {"task_id": "t"}
    return EpisodeSession(
        task=task,
        recorder=EpisodeRecorder(Trajectory(task_id=task["task_id"], group_id=group_id)),
        generator=generator,
        renderer=ConversationRenderer(tokenizer),
        parser=parser_for("qwen2_5"),
        env=env,
        reset=reset,
        agent=agent,
        tools=tuple(GEM_HUNT_TOOLS),
        cfg=cfg,
    )
