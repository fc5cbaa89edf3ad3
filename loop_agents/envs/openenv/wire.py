"""The wire types of our OpenEnv server: what an action, an observation and a state hold (OpenEnv pydantic models).

An action is one of three shapes:
- a tool call, as OpenEnv's MCP clients send it: `{"type": "call_tool", "tool_name": ..., "arguments": {...}}`
  (and `{"type": "list_tools"}`); the reply is a `LoopToolObservation` (OpenEnv's `CallToolObservation` plus ours);
- the text action of the earlier protocol: `{"text": "<action>"}`, and `{"finish": true}` to end an episode early
  and have it scored, as a turn budget does; the reply is a `LoopObservation`.
Every reply carries the observation `text`; the reset's carries the task facts (`info`, e.g. the family's system
prompt). In simulation mode an episode's last reply (`done`) carries the rubric's reward, `success` and `score`.
"""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.mcp_types import CallToolObservation
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

ACTION_FIELD = "text"
FINISH_FIELD = "finish"


class LoopAction(Action):
    """A tool call (`type` call_tool / list_tools, as OpenEnv's MCP clients send) or a text action (`type` text)."""

    type: Literal["text", "call_tool", "list_tools"] = Field(
        default="text", description="which kind of action"
    )
    text: str = Field(default="", description="the text action, as the family's text agent sends it")
    finish: bool = Field(
        default=False, description="end the episode now and score it (the turn budget is spent)"
    )
    tool_name: str = Field(default="", description="call_tool: the tool")
    arguments: dict[str, Any] = Field(default_factory=dict, description="call_tool: its arguments")


class Outcome(Observation):
    """What every reply of ours carries besides OpenEnv's `done`, `reward` and `metadata`."""

    text: str = Field(default="", description="the observation, rendered as the family renders it")
    task_id: str = Field(default="", description="the task this episode plays")
    success: bool | None = Field(default=None, description="simulation mode, at done: the family's success")
    score: float | None = Field(default=None, description="simulation mode, at done: the family's reward")
    details: dict[str, Any] = Field(
        default_factory=dict, description="simulation mode, at done: scalar evaluation details"
    )


class LoopObservation(Outcome):
    """The reply of a reset or a text action."""

    info: dict[str, Any] = Field(
        default_factory=dict, description="task facts of the reset (system_prompt, ...)"
    )


class LoopToolObservation(CallToolObservation, Outcome):
    """The reply of a tool call: OpenEnv's (`tool_name`, `result`, `error`) and ours (`text`, ...)."""


class LoopState(State):
    """Which task the session plays, whether its episode has ended, and its tool errors so far."""

    task_id: str = Field(default="", description="the task of the current episode")
    done: bool = Field(default=False, description="whether the episode has ended")
    tool_errors: int = Field(
        default=0, description="tool calls whose arguments did not fit the tool's schema"
    )
