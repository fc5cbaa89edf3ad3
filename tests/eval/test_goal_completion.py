"""TGC/SGC against hand-computed values, including a scenario with 2 of 3 tasks passed (SGC 0 for it)."""

from __future__ import annotations

import math

import pytest

from loop_agents.eval import (
    TaskResult,
    goal_completion,
    goal_completion_by_difficulty,
    mean_over_runs,
    numbered_scenario_of,
    task_results_from_official,
    task_results_from_trajectories,
)
from loop_agents.rollout.trajectory import Trajectory

# s1: 2 of 3 pass (difficulty 1) -> scenario fails; s2: both pass (d2); s3: fails (d2); s4: passes (no difficulty)
OUTCOMES = [
    ("s1_1", True, 1), ("s1_2", True, 1), ("s1_3", False, 1),
    ("s2_1", True, 2), ("s2_2", True, 2), ("s3_1", False, 2), ("s4_1", True, None),
]  # fmt: skip


def results() -> list[TaskResult]:
    return [TaskResult(t, numbered_scenario_of(t), ok, d) for t, ok, d in OUTCOMES]


def test_aggregate_and_per_difficulty_by_hand():
    by = goal_completion_by_difficulty(results())
    assert set(by) == {"aggregate", "difficulty_1", "difficulty_2"}
    assert math.isclose(by["aggregate"].tgc, 5 / 7)
    assert by["aggregate"].sgc == 2 / 4  # s2 and s4 complete
    assert (by["aggregate"].num_tasks, by["aggregate"].num_scenarios) == (7, 4)
    assert math.isclose(by["difficulty_1"].tgc, 2 / 3)
    assert by["difficulty_1"].sgc == 0.0  # 2 of 3 tasks passed -> the scenario does not count
    assert math.isclose(by["difficulty_2"].tgc, 2 / 3)
    assert by["difficulty_2"].sgc == 1 / 2


def test_all_and_none():
    assert goal_completion([TaskResult("a_1", "a", True)]).sgc == 1.0
    gc = goal_completion([TaskResult("a_1", "a", False), TaskResult("b_1", "b", False)])
    assert (gc.tgc, gc.sgc) == (0.0, 0.0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="at least one"):
        goal_completion([])
    with pytest.raises(ValueError, match=r"s1_1.*more than once"):
        goal_completion(results() + [TaskResult("s1_1", "s1", False, 1)])
    with pytest.raises(ValueError, match="not of the form"):
        numbered_scenario_of("nounderscore")


def test_mean_over_runs():
    run1 = goal_completion_by_difficulty([TaskResult("a_1", "a", True, 1), TaskResult("a_2", "a", False, 1)])
    run2 = goal_completion_by_difficulty([TaskResult("a_1", "a", True, 1), TaskResult("a_2", "a", True, 1)])
    mean = mean_over_runs([run1, run2])
    assert mean["aggregate"]["tgc"] == 0.75
    assert mean["aggregate"]["sgc"] == 0.5
    assert math.isclose(mean["aggregate"]["tgc_std"], math.sqrt(0.125))  # stdev([0.5, 1.0])
    assert mean["difficulty_1"]["num_runs"] == 2.0
    with pytest.raises(ValueError, match="difficulty_1"):
        mean_over_runs([run1, {"aggregate": run2["aggregate"]}])


def test_from_trajectories_and_official():
    trajs = []
    for task_id, ok, difficulty in OUTCOMES:
        traj = Trajectory(task_id=task_id, group_id=task_id, success=ok)
        if difficulty is not None:
            traj.reward_details["difficulty"] = difficulty
        trajs.append(traj)
    assert task_results_from_trajectories(trajs) == results()
    overridden = task_results_from_trajectories(trajs[:1], difficulties={"s1_1": 3})
    assert overridden[0].difficulty == 3
    official = {t: {"success": ok, "difficulty": d} for t, ok, d in OUTCOMES}
    assert task_results_from_official(official) == results()
    with pytest.raises(ValueError, match="s1_1.*success"):
        task_results_from_official({"s1_1": {"passed": True}})
