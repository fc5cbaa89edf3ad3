"""Reward from an AppWorld test report and TGC/SGC, against hand-computed values."""

from __future__ import annotations

import pytest

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.metrics import goal_completion, goal_completion_by_difficulty
from loop_agents.envs.appworld.reward import evaluation_from_report

REPORT = {
    "success": False,
    "difficulty": 2,
    "num_tests": 4,
    "passes": [{"requirement": "a", "label": None}, {"requirement": "b", "label": None},
               {"requirement": "c", "label": None}],
    "failures": [{"requirement": "d", "trace": "AssertionError: 5 == 3", "label": None}],
}  # fmt: skip


def test_partial_and_success_rewards():
    partial = evaluation_from_report(REPORT, "partial")
    assert partial.reward == 0.75 and not partial.success
    assert partial.details["tests"][3] == {
        "requirement": "d",
        "passed": False,
        "message": "AssertionError: 5 == 3",
    }
    assert evaluation_from_report(REPORT, "success").reward == 0.0
    full = {
        **REPORT,
        "success": True,
        "passes": REPORT["passes"] * 1 + [{"requirement": "d"}],
        "failures": [],
    }
    assert evaluation_from_report(full, "success").reward == 1.0
    with pytest.raises(ValueError, match="reward mode"):
        evaluation_from_report(REPORT, "dense")
    with pytest.raises(ValueError, match="passes/failures"):
        evaluation_from_report({"success": True}, "partial")


def test_tgc_sgc_hand_computed():
    # scenario a: 3/3 pass; scenario b: 2/3 pass -> TGC 5/6, SGC 1/2
    results = {"a_1": True, "a_2": True, "a_3": True, "b_1": True, "b_2": False, "b_3": True}
    metrics = goal_completion(results)
    assert metrics["tgc"] == pytest.approx(100 * 5 / 6) and metrics["sgc"] == 50.0
    by_level = goal_completion_by_difficulty(
        results, {"a_1": 1, "a_2": 1, "a_3": 1, "b_1": 2, "b_2": 2, "b_3": 2}
    )
    assert by_level["difficulty_1"]["tgc"] == 100.0 and by_level["difficulty_2"]["sgc"] == 0.0
    assert by_level["difficulty_2"]["tgc"] == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="scenario"):
        goal_completion({"nounderscore": True})


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="reward"):
        AppWorldConfig(reward="dense")
    with pytest.raises(ValueError, match="loopback"):
        AppWorldConfig(host="0.0.0.0")
    with pytest.raises(FileNotFoundError, match="install_appworld"):
        AppWorldConfig(python="/nonexistent/python").check_installed()
