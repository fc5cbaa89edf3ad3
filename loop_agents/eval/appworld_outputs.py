"""AppWorld's own outputs of an evaluation: the engine's official scores per complete run, and links to its files."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loop_agents.eval.eval_target import PROG

if TYPE_CHECKING:
    from loop_agents.eval.evaluate_checkpoint import Prepared


def official_scores(prep: Prepared, complete_runs: list[int], played_runs: set[int]) -> dict[str, Any] | None:
    """AppWorld's own evaluator over each complete run's experiment outputs (cached per run in out/)."""
    from loop_agents.envs.appworld.official_eval import run_official_evaluation
    from loop_agents.eval.goal_completion import goal_completion_by_difficulty, task_results_from_official
    from loop_agents.eval.tables import summarize_runs
    from loop_agents.orchestration.environments import make_task_source

    if prep.experiments is None:
        return None
    source = make_task_source(prep.cfg)
    if len(prep.task_ids) != len(source.task_ids(prep.split)):
        print(
            f"[{PROG}] official AppWorld scores skipped: max_tasks covers part of {prep.split!r} only",
            flush=True,
        )
        return None
    config = source.config
    per_run = []
    for run in complete_runs:
        cache = prep.out / "official" / f"run_{run}.json"
        if cache.is_file() and run not in played_runs:
            per_run.append(json.loads(cache.read_text()))
            continue
        began = time.monotonic()
        result = run_official_evaluation(prep.experiments[run], prep.split, config)
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
        [goal_completion_by_difficulty(task_results_from_official(r["per_task"])) for r in per_run]
    )
    return {"goal_completion": summary, "runs": per_run}


def link_appworld_outputs(prep: Prepared) -> None:
    """`out/appworld/<experiment>` -> the engine's experiment outputs (kept where AppWorld wrote them)."""
    if prep.experiments is None:
        return
    outputs = Path(prep.manifest["appworld"]["root"]) / "experiments" / "outputs"
    links = prep.out / "appworld"
    links.mkdir(parents=True, exist_ok=True)
    for name in prep.experiments.values():
        link = links / name
        if (outputs / name).is_dir() and not link.is_symlink():
            link.symlink_to(outputs / name, target_is_directory=True)
