"""The game: find a secret number in [1, high] from "higher"/"lower" answers, within a guess budget.

Task ids are `<split>/<n>`; the secret is drawn from the id, so an episode replays exactly. Reward: 1 when found,
else the fraction of the range the guesses ruled out (partial credit for a good search).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

SYSTEM_PROMPT = (
    "You play guess-the-number. Each message is one action: `guess <n>`. The game answers higher, lower or "
    "correct."
)
SPLIT_SIZES = {"train": 200, "dev": 40}
_GUESS = re.compile(r"^guess\s+(-?\d+)$")


def task_ids(split: str, count: int | None = None) -> list[str]:
    if split not in SPLIT_SIZES:
        raise ValueError(f"guess_number has no split {split!r}; choose one of {sorted(SPLIT_SIZES)}")
    return [f"{split}/{n}" for n in range(count or SPLIT_SIZES[split])]


def secret_of(task_id: str, high: int) -> int:
    return random.Random(task_id).randint(1, high)


@dataclass
class Game:
    secret: int
    high: int
    max_guesses: int
    low_bound: int = 1
    high_bound: int = 0
    guesses: int = 0
    found: bool = False
    history: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.high_bound = self.high

    def first_observation(self) -> str:
        return f"I picked a number from 1 to {self.high}. You have {self.max_guesses} guesses."

    def step(self, action: str) -> tuple[str, bool]:
        """(observation, done) after one action; a malformed action costs a guess and says why."""
        self.guesses += 1
        match = _GUESS.match(action.strip().lower())
        if match is None:
            observation = "Invalid action: write `guess <n>`."
        else:
            value = int(match.group(1))
            self.history.append(value)
            if value == self.secret:
                self.found = True
                return "correct", True
            if value < self.secret:
                self.low_bound = max(self.low_bound, value + 1)
                observation = "higher"
            else:
                self.high_bound = min(self.high_bound, value - 1)
                observation = "lower"
        return observation, self.guesses >= self.max_guesses

    @property
    def reward(self) -> float:
        if self.found:
            return 1.0
        return 1.0 - (self.high_bound - self.low_bound + 1) / self.high
