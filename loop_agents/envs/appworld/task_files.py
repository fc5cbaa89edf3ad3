"""Read every JSON file AppWorld's evaluator will read for a split, before it runs, so a corrupted file is one
line naming the task and the file instead of a traceback from inside the AppWorld venv (or an HTTP 500 from an
env server whose log alone has the cause).

Per task: `data/tasks/<id>/specs.json`, `ground_truth/*.json`, `dbs/*.json(l)`, and, when an experiment is
given, its outputs `experiments/outputs/<experiment>/tasks/<id>/dbs/*.json(l)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path


class CorruptedTaskFile(ValueError):
    """A task's JSON file cannot be read; the message names the task, the file and what to do."""


def _read(path: Path) -> None:
    """Parse a .json or .jsonl file; raise ValueError with the line (and column) of the first error."""
    text = path.read_text()
    lines = enumerate(text.splitlines(), start=1) if path.suffix == ".jsonl" else [(0, text)]
    for number, chunk in lines:
        if not chunk.strip() and number:
            continue
        try:
            json.loads(chunk)
        except json.JSONDecodeError as exc:
            where = f"line {number or exc.lineno}" + ("" if number else f" column {exc.colno}")
            raise ValueError(f"{where}: {exc.msg}") from None


def _task_files(task_dir: Path, with_ground_truth: bool) -> Iterable[Path]:
    if with_ground_truth:
        yield task_dir / "specs.json"
        yield from sorted((task_dir / "ground_truth").glob("*.json"))
    yield from sorted(p for p in (task_dir / "dbs").glob("*") if p.suffix in (".json", ".jsonl"))


def check_task_files(root: Path, task_ids: Iterable[str], experiment: str | None = None) -> int:
    """Parse each task's data (and the experiment's outputs); return the number of files read.

    Raises CorruptedTaskFile for the first file that is not valid JSON / JSON Lines (or cannot be read).
    """
    checked = 0
    for task_id in task_ids:
        dirs = [(root / "data" / "tasks" / task_id, True, "restore the AppWorld data")]
        if experiment is not None:
            outputs = root / "experiments" / "outputs" / experiment / "tasks" / task_id
            dirs.append((outputs, False, "delete the task's outputs directory and play it again"))
        for task_dir, with_ground_truth, remedy in dirs:
            for path in _task_files(task_dir, with_ground_truth):
                if not path.exists() and path.name == "specs.json":
                    raise CorruptedTaskFile(f"task {task_id}: {path} is missing; {remedy}")
                try:
                    _read(path)
                except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
                    raise CorruptedTaskFile(
                        f"task {task_id}: {path} is corrupted ({exc}); {remedy}"
                    ) from None
                checked += 1
    return checked
