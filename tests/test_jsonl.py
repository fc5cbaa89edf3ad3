"""metrics.jsonl after a crash mid-append: the torn last row is dropped with one note, every other row read;
a bad line before the last is damage, named by file and line; rewrites are atomic (loop_agents/jsonl.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop_agents.jsonl import JsonlError, read_rows, rewrite_rows
from loop_agents.orchestration.run_log import RunLog


def _write(path: Path, rows: list[dict], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def test_a_torn_last_row_is_dropped_with_one_note(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write(path, [{"iteration": 0}, {"iteration": 1}], '{"iteration": 2, "rollout/cou')
    notes: list[str] = []
    assert read_rows(path, notes.append) == [{"iteration": 0}, {"iteration": 1}]
    assert notes == [
        f"[resume] {path}: dropped a partial last row (line 3, 29 bytes, left by a crash mid-write); the run "
        "rewrites it"
    ]


def test_whole_rows_need_no_note(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write(path, [{"iteration": 0}], "\n")
    notes: list[str] = []
    assert read_rows(path, notes.append) == [{"iteration": 0}] and notes == []
    assert read_rows(tmp_path / "missing.jsonl", notes.append) == [] and notes == []


def test_a_bad_row_before_the_last_is_named(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"iteration": 0}\n{"iterat\n{"iteration": 2}\n')
    with pytest.raises(JsonlError) as info:
        read_rows(path, print)
    assert str(info.value).startswith(f"{path}:2 is not a JSON line (")
    assert str(info.value).endswith("; repair or remove that line")


def test_rewrite_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write(path, [{"iteration": 0}])
    rewrite_rows(path, [{"iteration": 0}, {"iteration": 1}])
    assert read_rows(path) == [{"iteration": 0}, {"iteration": 1}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temp file left


def test_resuming_run_log_drops_the_torn_row_and_appends_cleanly(tmp_path: Path, capsys) -> None:
    """RunLog.truncate_after (the resume) on a log whose last append was cut: the rows before it stay, the
    torn one goes, and the next append starts on a line of its own."""
    _write(tmp_path / "metrics.jsonl", [{"iteration": 0}, {"iteration": 1}], '{"iteration": 2, "lo')
    log = RunLog(tmp_path)
    log.truncate_after(1)
    assert "dropped a partial last row" in capsys.readouterr().err
    log.log({"loss": 0.5}, 2)
    assert log.rows() == [{"iteration": 0}, {"iteration": 1}, {"iteration": 2, "loss": 0.5}]
    assert capsys.readouterr().err == ""  # nothing torn any more
