"""Evaluation metrics over runs, checked against hand-computed TGC/SGC."""

from __future__ import annotations

import pytest

from loop_agents.eval.episode_metrics import evaluation_metrics
from loop_agents.eval.goal_completion import numbered_scenario_of
from loop_agents.rollout.trajectory import Trajectory


def _traj(task: str, run: int, success: bool, reward: float) -> Trajectory:
    return Trajectory(task_id=task, group_id=task, sample_index=run, reward=reward, success=success)


def test_tgc_sgc_per_run_then_mean_and_per_difficulty() -> None:
    # scenarios a (tasks a_1, a_2, difficulty 1) and b (b_1, difficulty 2); two runs
    run0 = [_traj("a_1", 0, True, 1.0), _traj("a_2", 0, True, 1.0), _traj("b_1", 0, False, 0.5)]
    run1 = [_traj("a_1", 1, True, 1.0), _traj("a_2", 1, False, 0.25), _traj("b_1", 1, True, 1.0)]
    m = evaluation_metrics(run0 + run1, numbered_scenario_of, {"a_1": 1, "a_2": 1, "b_1": 2})
    # run0: TGC 2/3, SGC 1/2 ; run1: TGC 2/3, SGC 1/2 (b passes, a fails)
    assert m["eval/tgc"] == pytest.approx(2 / 3)
    assert m["eval/sgc"] == pytest.approx(0.5)
    # difficulty 1: run0 TGC 1, SGC 1 ; run1 TGC 1/2, SGC 0 -> means 0.75 and 0.5
    assert m["eval/difficulty_1/tgc"] == pytest.approx(0.75)
    assert m["eval/difficulty_1/sgc"] == pytest.approx(0.5)
    assert m["eval/difficulty_2/tgc"] == pytest.approx(0.5)
    assert m["eval/success_rate"] == pytest.approx(4 / 6)
    assert m["eval/reward_mean"] == pytest.approx((1 + 1 + 0.5 + 1 + 0.25 + 1) / 6)
    assert m["eval/num_tasks"] == 3 and m["eval/num_runs"] == 2


def test_a_run_missing_an_episode_is_left_out_of_the_means() -> None:
    full = [_traj("a_1", 0, True, 1.0), _traj("a_2", 0, False, 0.0)]
    partial = [_traj("a_1", 1, False, 0.0)]  # a_2 of run 1 was lost
    m = evaluation_metrics(full + partial, numbered_scenario_of)
    assert m["eval/num_runs"] == 1 and m["eval/tgc"] == pytest.approx(0.5)


def test_no_episodes_gives_zero_tasks() -> None:
    assert evaluation_metrics([], numbered_scenario_of) == {"eval/num_tasks": 0.0}
