"""`benchmarks/run_records.py`: a run directory's rows, dev curve and summary read from real files; the provenance
of this checkout; a real `python -m loop_agents.train` that fails its config check; the results file kept whole."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
from pathlib import Path

import pytest

from benchmarks.run_records import (
    DATE_FORMAT,
    ROOT,
    append_run,
    dev_curve,
    load_runs,
    metrics_rows,
    provenance,
    run_summary,
    save_runs,
    train,
)


def _write_metrics(run_dir: Path, rows: list[dict], tail: str = "") -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def test_a_killed_runs_torn_line_is_skipped_and_a_missing_file_has_no_rows(tmp_path: Path) -> None:
    rows = [{"iteration": 1, "time/iteration": 9.5}, {"iteration": 2, "time/iteration": 8.0}]
    _write_metrics(tmp_path / "run", rows, tail='\n{"iteration": 3, "time/ite')
    assert metrics_rows(tmp_path / "run") == rows
    assert metrics_rows(tmp_path / "never_started") == []


def test_the_dev_curve_is_sorted_and_the_last_row_of_an_iteration_wins() -> None:
    rows = [
        {"iteration": 6, "eval/iteration": 6, "eval/success_rate": 0.5, "eval/tgc": 0.3},
        {"iteration": 0, "eval/iteration": 0, "eval/success_rate": 0.1},
        {"iteration": 3, "eval/iteration": 3, "eval/success_rate": 0.2},
        {"iteration": 3, "eval/iteration": 3, "eval/success_rate": 0.4},  # a second evaluation of iteration 3
        {"iteration": 4, "eval/success_rate": 0.9},  # no eval/iteration: not an evaluation row
        {"iteration": 4, "rollout/success_rate": 0.7},
    ]
    curve = dev_curve(rows)
    assert curve == {0: 0.1, 3: 0.4, 6: 0.5} and list(curve) == [0, 3, 6]
    assert dev_curve(rows, "tgc") == {6: 0.3}
    assert dev_curve([]) == {}


def test_the_summary_is_the_runs_summary_json_or_nothing(tmp_path: Path) -> None:
    assert run_summary(tmp_path) == {}
    summary = {"phases_s": {"total": 573.4}, "held_out": {"held_out/start/success_rate": 0.2}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert run_summary(tmp_path) == summary


def test_provenance_names_this_checkouts_commit_the_date_and_the_machine() -> None:
    before = _dt.datetime.now(_dt.UTC).replace(second=0, microsecond=0, tzinfo=None)
    stamp = provenance()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert stamp["commit"] in (head.stdout.strip(), head.stdout.strip() + "+dirty")
    assert _dt.datetime.strptime(stamp["date"], DATE_FORMAT) >= before
    assert stamp["cpu"] and stamp["cores"] >= 1
    assert set(stamp) == {"commit", "date", "cpu", "cores"}


def test_appending_keeps_every_earlier_run(tmp_path: Path) -> None:
    path = tmp_path / "results" / "runs.json"
    assert load_runs(path) == []
    append_run(path, {"seed": 0, "exit_code": 0})
    append_run(path, {"seed": 1, "exit_code": 1})
    assert load_runs(path) == [{"seed": 0, "exit_code": 0}, {"seed": 1, "exit_code": 1}]
    assert path.read_text() == json.dumps({"runs": load_runs(path)}, indent=1) + "\n"


def test_a_results_file_is_replaced_whole_never_written_in_place(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    save_runs(path, [{"seed": 0}])
    with open(path) as reader:  # a reader that opened the file before the write
        append_run(path, {"seed": 1})
        assert json.loads(reader.read()) == {"runs": [{"seed": 0}]}  # still the old file, whole
    assert load_runs(path) == [{"seed": 0}, {"seed": 1}]
    with pytest.raises(TypeError):  # a record that is not JSON: nothing is written
        append_run(path, {"seed": 2, "run_dir": Path("runs/x")})
    assert load_runs(path) == [{"seed": 0}, {"seed": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["runs.json"]  # no temporary file left behind


def test_train_records_the_exit_code_of_a_run_that_fails_its_config_check(tmp_path: Path) -> None:
    """An unknown key stops loop_agents.train at config validation (exit 2), before Ray or vLLM start."""
    log = tmp_path / "logs" / "train.log"
    failed = train(["experiment=demo", "run.no_such_key=1"], log)
    assert failed.exit_code == 2
    assert "unknown key 'run.no_such_key'" in log.read_text()
    assert failed.wall_s > 0 and failed.load_before >= 0 and failed.load_after >= 0
    again = train(["run.other_key=1"], log, append=True)
    assert again.exit_code == 2
    text = log.read_text()
    assert "run.no_such_key" in text and "run.other_key" in text  # appended, the first run's lines kept
    train(["run.third_key=1"], log)
    assert "run.no_such_key" not in log.read_text()  # without append, the log starts over
