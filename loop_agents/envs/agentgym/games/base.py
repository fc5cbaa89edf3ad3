"""What the AgentGym-protocol server needs from a game: reset by item index, step by action text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class GameStep:
    """Result of reset or step, in AgentGym's terms: `reward` and `score` are the fields AgentGym's server
    for this env sends, on its scale (docs/agentgym_conformance.md); `success` is ours (the episode
    reached the goal); `extra` holds further fields AgentGym sends (SciWorld's `task_description`)."""

    observation: str
    reward: float
    done: bool
    score: float
    success: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The JSON reply: AgentGym's fields plus ours (`success`)."""
        return {"observation": self.observation, "reward": self.reward, "score": self.score,
                "done": self.done, "success": self.success, **self.extra}  # fmt: skip


class TextGame(Protocol):
    """One environment instance on the server (one per `/create`)."""

    system_prompt: str  # the instruction AgentGym sends as its conversation start
    score_scale: float  # the `score` of a fully solved item (SciWorld: 100; else 1)

    def reset(self, data_idx: int) -> GameStep: ...

    def on_create(self, env_id: int, body: dict[str, Any]) -> GameStep | None:
        """What `/create` answers besides the id (TextCraft: a first episode, as AgentGym's server)."""
        ...

    def step(self, action: str) -> GameStep: ...

    def available_actions(self) -> list[str]: ...

    def splits(self) -> dict[str, list[int]]: ...

    def close(self) -> None: ...


def index_splits(n_items: int, test_every: int = 10) -> dict[str, list[int]]:
    """Hash-free deterministic split of [0, n_items): i % 10 == 0 -> test, == 1 -> dev, else train."""
    return {
        "train": [i for i in range(n_items) if i % test_every not in (0, 1)],
        "dev": [i for i in range(n_items) if i % test_every == 1],
        "test": [i for i in range(n_items) if i % test_every == 0],
    }
