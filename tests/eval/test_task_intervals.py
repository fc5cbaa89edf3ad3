"""One evaluation's intervals (loop_agents/eval/task_intervals.py) on hand-made episodes: task means, SGC over
scenarios, pass@k, the episodes behind each and the missing ones, the paired difference of two checkpoints, and
the flat keys the evaluator logs (through evaluation_metrics)."""

from __future__ import annotations

import pytest

from loop_agents.eval.episode_metrics import evaluation_metrics
from loop_agents.eval.goal_completion import numbered_scenario_of
from loop_agents.eval.stats import bootstrap_mean, pass_at_k
from loop_agents.eval.task_intervals import interval_report, paired_report
from loop_agents.rollout.trajectory import Trajectory


def _episodes(table: dict[str, list[bool | None]]) -> list[Trajectory]:
    """task -> success per run (None: that run's episode was lost)."""
    return [
        Trajectory(task_id=task, group_id=task, sample_index=run, success=ok)
        for task, runs in table.items()
        for run, ok in enumerate(runs)
        if ok is not None
    ]


# scenario a: a_1, a_2 (difficulty 1); scenario b: b_1 (difficulty 2); 3 runs, a_2 lost in run 2
TABLE = {"a_1": [True, True, False], "a_2": [True, False, None], "b_1": [False, False, True]}
LEVELS = {"a_1": 1, "a_2": 1, "b_1": 2}


def test_interval_report_per_split_and_difficulty_counts_what_it_has() -> None:
    report = interval_report(_episodes(TABLE), sorted(TABLE), 3, numbered_scenario_of, LEVELS)
    agg = report["aggregate"]
    assert (agg["tasks"], agg["runs"], agg["episodes"], agg["missing"]) == (3, 3, 8, 1)
    means = [2 / 3, 1 / 2, 1 / 3]  # a_1, a_2 (two runs), b_1
    assert agg["success"] == bootstrap_mean(means).as_dict() and agg["success"]["n"] == 3
    # scenario a: runs 0 and 1 have both tasks -> all passed in run 0 only: 1/2; b: 1/3
    assert agg["sgc"]["mean"] == pytest.approx((1 / 2 + 1 / 3) / 2) and agg["sgc"]["n"] == 2
    assert agg["k"] == 2 and agg["avg@k"] == pytest.approx(sum(means) / 3)
    expected = (pass_at_k(3, 2, 2) + pass_at_k(2, 1, 2) + pass_at_k(3, 1, 2)) / 3  # (1 + 1/2 + 2/3) / 3
    assert agg["pass@k"] == pytest.approx(expected)
    one = report["difficulty_1"]
    assert (one["tasks"], one["episodes"], one["missing"], one["success"]["n"]) == (2, 5, 1, 2)
    assert report["difficulty_2"]["success"]["mean"] == pytest.approx(1 / 3)


def test_a_task_without_any_episode_is_counted_as_missing_not_as_a_failure() -> None:
    report = interval_report(_episodes({"t_1": [True, True]}), ["t_1", "t_2"], 2, lambda t: t)["aggregate"]
    assert report["tasks"] == 2 and report["tasks_with_episodes"] == 1 and report["missing"] == 2
    assert report["success"]["mean"] == 1.0 and report["success"]["n"] == 1
    empty = interval_report([], ["t_1"], 1, lambda t: t)["aggregate"]
    assert empty["missing"] == 1 and "success" not in empty


def test_paired_report_uses_only_the_pairs_both_sides_played() -> None:
    base = _episodes({"x": [False, False], "y": [True, False], "z": [True, True]})
    other = _episodes({"x": [True, True], "y": [True, None], "z": [True, True]})  # y's run 1 lost
    got = paired_report(base, other, ["x", "y", "z"])
    assert got["tasks"] == 3 and got["pairs"] == 5
    # per task other - base: x 1 - 0, y (run 0 only) 1 - 1, z 0 -> mean 1/3
    assert got["difference"]["mean"] == pytest.approx(1 / 3)
    assert got["difference"]["low"] == 0.0 and got["difference"]["high"] == 1.0
    assert got["base"] == pytest.approx(2 / 3) and got["other"] == 1.0


def test_evaluation_metrics_carry_the_interval_keys() -> None:
    m = evaluation_metrics(_episodes(TABLE), numbered_scenario_of, LEVELS)
    assert m["eval/success_low"] <= 0.5 <= m["eval/success_high"]
    assert m["eval/episodes"] == 8 and m["eval/missing"] == 1 and m["eval/k"] == 2
    assert m["eval/difficulty_1/episodes"] == 5 and "eval/difficulty_2/sgc_low" in m
    assert m["eval/tgc"] == pytest.approx(0.5)  # the mean still covers the complete runs 0 and 1 only
