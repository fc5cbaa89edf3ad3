"""The held-out split is disjoint from the selection tasks; the adapters scored are start/best/final once each."""

from __future__ import annotations

from pathlib import Path

from loop_agents.orchestration.held_out import START_ADAPTER, flatten, held_out_tasks, targets


def test_held_out_tasks_follow_the_selection_without_overlap():
    ids = [f"t{i:02d}" for i in range(10)][::-1]  # unsorted: the evaluator sorts
    selection, rest = held_out_tasks(ids, max_tasks=3, limit=None)
    assert selection == ["t00", "t01", "t02"] and rest == [f"t{i:02d}" for i in range(3, 10)]
    assert held_out_tasks(ids, 3, 2)[1] == ["t03", "t04"]
    assert held_out_tasks(ids, 3, 0)[1] == []
    assert held_out_tasks(ids, None, None) == (sorted(ids), [])  # the selection used the whole split


def _adapter(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text("{}")
    return path


def test_targets_skip_missing_adapters_and_repeated_iterations(tmp_path: Path):
    _adapter(tmp_path / START_ADAPTER)
    _adapter(tmp_path / "checkpoints" / "best" / "adapter")
    _adapter(tmp_path / "checkpoints" / "checkpoint-9" / "adapter")
    assert [(t.label, t.iteration) for t in targets(tmp_path, 9, 6)] == [
        ("start", 0),
        ("best", 6),
        ("final", 9),
    ]
    assert [(t.label, t.iteration) for t in targets(tmp_path, 9, 9)] == [("start", 0), ("best=final", 9)]
    assert [(t.label, t.iteration) for t in targets(tmp_path, 9, 0)] == [("start=best", 0), ("final", 9)]
    assert [(t.label, t.iteration) for t in targets(tmp_path, 10, None)] == [("start", 0)]  # no checkpoint-10


def test_flatten_prefixes_new_keys():
    assert flatten("best", 21, {"eval/success_rate": 0.87, "eval/num_tasks": 400.0}) == {
        "held_out/best/success_rate": 0.87, "held_out/best/num_tasks": 400.0, "held_out/best/iteration": 21,
    }  # fmt: skip
