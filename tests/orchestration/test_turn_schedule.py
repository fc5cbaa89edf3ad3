"""ScalingInter-RL turn budgets, checked against hand-written tables, including resume at stage boundaries."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from loop_agents.orchestration.turn_schedule import (
    FixedTurnSchedule,
    StepwiseTurnSchedule,
    make_turn_schedule,
)


class ReferenceStepRoundsScheduler:
    """AgentGym-RL's StepRoundsScheduler as docs/reference-agentgym-rl.md §3 describes it (the buggy one)."""

    def __init__(self, k: int, rounds: list[int]):
        self.k, self.rounds, self.stage, self.counter = k, rounds, 0, 1

    def get(self) -> int:
        return self.rounds[self.stage]

    def step(self) -> None:
        if self.stage + 1 < len(self.rounds) and self.counter % self.k == 0:
            self.stage += 1
        self.counter += 1

    def set_global_steps(self, g: int) -> None:
        self.counter = g
        self.stage = min(g // self.k, len(self.rounds) - 1)


def test_fixed_is_constant():
    schedule = FixedTurnSchedule(15)
    assert [schedule.budget(i) for i in (0, 1, 2, 100, 10_000)] == [15] * 5


def test_stepwise_hand_table():
    # K = 3, budgets [6, 13, 20]: iterations 1-3 -> 6, 4-6 -> 13, 7+ -> 20
    schedule = StepwiseTurnSchedule((6, 13, 20), 3)
    expected = {0: 6, 1: 6, 2: 6, 3: 6, 4: 13, 5: 13, 6: 13, 7: 20, 8: 20, 50: 20}
    assert {i: schedule.budget(i) for i in expected} == expected


def test_stepwise_matches_reference_on_a_fresh_run():
    schedule = StepwiseTurnSchedule((10, 20, 30), 100)
    reference = ReferenceStepRoundsScheduler(100, [10, 20, 30])
    for step in range(1, 351):
        assert schedule.budget(step) == reference.get(), step
        reference.step()


@pytest.mark.parametrize("resume_at", [75, 100, 150, 200])
def test_resume_gives_the_uninterrupted_budget(resume_at):
    """Regression for reference §3: resuming at g must not change any later budget."""
    uninterrupted = StepwiseTurnSchedule((10, 20, 30), 100)
    resumed = make_turn_schedule({"kind": "stepwise", "budgets": [10, 20, 30], "stage_iterations": 100})
    for step in range(resume_at + 1, 320):
        assert resumed.budget(step) == uninterrupted.budget(step), step


def test_reference_scheduler_is_wrong_on_resume_and_ours_is_not():
    """The reference, resumed from step 100, uses 30 turns from step 102 (should be 201)."""
    reference = ReferenceStepRoundsScheduler(100, [10, 20, 30])
    reference.set_global_steps(100)
    seen = {}
    for step in range(101, 205):
        seen[step] = reference.get()
        reference.step()
    assert seen[101] == 20 and seen[102] == 30  # the bug, reproduced
    ours = StepwiseTurnSchedule((10, 20, 30), 100)
    assert [ours.budget(s) for s in (101, 102, 200, 201)] == [20, 20, 20, 30]


def test_built_from_hydra_node():
    node = OmegaConf.create(
        {"kind": "stepwise", "max_turns": 10, "budgets": [5, 8, 10], "stage_iterations": 2}
    )
    schedule = make_turn_schedule(node)
    assert [schedule.budget(i) for i in range(1, 8)] == [5, 5, 8, 8, 10, 10, 10]
    assert make_turn_schedule(OmegaConf.create({"kind": "fixed", "max_turns": 7})).budget(3) == 7


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"kind": "linear"}, "kind"),
        ({"kind": "stepwise", "budgets": []}, "at least one"),
        ({"kind": "stepwise", "budgets": [5, 0]}, ">= 1"),
        ({"kind": "stepwise", "budgets": [5], "stage_iterations": 0}, "stage_iterations"),
        ({"kind": "fixed", "max_turns": 0}, "max_turns"),
    ],
)
def test_bad_config_is_named(cfg, message):
    with pytest.raises(ValueError, match=message):
        make_turn_schedule(cfg)


def test_negative_iteration_is_rejected():
    with pytest.raises(ValueError, match="iteration"):
        FixedTurnSchedule(3).budget(-1)
