"""The bundled environment in-process: the async Environment protocol over `GemHuntGame`."""

from __future__ import annotations

from loop_agents.envs.bundled.config import BundledEnvConfig
from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id, task_ids
from loop_agents.rollout.environment import Evaluation, ResetResult, StepResult


class BundledEnvironment:
    """One gem hunt episode at a time (`reset` starts a new one)."""

    def __init__(self, spare_moves: int = 1, quoted: bool = False) -> None:
        self.spare_moves = spare_moves
        self.quoted = quoted
        self.game: GemHuntGame | None = None

    def _game(self) -> GemHuntGame:
        if self.game is None:
            raise RuntimeError("BundledEnvironment: call reset(task_id) before step/evaluate")
        return self.game

    async def reset(self, task_id: str) -> ResetResult:
        task = generate_task(parse_task_id(task_id))
        self.game = GemHuntGame(task, spare_moves=self.spare_moves, quoted=self.quoted)
        return ResetResult(
            self.game.first_observation(),
            {"system_prompt": SYSTEM_PROMPT, "task_id": task_id, "max_moves": self.game.max_moves},
        )

    async def step(self, action: str) -> StepResult:
        observation, reward, done = self._game().step(action)
        return StepResult(observation, done, reward)

    async def evaluate(self) -> Evaluation:
        game = self._game()
        return Evaluation(
            reward=game.reward,
            success=game.solved,
            details={"found": game.found, "chain_length": len(game.task.chain), "moves": game.moves},
        )

    async def close(self) -> None:
        self.game = None


class BundledTaskSource:
    """Task ids of the gem hunt splits, and in-process environments (`quoted`: names in quotes, GemHuntGame's)."""

    def __init__(self, config: BundledEnvConfig | None = None, quoted: bool = False) -> None:
        self.config = config or BundledEnvConfig()
        self.quoted = quoted

    def task_ids(self, split: str) -> list[str]:
        return task_ids(split)

    async def make_env(self) -> BundledEnvironment:
        return BundledEnvironment(self.config.spare_moves, self.quoted)
