"""The results file: one JSON object per evaluation run, appended (docs/reference-ml-loop.md §5.3).

The reference appends a text line (date, model, split, experiment, TGC, SGC, TGC_1..3, SGC_1..3) to
`all_results.txt`; this keeps the same columns as JSON Lines so that nothing has to be scraped back.
TGC/SGC are written as fractions in [0, 1].
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loop_agents.eval.goal_completion import GoalCompletion


def result_record(
    *,
    experiment: str,
    split: str,
    model: str,
    goal_completion: Mapping[str, GoalCompletion],
    behaviour: Mapping[str, float] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A flat record: TGC, SGC, TGC_<d>, SGC_<d> (from `goal_completion_by_difficulty`), behaviour, extra."""
    if "aggregate" not in goal_completion:
        raise ValueError(f"goal_completion has no 'aggregate' entry: {sorted(goal_completion)}")
    record: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "experiment": experiment,
        "split": split,
        "model": model,
    }
    for key, gc in goal_completion.items():
        suffix = "" if key == "aggregate" else "_" + key.removeprefix("difficulty_")
        record[f"TGC{suffix}"] = gc.tgc
        record[f"SGC{suffix}"] = gc.sgc
        record[f"num_tasks{suffix}"] = gc.num_tasks
        record[f"num_scenarios{suffix}"] = gc.num_scenarios
    record.update(behaviour or {})
    record.update(extra or {})
    return record


def append_result(path: str | Path, record: Mapping[str, Any]) -> None:
    """Appends `record` as one JSON line; safe against concurrent writers (flock) and torn lines."""
    for key, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"result field {key!r} is {value}; the results file holds finite numbers only")
    line = json.dumps(dict(record), sort_keys=False) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a results file, oldest first (an unreadable line is an error naming it)."""
    records = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number} is not a JSON line: {err}") from err
    return records
