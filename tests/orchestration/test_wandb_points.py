"""Every logged point reaches wandb: an evaluation that finishes after later training rows (the background
evaluator's) is kept at its own iteration, read back from a real offline wandb run's transaction log."""

from __future__ import annotations

import time
from pathlib import Path

from loop_agents.orchestration.run_log import RunLog
from tests.orchestration.wandb_files import history_rows


def test_late_evaluations_are_kept_at_their_own_iteration(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    log = RunLog(tmp_path, wandb_mode="offline", config={"run": {"seed": 0}})
    for iteration in (1, 2, 3, 4):
        log.log({"rollout/count": 8, "loss": 1.0 / iteration}, iteration)
    for iteration, success in (
        (0, 0.2),
        (2, 0.5),
        (4, 0.75),
    ):  # the evaluator's rows, after the training rows
        log.log({"eval/iteration": iteration, "eval/success_rate": success}, iteration)
    log.finish()

    # wandb's writer may still be appending the last records when finish() returns on a loaded machine (seen
    # at load 8: the three evaluation rows, logged last, absent from one read): read until all 7 rows are there,
    # at most 30 s; a row the code dropped never arrives and the asserts below fail
    deadline, rows = time.monotonic() + 30, history_rows(tmp_path)
    while len(rows) < 7 and time.monotonic() < deadline:
        time.sleep(0.5)
        rows = history_rows(tmp_path)
    evaluations = {
        row["eval/iteration"]: row["eval/success_rate"] for row in rows if "eval/success_rate" in row
    }
    assert evaluations == {0: 0.2, 2: 0.5, 4: 0.75}
    assert [row["iteration"] for row in rows if "loss" in row] == [1, 2, 3, 4]
    assert [row["_step"] for row in rows] == list(range(7))  # wandb's own step: never behind, nothing dropped
