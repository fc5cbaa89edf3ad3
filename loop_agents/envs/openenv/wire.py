"""The wire types of our OpenEnv server: what an action, an observation and a state hold (OpenEnv pydantic models).

A client of our server sends `{"text": "<action>"}` (and `{"finish": true}` to end an episode early and have it
scored, as a turn budget does); it receives the observation `text`, the task facts of the reset (`info`, e.g. the
family's system prompt) and, when `done`, the family's own score (`reward` = the evaluation's reward, `success`).
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

ACTION_FIELD = "text"
FINISH_FIELD = "finish"


class LoopAction(Action):
    """One action of the served family's agent (one assistant message's action), as text."""

    text: str = Field(default="", description="the action, as the family's text agent sends it")
    finish: bool = Field(
        default=False, description="end the episode now and score it (the turn budget is spent)"
    )


class LoopObservation(Observation):
    """The family's observation as text; at `done`, its evaluation (`reward` is the evaluation's reward)."""

    text: str = Field(default="", description="the observation, rendered as the family renders it")
    task_id: str = Field(default="", description="the task this episode plays")
    info: dict[str, Any] = Field(
        default_factory=dict, description="task facts of the reset (system_prompt, ...)"
    )
    success: bool | None = Field(default=None, description="at done: the family's success")
    details: dict[str, Any] = Field(
        default_factory=dict, description="at done: the family's evaluation details"
    )


class LoopState(State):
    """Which task the session plays and whether its episode has ended."""

    task_id: str = Field(default="", description="the task of the current episode")
    done: bool = Field(default=False, description="whether the episode has ended")
