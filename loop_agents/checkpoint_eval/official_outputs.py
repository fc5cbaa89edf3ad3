"""A family's own scores of an evaluation (AppWorld's evaluator over each complete run's experiment outputs), and
links to the files it wrote."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loop_agents.checkpoint_eval.eval_target import PROG
from loop_agents.checkpoint_eval.request import Prepared
from loop_agents.envs.selected import make_task_source, selected_family
from loop_agents.eval.goal_completion import goal_completion_by_difficulty, task_results_from_official
from loop_agents.eval.tables import summarize_runs


def official_scores(prep: Prepared, complete_runs: list[int], played_runs: set[int]) -> dict[str, Any] | None:
    """The family's official evaluator over each complete run's experiment outputs (cached per run in out/)."""
    if prep.experiments is None:
        return None
    family = selected_family(prep.cfg)
    source = make_task_source(prep.cfg)
    if len(prep.task_ids) != len(source.task_ids(prep.split)):
        print(
            f"[{PROG}] official {family.label} scores skipped: max_tasks covers part of {prep.split!r} only",
            flush=True,
        )
        return None
    settings = source.config
    per_run = []
    for run in complete_runs:
        cache = prep.out / "official" / f"run_{run}.json"
        if cache.is_file() and run not in played_runs:
            per_run.append(json.loads(cache.read_text()))
            continue
        began = time.monotonic()
        result = family.official.score(prep.experiments[run], prep.split, settings.root_path, settings.python)
        record = {
            "run": run,
            "experiment": result.experiment_name,
            "appworld_aggregate": result.appworld_aggregate,
            "per_task": result.per_task,
            "seconds": time.monotonic() - began,
        }
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(record, indent=2))
        per_run.append(record)
    if not per_run:
        return None
    summary = summarize_runs(
        [
            goal_completion_by_difficulty(task_results_from_official(r["per_task"], family.scenario_of))
            for r in per_run
        ]
    )
    return {"goal_completion": summary, "runs": per_run}


def link_experiment_outputs(prep: Prepared) -> None:
    """`out/<family>/<experiment>` -> the engine's experiment outputs (kept where the engine wrote them)."""
    if prep.experiments is None:
        return
    key = selected_family(prep.cfg).name
    outputs = Path(prep.manifest[key]["root"]) / "experiments" / "outputs"
    links = prep.out / key
    links.mkdir(parents=True, exist_ok=True)
    for name in prep.experiments.values():
        link = links / name
        if (outputs / name).is_dir() and not link.is_symlink():
            link.symlink_to(outputs / name, target_is_directory=True)
