"""Phase times from hand-made clock marks and metrics rows; summary.json and the best record."""

from __future__ import annotations

import json
import time
from pathlib import Path

from omegaconf import OmegaConf

from loop_agents.orchestration.run_report import PhaseClock, best_record, finish


def test_phases_subtract_the_warm_start_from_the_start_up_and_sum_this_process_rows():
    now = time.time()
    clock = PhaseClock(
        process_start=now - 100.0, warm_start_s=30.0, first_rollout_at=now - 60.0, eval_wait_s=4.0
    )
    rows = [
        {"iteration": 0, "sft/loss": 0.3},
        {"iteration": 1, "rollout/count": 4, "time/rollout": 10.0, "time/learn": 3.0, "time/sync": 0.5},
        {"iteration": 2, "rollout/count": 4, "time/rollout": 12.0, "time/learn": 2.0, "time/sync": 0.5},
        {"iteration": 2, "eval/success_rate": 0.5},
    ]
    phases = clock.phases(rows, first_iteration=2)  # resumed at 2: iteration 1 was another process's
    assert phases["warm start"] == 30.0
    assert abs(phases["start-up"] - 10.0) < 1e-6  # 100 - 60 - 30
    assert (phases["rollout"], phases["learn"], phases["sync"], phases["eval"]) == (12.0, 2.0, 0.5, 4.0)
    assert 99.0 < phases["total"] < 110.0
    assert PhaseClock(warm_start_cached=True).phases([], 1)["warm start"] is None


def test_finish_prints_and_writes_summary(tmp_path: Path, capsys):
    best = tmp_path / "checkpoints" / "best"
    best.mkdir(parents=True)
    (best / "eval.json").write_text(
        json.dumps({"iteration": 2, "value": 0.75, "metric": "eval/success_rate"})
    )
    assert best_record(tmp_path) == (2, 0.75)
    cfg = OmegaConf.create({"eval": {"best_metric": "success_rate", "split": "dev"}, "env": {"name": "bundled"},
                            "logging": {"plots": False}})  # fmt: skip
    rows = [{"iteration": 0, "eval/success_rate": 0.25, "eval/num_tasks": 4.0},
            {"iteration": 2, "eval/success_rate": 0.75, "eval/num_tasks": 4.0}]  # fmt: skip
    lines = finish(cfg, tmp_path, rows, PhaseClock(), 1, None)
    assert (
        lines[1]
        == "selection (4 dev tasks, picks the best): dev success 0.25 (iter 0) → 0.75 (iter 2), best 0.75 @2"
    )
    assert capsys.readouterr().out.splitlines()[0] == f"== result of {tmp_path}"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (
        summary["best"] == {"iteration": 2, "value": 0.75, "metric": "success_rate"}
        and summary["lines"] == lines
    )
