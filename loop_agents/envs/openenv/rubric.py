"""The reward of a served episode in OpenEnv's rubric shape (its `Rubric` and trajectory rubric classes).

An episode's reward is delayed: 0 for every step until `done`, then the family's own evaluation of the state the
episode left (`r_t = 0` for t < T-1, `r_{T-1} = score`; OpenEnv's exponential discounting with gamma = 0). The
score is what our trainer's in-process episodes are scored with (`Evaluation.reward`): AppWorld's TGC pass fraction
(passed tests / tests, `env.reward=partial`), the games' success score (BabyAI, TextCraft, SciWorld: the game's own
scaled score; the gem hunt: 1 when solved, partial credit for each container of the chain opened). The child rubric
`success` holds the family's success (1.0 / 0.0) of the same episode, for introspection
(`env.rubric.named_rubrics()`).

Runs in `.venv-openenv` (OpenEnv's server): the observation handed to the rubric carries the host's evaluation in
its `score` and `success` fields (wire.py).
"""

from __future__ import annotations

from typing import Any

from openenv.core.rubrics.base import Rubric
from openenv.core.rubrics.trajectory import ExponentialDiscountingTrajectoryRubric


class EpisodeSuccess(Rubric):
    """1.0 when the family says the episode succeeded, else 0.0 (0.0 until the episode is scored)."""

    def forward(self, action: Any, observation: Any) -> float:
        return 1.0 if getattr(observation, "success", None) else 0.0


class FamilyScore(ExponentialDiscountingTrajectoryRubric):
    """The family's evaluation of the episode at `done` (0 before); all the credit on the last step (gamma 0)."""

    def __init__(self) -> None:
        super().__init__(gamma=0.0, intermediate_reward=0.0)
        self.success = EpisodeSuccess()

    def forward(self, action: Any, observation: Any) -> float:
        self.success(action, observation)
        return super().forward(action, observation)

    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        _, last = trajectory[-1]
        score = getattr(last, "score", None)
        return float(score) if score is not None else 0.0

    def reset(self) -> None:
        super().reset()
        self.success.last_score = None
