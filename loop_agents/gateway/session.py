"""One episode's state on the gateway: its key, environment, recorder, budgets, and why it ended.

Everything a request can reach hangs off the session its key names, so one episode's key can neither read nor
extend another episode's calls. The first ending wins (`end`); the episode's runner waits on `ended_event` to stop
the program and score the environment.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

from loop_agents.gateway.messages import RequestError
from loop_agents.gateway.recorder import EpisodeRecorder
from loop_agents.gateway.render import ConversationRenderer
from loop_agents.inference.protocol import TokenGenerator
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.environment import Environment, ResetResult
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.parsers import ToolCallParser
from loop_agents.tools.spec import ToolSpec


@dataclass
class EpisodeSession:
    """The gateway's view of one running episode."""

    task: dict[str, Any]  # what the program is given: task_id, sample_index, messages, prompt
    recorder: EpisodeRecorder
    generator: TokenGenerator
    renderer: ConversationRenderer
    parser: ToolCallParser
    env: Environment
    reset: ResetResult
    agent: Any  # the family's agent: the text of an observation (format_observation)
    tools: tuple[ToolSpec, ...]
    cfg: EpisodeConfig
    key: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    model_calls: int = 0
    tool_calls: int = 0
    ended: FinishReason | None = None
    end_error: str = ""
    model_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    env_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended_event: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def call_budget(self) -> int:
        """Model calls, and tool calls, each at most the episode's turn budget (an in-process agent's turns)."""
        return self.cfg.max_turns

    def end(self, reason: FinishReason, error: str = "") -> None:
        """The episode is over (the first reason given is kept); the runner stops the program and scores it."""
        if self.ended is None:
            self.ended, self.end_error = reason, error
            self.ended_event.set()

    def check_open(self) -> None:
        if self.ended is not None:
            raise RequestError(409, f"the episode is over ({self.ended.value})", "episode_over")

    def count(self, what: str, kind: str) -> None:
        """Count one event under `metadata[what][kind]` (tool_errors: the same metric as agent=tools)."""
        counts = self.recorder.trajectory.metadata.setdefault(what, {})
        counts[kind] = counts.get(kind, 0) + 1
