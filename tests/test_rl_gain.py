"""benchmarks/rl_gain.py reads the paired evaluations a run's checkpoints left against its start policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import rl_gain


def _run(root: Path, seed: int, difference: tuple[float, float, float], best: bool) -> Path:
    run = root / f"s{seed}"
    run.mkdir()
    (run / "config.yaml").write_text(f"run:\n  seed: {seed}\n")
    mean, low, high = difference
    labels = ["checkpoint-3", "checkpoint-15"] + (["best"] if best else [])
    for label in labels:
        out = run / "evaluate" / label / "dev"
        out.mkdir(parents=True)
        compare = {
            "checkpoint": str(run / "held_out_adapters" / "start"),
            "out": str(run / "evaluate" / "start" / "dev"),
            "aggregate": {"tasks": 60, "pairs": 240, "base": 0.5, "other": 0.5 + mean,
                          "difference": {"mean": mean, "low": low, "high": high, "n": 60}},
        }  # fmt: skip
        report = {"out": str(out), "runs": 4, "compare": compare}
        (out / "metrics.json").write_text(json.dumps(report))
    start = run / "evaluate" / "start" / "dev"  # the start policy's own evaluation: no compare section
    start.mkdir(parents=True)
    (start / "metrics.json").write_text(json.dumps({"out": str(start), "runs": 4}))
    return run


def test_each_seed_reads_its_final_checkpoint_and_the_aggregate_counts_intervals_above_zero(tmp_path):
    runs = [_run(tmp_path, 0, (0.1, 0.02, 0.2), True), _run(tmp_path, 1, (0.05, -0.05, 0.15), False)]
    rows = [rl_gain.seed_row(run, "dev") for run in runs]
    assert [r["final_label"] for r in rows] == ["checkpoint-15", "checkpoint-15"]  # by number, not by name
    assert [r["seed"] for r in rows] == [0, 1] and "best" in rows[0] and "best" not in rows[1]
    summary = rl_gain.aggregate(rows)
    assert summary["intervals_excluding_zero"] == 1 and summary["seeds"] == 2
    assert summary["iqm_gain"]["low"] <= 0.075 <= summary["iqm_gain"]["high"]


def test_a_run_without_a_compared_checkpoint_is_named(tmp_path):
    run = tmp_path / "empty"
    (run / "evaluate").mkdir(parents=True)
    (run / "config.yaml").write_text("run:\n  seed: 0\n")
    with pytest.raises(ValueError, match="checkpoint-N"):
        rl_gain.seed_row(run, "dev")
