"""Progress of playing AppWorld demonstrations, counted from the players' plan and output files."""

from __future__ import annotations

import json
import time
from pathlib import Path

from loop_agents.envs.appworld.demo_play_progress import played_counts, played_demos_progress


def _folder(root: Path) -> Path:
    play = root / "loop_agents_demos" / "tmpabc"
    play.mkdir(parents=True)
    (play / "plan_0.json").write_text(json.dumps([{"task_id": "a"}] * 3))
    (play / "plan_1.json").write_text(json.dumps([{"task_id": "b"}] * 2))
    (play / "played_0.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    return play


def test_counts_played_lines_against_the_plans(tmp_path: Path):
    assert played_counts(tmp_path / "loop_agents_demos") == (0, 0)
    _folder(tmp_path)
    assert played_counts(tmp_path / "loop_agents_demos") == (2, 5)


def test_prints_progress_while_episodes_are_played(tmp_path: Path, capsys):
    play = _folder(tmp_path)
    with played_demos_progress(tmp_path, every_s=0.0):
        time.sleep(1.3)  # the watcher looks once a second
        (play / "played_1.jsonl").write_text('{"x": 3}\n{"x": 4}\n')
        time.sleep(1.3)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[warm start] 2/5 demonstration episodes played (40 %)")
    assert out[-1].startswith("[warm start] 4/5 demonstration episodes played (80 %)")
