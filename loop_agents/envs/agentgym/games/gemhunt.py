"""The bundled gem hunt behind the AgentGym protocol (so the HTTP path can serve the CPU demo too)."""

from __future__ import annotations

from loop_agents.envs.agentgym.games.base import GameStep
from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
from loop_agents.envs.bundled.tasks import SPLITS, generate_task


class GemHuntServerGame:
    system_prompt = SYSTEM_PROMPT

    def __init__(self, spare_moves: int = 1) -> None:
        self.spare_moves = spare_moves
        self.game: GemHuntGame | None = None

    def reset(self, data_idx: int) -> GameStep:
        if data_idx >= SPLITS["test"].stop:
            raise ValueError(f"gemhunt item {data_idx} is outside every split (0..{SPLITS['test'].stop - 1})")
        self.game = GemHuntGame(generate_task(data_idx), spare_moves=self.spare_moves)
        return GameStep(self.game.first_observation(), 0.0, False, 0.0, False)

    def step(self, action: str) -> GameStep:
        assert self.game is not None
        observation, reward, done = self.game.step(action)
        return GameStep(observation, reward, done, reward, self.game.solved)

    def available_actions(self) -> list[str]:
        return self.game.available_actions() if self.game else []

    def splits(self) -> dict[str, list[int]]:
        return {name: list(indices) for name, indices in SPLITS.items()}

    def close(self) -> None:
        self.game = None
