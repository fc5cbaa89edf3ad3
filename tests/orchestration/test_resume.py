"""The checkpoint a rerun resumes from and the metrics log it starts with (loop_agents/orchestration/resume.py):
a damaged newest checkpoint is named in one line, moved aside (not deleted) and the one before it used; with
none before it the run stops rather than start over; the log holds each row up to the checkpoint once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop_agents.learner.checkpoint import CheckpointError, commit
from loop_agents.orchestration.resume import restore_metrics, verified_checkpoint
from loop_agents.orchestration.run_log import RunLog


def _checkpoint(folder: Path, iteration: int) -> Path:
    temp = folder / f".checkpoint-{iteration}.tmp"
    (temp / "adapter").mkdir(parents=True)
    (temp / "adapter" / "adapter_model.safetensors").write_bytes(b"x" * 64)
    (temp / "trainable.safetensors").write_bytes(bytes(range(64)))
    target = folder / f"checkpoint-{iteration}"
    commit(temp, target)  # the real commit: manifest, then done, then rename
    return target


def test_the_newest_checkpoint_that_verifies_is_chosen(tmp_path: Path) -> None:
    for i in (16, 17, 18):
        _checkpoint(tmp_path, i)
    (tmp_path / "checkpoint-18" / "adapter" / "adapter_model.safetensors").write_bytes(b"x" * 10)
    notes: list[str] = []
    assert verified_checkpoint(tmp_path, notes.append) == tmp_path / "checkpoint-17"
    bad = tmp_path / "checkpoint-18" / "adapter" / "adapter_model.safetensors"
    assert notes == [
        f"[resume] checkpoint-18 is damaged ({bad} has 10 bytes, 64 when written); moved aside to "
        "checkpoint-18.corrupt, resuming from checkpoint-17"
    ]
    kept = tmp_path / "checkpoint-18.corrupt" / "adapter" / "adapter_model.safetensors"
    assert kept.read_bytes() == b"x" * 10  # kept for a look, not deleted
    assert verified_checkpoint(tmp_path, notes.append) == tmp_path / "checkpoint-17" and len(notes) == 1


def test_two_damaged_in_a_row_and_a_name_taken(tmp_path: Path) -> None:
    for i in (1, 2, 3):
        _checkpoint(tmp_path, i)
    (tmp_path / "checkpoint-3.corrupt").mkdir()  # from an earlier resume
    (tmp_path / "checkpoint-3" / "trainable.safetensors").unlink()
    (tmp_path / "checkpoint-2" / "trainable.safetensors").write_bytes(bytes(64))
    notes: list[str] = []
    assert verified_checkpoint(tmp_path, notes.append) == tmp_path / "checkpoint-1"
    assert [n.split(";")[1] for n in notes] == [
        " moved aside to checkpoint-3.corrupt.2, resuming from checkpoint-2",
        " moved aside to checkpoint-2.corrupt, resuming from checkpoint-1",
    ]
    assert "sha256 mismatch" in notes[1]


def test_a_damaged_only_checkpoint_stops_the_run_and_stays(tmp_path: Path) -> None:
    only = _checkpoint(tmp_path, 1)
    (only / "trainable.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError) as info:
        verified_checkpoint(tmp_path, print)
    assert str(info.value) == (
        f"checkpoint {only} is damaged ({only / 'trainable.safetensors'} has 0 bytes, 64 when written) and no "
        f"earlier complete checkpoint exists; move {only} away to start the run over"
    )
    assert only.is_dir()


def test_no_checkpoint_yet(tmp_path: Path) -> None:
    assert verified_checkpoint(tmp_path / "missing") is None
    (tmp_path / ".checkpoint-1.tmp").mkdir()
    assert verified_checkpoint(tmp_path) is None


def test_restore_metrics_holds_each_row_once(tmp_path: Path) -> None:
    rows = [{"iteration": i, "rollout/count": 4} for i in range(4)] + [{"iteration": 3, "eval/success": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"itera')
    log = RunLog(tmp_path)
    restore_metrics(log, 2, {"rollout/count": 4})  # resumed from checkpoint-2: rows 3 go, torn row goes
    assert log.rows() == rows[:3]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    restore_metrics(log, 2, {"rollout/count": 4})  # killed after checkpoint-2, before its row was logged
    assert log.rows() == rows[:3]


@pytest.mark.parametrize(
    ("remove", "why"),
    [
        ("done", "no done marker: its write never finished here"),
        ("manifest.json", "manifest.json is missing"),
    ],
)
def test_a_checkpoint_without_its_done_marker_or_manifest_gets_the_damaged_line(
    tmp_path, remove, why
) -> None:
    """Neither is ever missing under a final name (temp dir, done, rename): the directory was changed since. It is
    not resumed from unverified, nor skipped and then overwritten by the rerun's save of the same name."""
    for i in (4, 5):
        _checkpoint(tmp_path, i)
    (tmp_path / "checkpoint-5" / remove).unlink()
    notes: list[str] = []
    assert verified_checkpoint(tmp_path, notes.append) == tmp_path / "checkpoint-4"
    assert len(notes) == 1 and notes[0].startswith("[resume] checkpoint-5 is damaged (") and why in notes[0]
    assert notes[0].endswith("; moved aside to checkpoint-5.corrupt, resuming from checkpoint-4")
    assert (tmp_path / "checkpoint-5.corrupt" / "trainable.safetensors").is_file()
