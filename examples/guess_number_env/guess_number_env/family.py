"""The family object loop_agents finds through the entry point `loop_agents.environments: guess_number`.

Required parts: `name`, `settings_class` (typing `env.options`), `task_source(settings, cfg)`, `agent(cfg)`.
Optional parts used here: `label`, `env_config` (the `env.*` defaults of `env=guess_number`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guess_number_env.game import SYSTEM_PROMPT, Game, secret_of, task_ids
from loop_agents.envs.family import EnvironmentFamily
from loop_agents.rollout.environment import Evaluation, ResetResult, StepResult
from loop_agents.rollout.text_agent import TextActionAgent


@dataclass
class GuessNumberSettings:
    """`env.options` of `env=guess_number`."""

    high: int = 16  # the secret is in [1, high]
    max_guesses: int = 5  # guesses per episode

    def __post_init__(self) -> None:
        if self.high < 2:
            raise ValueError(f"env.options.high={self.high} must be >= 2")
        if self.max_guesses < 1:
            raise ValueError(f"env.options.max_guesses={self.max_guesses} must be >= 1")


class GuessNumberEnvironment:
    """One episode (the `loop_agents.rollout.environment.Environment` protocol), in process."""

    def __init__(self, settings: GuessNumberSettings) -> None:
        self.settings = settings
        self.game: Game | None = None

    async def reset(self, task_id: str) -> ResetResult:
        self.game = Game(
            secret_of(task_id, self.settings.high), self.settings.high, self.settings.max_guesses
        )
        return ResetResult(
            self.game.first_observation(), {"system_prompt": SYSTEM_PROMPT, "task_id": task_id}
        )

    async def step(self, action: str) -> StepResult:
        observation, done = self.game.step(action)
        return StepResult(observation, done)

    async def evaluate(self) -> Evaluation:
        return Evaluation(self.game.reward, self.game.found, {"guesses": self.game.guesses})

    async def close(self) -> None:
        self.game = None


class GuessNumberTasks:
    """The `TaskSource` protocol: task ids per split, one environment per episode."""

    def __init__(self, settings: GuessNumberSettings) -> None:
        self.settings = settings

    def task_ids(self, split: str) -> list[str]:
        return task_ids(split)

    async def make_env(self) -> GuessNumberEnvironment:
        return GuessNumberEnvironment(self.settings)


class GuessNumberFamily(EnvironmentFamily):
    name = "guess_number"
    label = "guess the number"
    settings_class = GuessNumberSettings
    env_config = {
        "train_split": "train",
        "eval_split": "dev",
        "observation_max_tokens": 64,
        "concurrency": 8,
        "turn_schedule": {"kind": "fixed", "max_turns": 5},
    }

    def task_source(self, settings: GuessNumberSettings, cfg: Any) -> GuessNumberTasks:
        return GuessNumberTasks(settings)

    def agent(self, cfg: Any) -> TextActionAgent:
        return TextActionAgent()


FAMILY = GuessNumberFamily()
