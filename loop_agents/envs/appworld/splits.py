"""Dataset split files (`data/datasets/<split>.txt`), task metadata, and split-name syntax.

Split names follow the reference (docs/reference-ml-loop.md §4.6): a file name (`train`), a difficulty
filter suffix (`train_difficulty_1`, kept only if no such file exists), and joins with `_and_`
(`train_difficulty_1_and_train_difficulty_2`). Task ids are `<scenario>_<n>`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

_DIFFICULTY_SUFFIX = re.compile(r"^(?P<base>.+)_difficulty_(?P<level>[123])$")


def datasets_dir(root: Path) -> Path:
    return root / "data" / "datasets"


def available_splits(root: Path) -> list[str]:
    return sorted(p.stem for p in datasets_dir(root).glob("*.txt"))


def _read_split_file(root: Path, name: str) -> list[str] | None:
    path = datasets_dir(root) / f"{name}.txt"
    if not path.exists():
        return None
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def split_task_ids(root: Path, split: str) -> list[str]:
    """Task ids of `split` in file order. Raises ValueError naming the problem."""
    if not split:
        raise ValueError("empty AppWorld split name")
    task_ids: list[str] = []
    for part in split.split("_and_"):
        ids = _read_split_file(root, part)
        if ids is None:
            match = _DIFFICULTY_SUFFIX.match(part)
            base = _read_split_file(root, match["base"]) if match else None
            if base is None:
                raise ValueError(
                    f"unknown AppWorld split {part!r}; available under {datasets_dir(root)}: "
                    f"{available_splits(root)} (plus <split>_difficulty_<1|2|3> and '_and_' joins)"
                )
            ids = [t for t in base if task_difficulty(root, t) == int(match["level"])]
        task_ids.extend(ids)
    if not task_ids:
        raise ValueError(f"AppWorld split {split!r} under {datasets_dir(root)} has no tasks")
    return task_ids


@lru_cache(maxsize=100_000)
def _metadata(root: Path, task_id: str) -> dict:
    path = root / "data" / "tasks" / task_id / "ground_truth" / "metadata.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as error:
        raise ValueError(f"AppWorld task {task_id!r} has no {path}") from error


def task_difficulty(root: Path, task_id: str) -> int:
    """AppWorld difficulty (1-3) from the task's ground_truth/metadata.json."""
    return int(_metadata(root, task_id)["difficulty"])


def scenario_of(task_id: str) -> str:
    """Scenario (generator) id of a task id `<scenario>_<n>`."""
    scenario, sep, number = task_id.rpartition("_")
    if not sep or not scenario or not number.isdigit():
        raise ValueError(f"AppWorld task id {task_id!r} is not of the form <scenario>_<number>")
    return scenario


def first_task_id(root: Path) -> str:
    """Some task of the data root (for warming servers up)."""
    for split in available_splits(root):
        ids = _read_split_file(root, split)
        if ids:
            return ids[0]
    tasks = sorted(p.name for p in (root / "data" / "tasks").iterdir())
    if not tasks:
        raise ValueError(f"no AppWorld tasks under {root / 'data' / 'tasks'}")
    return tasks[0]
