"""The one environment protocol every environment implements (AppWorld, AgentGym-style, bundled).

An episode is: `reset(task_id)` → (`step(action)` …) → `evaluate()` → `close()`. Methods are async
so that one process can drive many concurrent episodes; implementations put timeouts on every
request and raise `EnvironmentFailure` when the environment itself broke (as opposed to the
agent doing something wrong, which is an ordinary observation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class EnvironmentFailure(RuntimeError):
    """The environment (not the agent) failed: server died, timed out, returned garbage."""


@dataclass
class ResetResult:
    """First observation of an episode plus task facts the agent's prompt may use."""

    observation: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepResult:
    """What one action produced."""

    observation: str
    done: bool
    reward: float | None = None  # per-step reward where the environment has one
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evaluation:
    """Final score of an episode: `reward` in [0, 1] (partial credit), `success` = fully solved."""

    reward: float
    success: bool
    details: dict[str, Any] = field(default_factory=dict)


class Environment(Protocol):
    """One episode's environment session."""

    async def reset(self, task_id: str) -> ResetResult: ...

    async def step(self, action: str) -> StepResult: ...

    async def evaluate(self) -> Evaluation: ...

    async def close(self) -> None: ...


class TaskSource(Protocol):
    """Lists the task ids of a split, and creates environment sessions."""

    def task_ids(self, split: str) -> list[str]: ...

    async def make_env(self) -> Environment: ...
