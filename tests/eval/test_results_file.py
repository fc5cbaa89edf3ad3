"""The results file: one JSON line per run, concurrent appenders, clear errors."""

from __future__ import annotations

import multiprocessing

import pytest

from loop_agents.eval import (
    TaskResult,
    append_result,
    goal_completion_by_difficulty,
    read_results,
    result_record,
)


def _record(tgc_pass: bool) -> dict:
    gc = goal_completion_by_difficulty(
        [
            TaskResult("a_1", "a", True, 1),
            TaskResult("a_2", "a", tgc_pass, 1),
            TaskResult("b_1", "b", False, 2),
        ]
    )
    return result_record(
        experiment="exp", split="dev", model="tiny", goal_completion=gc,
        behaviour={"behaviour/turns_mean": 3.0}, extra={"checkpoint": "iter_000005"},
    )  # fmt: skip


def test_record_columns_and_roundtrip(tmp_path):
    path = tmp_path / "results" / "all_results.jsonl"
    append_result(path, _record(False))
    append_result(path, _record(True))
    first, second = read_results(path)
    assert (first["TGC"], first["SGC"]) == (1 / 3, 0.0)
    assert (second["TGC"], second["SGC"]) == (2 / 3, 0.5)
    assert (second["TGC_1"], second["SGC_1"], second["TGC_2"], second["SGC_2"]) == (1.0, 1.0, 0.0, 0.0)
    assert second["num_tasks_1"] == 2 and second["split"] == "dev" and second["checkpoint"] == "iter_000005"
    assert second["behaviour/turns_mean"] == 3.0 and "date" in second


def test_bad_values_and_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    with pytest.raises(ValueError, match="'TGC' is nan"):
        append_result(path, {"TGC": float("nan")})
    with pytest.raises(ValueError, match="aggregate"):
        result_record(experiment="e", split="s", model="m", goal_completion={})
    path.write_text('{"TGC": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"r.jsonl:2"):
        read_results(path)


def _append_many(path: str, worker: int) -> None:
    for i in range(50):
        append_result(path, {"worker": worker, "i": i, "pad": "x" * 5000})


def test_concurrent_appenders_never_tear_lines(tmp_path):
    path = str(tmp_path / "r.jsonl")
    procs = [
        multiprocessing.get_context("fork").Process(target=_append_many, args=(path, w)) for w in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    records = read_results(path)
    assert len(records) == 200
    assert sorted((r["worker"], r["i"]) for r in records) == [(w, i) for w in range(4) for i in range(50)]
