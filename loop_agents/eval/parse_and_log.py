"""Score saved evaluation outputs, print TGC/SGC per split and difficulty, append to a results file, log to wandb.

    python scripts/parse_and_log.py experiment=<name | dir | file> split=<split> [results_file=runs/all_results.jsonl]
        [wandb=offline|online|disabled] [wandb_project=loop_agents] [model=<label>]
        [appworld_root=<APPWORLD_ROOT with data/>] [appworld_python=<AppWorld venv python>]
        [scenarios=auto|appworld|task] [trust_unsigned=false|true]
    loop-parse-and-log ...                  (the same, as a console script)

experiment is one of
  - an AppWorld experiment name: `<appworld_root>/experiments/outputs/<name>` (ours or any AppWorld agent's);
  - an AppWorld experiment outputs directory anywhere (`<dir>/tasks/<task_id>/...`, e.g. copied from another
    machine or written by another agent): scored against the task data of `appworld_root`;
  - an output directory of scripts/evaluate.py: every run of it (AppWorld: its experiments, scored
    officially; other environments: its trajectories/run_<r>.jsonl);
  - a trajectories .jsonl file (Trajectory per line, e.g. `<run>/eval/<split>/iter_000010.jsonl`); runs are
    the episodes' `sample_index`.
AppWorld outputs are scored only if an episode host of this root signed them (the policy's process never
holds the key; see docs/security.md): unsigned, forged or foreign outputs stop the command with one line
naming the file (exit 2), unless `trust_unsigned=true` (outputs of another AppWorld agent, on your word).
AppWorld outputs are scored by AppWorld's own evaluator in the AppWorld venv
(`appworld.evaluator.evaluate_tasks`, the function behind `appworld evaluate`), whose per-task results are
read as JSON: nothing is scraped from a printed table. TGC = tasks whose tests all pass / tasks; SGC =
scenarios all of whose tasks pass / scenarios; per difficulty over that difficulty's tasks. Trajectories are
scored from their `success`. `split` is required for AppWorld (the task list to score; a task without outputs
is an error) and only a label for trajectories (default: the evaluate.py manifest's split).

One JSON line per run is appended to `results_file` (loop_agents/eval/results_file.py: TGC, SGC, TGC_<d>,
SGC_<d> as fractions, plus run, source, model); wandb gets the same numbers (offline by default; the API
key is read by wandb itself from its login and never printed or written here).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop_agents.envs.registry import family
from loop_agents.eval.cli_args import UsageError, exit_with, parse_args
from loop_agents.eval.goal_completion import (
    goal_completion_by_difficulty,
    task_results_from_official,
    task_results_from_trajectories,
)
from loop_agents.eval.result_lines import parse_and_log_line
from loop_agents.eval.results_file import append_result, result_record
from loop_agents.eval.score_inputs import SCORED_FAMILY, Inputs, RunSource, remove_linked_root, resolve_inputs
from loop_agents.eval.tables import goal_completion_table, summarize_runs

PROG = "parse_and_log"
KEYS = {
    "experiment": str,
    "split": str,
    "results_file": str,
    "wandb": str,
    "wandb_project": str,
    "model": str,
    "appworld_root": str,
    "appworld_python": str,
    "scenarios": str,
    "trust_unsigned": str,
}
WANDB_MODES = ("offline", "online", "disabled")


# ---------------------------------------------------------------------------------------- scoring
@dataclass
class RunScore:
    source: RunSource
    goal_completion: dict[str, Any]  # key -> GoalCompletion
    extra: dict[str, Any]
    behaviour: dict[str, float] = field(default_factory=dict)


def score(inputs: Inputs, appworld_python: str | None = None, trust_unsigned: bool = False) -> list[RunScore]:
    """GoalCompletion per difficulty of every run (AppWorld: official evaluator; else trajectories)."""
    scores = []
    scorer = family(SCORED_FAMILY)
    if inputs.kind == SCORED_FAMILY:
        for source in inputs.runs:
            began = time.monotonic()
            try:
                result = scorer.official.score(
                    source.appworld_experiment, inputs.split, inputs.appworld_root, appworld_python or "",
                    trust_unsigned=trust_unsigned,
                )  # fmt: skip
            except (FileNotFoundError, ValueError) as exc:  # missing outputs, unknown split, corrupted file
                raise UsageError(str(exc)) from None
            gc = goal_completion_by_difficulty(
                task_results_from_official(result.per_task, scorer.scenario_of)
            )
            extra = {
                "source": "appworld_official",
                "appworld_task_goal_completion": result.appworld_aggregate.get("task_goal_completion"),
                "appworld_scenario_goal_completion": result.appworld_aggregate.get(
                    "scenario_goal_completion"
                ),
                "per_task_success": {t: r["success"] for t, r in result.per_task.items()},
                "evaluation_s": round(time.monotonic() - began, 2),
            }
            scores.append(RunScore(source, gc, extra))
        return scores
    grouped = inputs.scenarios == SCORED_FAMILY
    scenario_of = scorer.scenario_of if grouped else (lambda task_id: task_id)
    for source in inputs.runs:
        results = task_results_from_trajectories(source.trajectories, scenario_of)
        gc = goal_completion_by_difficulty(results)
        extra = {
            "source": "trajectories",
            "success_rate": sum(t.success for t in source.trajectories) / len(source.trajectories),
            "reward_mean": sum(float(t.reward) for t in source.trajectories) / len(source.trajectories),
            "per_task_success": {r.task_id: r.success for r in results},
        }
        behaviour = scorer.behaviour_metrics(source.trajectories) if grouped else {}
        scores.append(RunScore(source, gc, extra, behaviour))
    return scores


# ---------------------------------------------------------------------------------------- logging
def append_results(path: Path, inputs: Inputs, scores: list[RunScore]) -> list[dict[str, Any]]:
    records = []
    for s in scores:
        extra = {k: v for k, v in s.extra.items() if k != "per_task_success" and v is not None}
        record = result_record(
            experiment=s.source.label,
            split=inputs.split or "unknown",
            model=inputs.model,
            goal_completion=s.goal_completion,
            behaviour=s.behaviour,
            extra={"run": s.source.run, "num_runs": len(scores), **extra},
        )
        append_result(path, record)
        records.append(record)
    return records


def log_wandb(mode: str, project: str, directory: Path, inputs: Inputs, records: list[dict[str, Any]],
              summary: dict[str, dict[str, float]]) -> str | None:  # fmt: skip
    """One wandb run per invocation: each run's record at step=run, the mean over runs as summary."""
    if mode == "disabled":
        return None
    import wandb

    directory.mkdir(parents=True, exist_ok=True)
    name = f"{records[0]['experiment']}-{inputs.split or 'unknown'}"
    run = wandb.init(
        project=project,
        mode=mode,
        dir=str(directory),
        name=name,
        job_type="parse_and_log",
        config={
            "experiment": records[0]["experiment"],
            "split": inputs.split,
            "model": inputs.model,
            "source": records[0].get("source"),
            "num_runs": len(records),
        },  # fmt: skip
        settings=wandb.Settings(silent=True),
    )
    try:
        for record in records:
            numbers = {f"eval/{k}": v for k, v in record.items() if isinstance(v, int | float) and k != "run"}
            run.log(numbers, step=int(record["run"]))
        for key, values in summary.items():
            for metric in ("tgc", "sgc", "tgc_std", "sgc_std"):
                run.summary[f"mean/{key}/{metric}"] = values[metric]
        return run.dir
    finally:
        run.finish()


# ---------------------------------------------------------------------------------------- main
def parse_and_log(values: dict[str, Any]) -> dict[str, Any]:
    if "experiment" not in values:
        raise UsageError(
            "experiment= is required (an AppWorld experiment name or dir, an evaluate.py out dir, a .jsonl)"
        )
    mode = values.get("wandb", "offline")
    if mode not in WANDB_MODES:
        raise UsageError(f"wandb={mode!r}; choose one of {', '.join(WANDB_MODES)}")
    scenarios = values.get("scenarios", "auto")
    if scenarios not in ("auto", "appworld", "task"):
        raise UsageError(f"scenarios={scenarios!r}; choose one of auto, appworld, task")
    inputs = resolve_inputs(
        values["experiment"], values.get("split"), values.get("model"), values.get("appworld_root"), scenarios
    )
    trust = values.get("trust_unsigned", "false")
    if trust not in ("true", "false"):
        raise UsageError(f"trust_unsigned={trust!r}; choose true or false")
    try:
        scores = score(inputs, values.get("appworld_python"), trust_unsigned=trust == "true")
    finally:
        if inputs.temp_root is not None:
            remove_linked_root(inputs.temp_root)
    results_file = Path(values.get("results_file", "runs/all_results.jsonl")).expanduser()
    records = append_results(results_file, inputs, scores)
    summary = summarize_runs([s.goal_completion for s in scores])
    for s in scores:
        source = "AppWorld official evaluation" if inputs.kind == "appworld" else "episodes' success"
        print(f"== {s.source.label} (run {s.source.run}) on split {inputs.split or 'unknown'} [{source}]")
        print(goal_completion_table(summarize_runs([s.goal_completion])))
    if len(scores) > 1:
        print(f"== mean over {len(scores)} runs")
        print(goal_completion_table(summary))
    wandb_dir = log_wandb(
        mode,
        values.get("wandb_project", "loop_agents"),
        results_file.parent / "wandb",
        inputs,
        records,
        summary,
    )
    print(
        f"[{PROG}] appended {len(records)} line(s) to {results_file}"
        + (f"; wandb ({mode}) {wandb_dir}" if wandb_dir else "")
    )
    print(parse_and_log_line(records[0]["experiment"], inputs.split, summary, len(scores), str(results_file)))
    return {"records": records, "summary": summary, "scores": scores, "wandb_dir": wandb_dir}


def main(argv: list[str] | None = None) -> None:
    try:
        values, _ = parse_args(sys.argv[1:] if argv is None else argv, KEYS, __doc__, allow_overrides=False)
        parse_and_log(values)
    except UsageError as exc:
        exit_with(PROG, str(exc))


if __name__ == "__main__":
    main()
