"""Honest numbers for the best checkpoint: it is picked on selection tasks and reported on tasks it never saw.

The evaluator during training scores every N-th checkpoint on the first `eval.max_tasks` tasks of
`eval.split` (sorted ids) — the *selection* tasks that pick `checkpoints/best/`. A score on the tasks that
picked it is biased upward (the maximum of noisy estimates). After training, `held_out_tasks` splits off
the next `eval.held_out_tasks` tasks of the same split (disjoint by construction; None = all the rest),
and the start policy (iteration 0), the best and the final checkpoint are evaluated on them with the
evaluator's settings. Their metrics are logged as `held_out/<label>/<metric>` (new keys; the per-iteration
`eval/*` keys keep their meaning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop_agents.envs.selected import scenario_function
from loop_agents.eval.episode_metrics import evaluation_metrics
from loop_agents.orchestration.components import rollout_metrics
from loop_agents.orchestration.run_log import RunLog

START_ADAPTER = "held_out_adapters/start"  # copy of iteration 0's adapter (checkpoint pruning may delete it)


def held_out_tasks(
    task_ids: Sequence[str], max_tasks: int | None, limit: int | None
) -> tuple[list[str], list[str]]:
    """(selection, held out): the evaluator's first `max_tasks` sorted ids, then the next `limit` (None = all)."""
    ordered = sorted(task_ids)
    selection = ordered[: max_tasks or None]
    rest = ordered[len(selection) :]
    return selection, rest if limit is None else rest[: max(limit, 0)]


@dataclass(frozen=True)
class HeldOutTarget:
    labels: tuple[str, ...]  # ("start",), ("best", "final"), ...: one adapter may be several of them
    iteration: int
    adapter: Path

    @property
    def label(self) -> str:
        return "=".join(self.labels)


def held_out_runs(cfg) -> int:
    """eval.held_out_runs_per_task, or eval.runs_per_task when it is unset."""
    runs = cfg.eval.get("held_out_runs_per_task")
    return int(cfg.eval.runs_per_task if runs is None else runs)


def targets(run_dir: Path, final_iteration: int, best_iteration: int | None) -> list[HeldOutTarget]:
    """The adapters to score: the start policy, the best and the final checkpoint (each once, by iteration)."""
    found: list[HeldOutTarget] = []
    candidates = [
        ("start", 0, run_dir / START_ADAPTER),
        ("best", best_iteration, run_dir / "checkpoints" / "best" / "adapter"),
        ("final", final_iteration, run_dir / "checkpoints" / f"checkpoint-{final_iteration}" / "adapter"),
    ]
    for label, iteration, adapter in candidates:
        same = [i for i, t in enumerate(found) if t.iteration == iteration]
        if same:
            found[same[0]] = HeldOutTarget((*found[same[0]].labels, label), iteration, found[same[0]].adapter)
        elif iteration is not None and (adapter / "adapter_config.json").is_file():
            found.append(HeldOutTarget((label,), iteration, adapter))
    return found


def flatten(label: str, iteration: int, metrics: dict[str, Any]) -> dict[str, Any]:
    """`eval/success_rate` -> `held_out/best/success_rate`, plus `held_out/best/iteration`."""
    row = {f"held_out/{label}/{k.removeprefix('eval/')}": v for k, v in metrics.items()}
    row[f"held_out/{label}/iteration"] = iteration
    return row


def evaluate_held_out(cluster, cfg, run_dir: Path, final_iteration: int, best_iteration: int | None,
                      max_turns: int) -> dict[str, Any] | None:  # fmt: skip
    """Score the start/best/final adapters on the held-out tasks through the run's evaluator and servers.

    Returns {"num_tasks": n, "results": [(label, iteration, eval metrics)], "row": metrics row} or None when
    there is nothing to score (evaluation off, no held-out task left, no adapter)."""
    import ray

    limit = cfg.eval.held_out_tasks
    if cluster.evaluator is None or (limit is not None and limit <= 0):
        return None
    _, tasks = held_out_tasks(cluster.task_ids(cfg.eval.split), cfg.eval.max_tasks, limit)
    chosen = targets(run_dir, final_iteration, best_iteration)
    if not tasks or not chosen:
        return None
    results, row = [], {}
    for target in chosen:
        name = f"held-out-{target.labels[0]}"
        ray.get([s.load_adapter.remote(str(target.adapter), name) for s in cluster.servers])
        try:
            trajectories, collected = ray.get(
                cluster.evaluator.collect_with_progress.remote(
                    f"held-out {target.label}",
                    tasks,
                    held_out_runs(cfg),
                    max_turns,
                    name,
                    f"held_out/{target.labels[0]}/",
                )
            )
        finally:
            ray.get([s.unload_adapter.remote(name) for s in cluster.servers])
        metrics = rollout_metrics(trajectories, prefix="eval")
        metrics.update(evaluation_metrics(trajectories, scenario_function(cfg)))
        metrics["eval/lost"] = collected["collect/lost"]
        metrics["eval/seconds"] = collected["collect/seconds"]
        RunLog(run_dir).save_rollouts(
            trajectories, target.iteration, name=f"eval_held_out/{target.labels[0]}"
        )
        results.append((target.label, target.iteration, metrics))
        for label in target.labels:
            row.update(flatten(label, target.iteration, metrics))
    row["held_out/num_tasks"] = len(tasks)
    return {"num_tasks": len(tasks), "results": results, "row": row}
