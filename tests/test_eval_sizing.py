"""benchmarks/eval_sizing.py reads an evaluation's episodes into a tasks × runs table and sizes the next one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import eval_sizing
from loop_agents.checkpoint_eval.episode_store import EpisodeStore
from loop_agents.rollout.trajectory import Trajectory

# 4 tasks x 2 runs (σ_b² = 1/24, σ_w² = 1/4: tests/eval/test_stats.py) and a fifth task lost in run 1
SUCCESS = {"a": (1, 1), "b": (0, 0), "c": (1, 0), "d": (0, 1), "e": (1, None)}


def _evaluation(out: Path) -> Path:
    store = EpisodeStore(out)
    for task, runs in SUCCESS.items():
        for run, success in enumerate(runs):
            if success is not None:
                store.append(Trajectory(task_id=task, group_id=f"eval/{task}", success=bool(success)), run)
    return out


def test_the_table_keeps_tasks_played_in_every_run_in_sorted_order(tmp_path):
    tasks, table = eval_sizing.success_table(_evaluation(tmp_path / "e"), max_tasks=None)
    assert tasks == ["a", "b", "c", "d"] and table.tolist() == [[1, 1], [0, 0], [1, 0], [0, 1]]
    assert eval_sizing.success_table(tmp_path / "e", max_tasks=3)[0] == [
        "a",
        "b",
        "c",
    ]  # eval.max_tasks' first


def test_a_row_reports_the_components_and_what_reaches_the_target(tmp_path):
    row = eval_sizing.sizing_row(_evaluation(tmp_path / "e"), None, half_width=0.5)
    assert (row["tasks"], row["runs"], row["success"]) == (4, 2, 0.5)
    assert (row["between"], row["within"]) == pytest.approx((1 / 24, 1 / 4))
    assert row["half_width"]["1"] == pytest.approx(1.959964 * math.sqrt((1 / 24 + 1 / 4) / 4), rel=1e-6)
    # ±0.5 on 4 tasks: (0.5 / 1.96)² * 4 = 0.2603 leaves 0.2186 for σ_w²/k -> k = 2; at 1 run 1.96² * 0.2917 / 0.25
    assert row["runs_for_target"] == 2 and row["tasks_for_target_at_1_run"] == 5
    narrow = eval_sizing.sizing_row(tmp_path / "e", None, half_width=0.1)  # σ_b² alone gives ±0.2 on 4 tasks
    assert narrow["runs_for_target"] is None
    summary = eval_sizing.summarise([row, narrow])
    assert summary["runs_for_target"] is None and summary["tasks_for_target_at_1_run"] == 113


def test_one_run_cannot_split_the_variance(tmp_path):
    store = EpisodeStore(tmp_path / "one")
    store.append(Trajectory(task_id="a", group_id="eval/a", success=True), 0)
    with pytest.raises(ValueError, match="runs >= 2"):
        eval_sizing.success_table(tmp_path / "one", None)
