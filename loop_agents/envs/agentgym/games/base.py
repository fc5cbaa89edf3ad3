"""What the AgentGym-protocol server needs from a game: reset by item index, step by action text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class GameStep:
    """Result of reset or step, in AgentGym's terms: `reward` is the env's own reward field (AgentGym-RL
    uses the last one as the trajectory reward); `score` is the normalised partial credit in [0, 1]."""

    observation: str
    reward: float
    done: bool
    score: float
    success: bool


class TextGame(Protocol):
    """One environment instance on the server (one per `/create`)."""

    system_prompt: str  # the instruction AgentGym sends as its conversation start

    def reset(self, data_idx: int) -> GameStep: ...

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
