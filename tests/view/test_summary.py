"""Per-file summaries for the index: TGC/SGC over repeated evaluation runs, non-AppWorld task ids."""

from __future__ import annotations

import math

from loop_agents.rollout.trajectory import Trajectory
from loop_agents.view.summary import episode_file_summary, goal_completion_summary


def _traj(
    task_id: str, sample: int, success: bool, difficulty: int | None = None, filtered: bool | None = None
):
    traj = Trajectory(
        task_id=task_id, group_id=task_id, sample_index=sample, success=success, reward=float(success)
    )
    if difficulty is not None:
        traj.reward_details["difficulty"] = difficulty
    if filtered is not None:
        traj.metadata["filtered"] = filtered
    return traj


def test_two_evaluation_runs_are_averaged():
    # run 0: a_1 pass, a_2 fail, b_1 pass -> TGC 2/3, SGC 1/2; run 1: all pass -> TGC 1, SGC 1
    trajectories = [
        _traj("a_1", 0, True, 1), _traj("a_2", 0, False, 1), _traj("b_1", 0, True, 2),
        _traj("a_1", 1, True, 1), _traj("a_2", 1, True, 1), _traj("b_1", 1, True, 2),
    ]  # fmt: skip
    summary = goal_completion_summary(trajectories)
    assert summary["eval_runs"] == 2.0
    assert math.isclose(summary["tgc"], (2 / 3 + 1) / 2)
    assert summary["sgc"] == 0.75
    assert (summary["tgc_1"], summary["sgc_1"]) == (0.75, 0.5)  # d1: 1/2 then 1
    assert (summary["tgc_2"], summary["sgc_2"]) == (1.0, 1.0)


def test_task_ids_without_scenarios_count_as_their_own_scenario():
    summary = goal_completion_summary([_traj("babyai-goto", 0, True), _traj("textcraft", 0, False)])
    assert (summary["tgc"], summary["sgc"]) == (0.5, 0.5)


def test_file_summary():
    summary = episode_file_summary(
        [
            _traj("a_1", 0, True, filtered=True),
            _traj("a_1", 1, False, filtered=False),
            _traj("b_1", 0, False),
        ],
        with_goal_completion=False,
    )
    assert (summary["episodes"], summary["groups"], summary["dropped_fraction"]) == (3, 2, 0.5)
    assert math.isclose(summary["reward_mean"], 1 / 3) and "tgc" not in summary
    assert summary["behaviour/num_trajectories"] == 3.0
