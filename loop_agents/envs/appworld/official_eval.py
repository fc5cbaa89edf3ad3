"""Runs AppWorld's own evaluator over saved experiment outputs, in the AppWorld venv.

The outputs are what episodes wrote under `<root>/experiments/outputs/<experiment>/tasks/` for
episodes run with that `experiment_name`. The evaluator replays them on the task DBs in a fresh
process that never ran policy code (as `appworld evaluate <experiment> <split>` does), sandboxed
like an episode's evaluator (episode_host.py `--score-experiment`). Only outputs an episode host signed
are scored (host/provenance.py): outputs of unknown origin raise `UnverifiedOutputs` naming the file,
unless `trust_unsigned` (outputs of another AppWorld agent, on the caller's word). A task whose saved
changes hold anything but row INSERT/UPDATE/DELETE statements is not replayed and counts as failed
(`per_task[t]["tampered"]`). We return TGC/SGC per difficulty.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.metrics import goal_completion_by_difficulty
from loop_agents.envs.appworld.server import host_command, host_environment
from loop_agents.envs.appworld.splits import split_task_ids, task_difficulty


@dataclass
class OfficialEvaluation:
    """AppWorld's scores of one experiment on one split."""

    experiment_name: str
    split: str
    metrics: dict[str, dict[str, float]]  # aggregate / difficulty_N -> tgc, sgc, counts
    appworld_aggregate: dict[str, float]  # AppWorld's own {task_goal_completion, scenario_goal_completion}
    per_task: dict[str, dict[str, Any]]  # task id -> {success, num_tests, num_passed, difficulty}


class UnverifiedOutputs(ValueError):
    """Outputs whose origin cannot be established: the message names the first such file."""


def run_official_evaluation(
    experiment_name: str,
    split: str,
    config: AppWorldConfig,
    timeout_s: float = 1800.0,
    trust_unsigned: bool = False,
) -> OfficialEvaluation:
    """Scores every task of `split` from the outputs of `experiment_name` (missing outputs fail)."""
    config.check_installed()
    root = config.root_path
    task_ids = split_task_ids(root, split)
    outputs = root / "experiments" / "outputs" / experiment_name / "tasks"
    missing = [t for t in task_ids if not (outputs / t).is_dir()]
    if missing:
        raise FileNotFoundError(
            f"experiment {experiment_name!r} has no outputs for {len(missing)} tasks of {split!r} "
            f"under {outputs}, e.g. {missing[:3]}"
        )
    trust = ["--trust-unsigned"] if trust_unsigned else []
    command = host_command(
        config, "--score-experiment", experiment_name, "--tasks", json.dumps(task_ids), *trust
    )
    done = subprocess.run(
        command, cwd=root, env=host_environment(config), capture_output=True, text=True, timeout=timeout_s
    )
    marker = "@@RESULT@@"
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(marker)), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"AppWorld evaluation failed (rc {done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(line[len(marker) :])
    unverified = result.get("unverified", {})
    if unverified and not trust_unsigned:
        task_id, why = sorted(unverified.items())[0]
        raise UnverifiedOutputs(
            f"{why} ({len(unverified)} of {len(task_ids)} tasks unverified; scoring refused)"
        )
    per_task = {}
    for task_id, tracker in result["individual"].items():
        per_task[task_id] = {
            "success": bool(tracker["success"]),
            "num_tests": tracker["num_tests"],
            "num_passed": len(tracker["passes"]),
            "difficulty": task_difficulty(root, task_id),
        }
    for task_id, why in result.get("tampered", {}).items():
        per_task[task_id] = {"success": False, "num_tests": 0, "num_passed": 0, "tampered": why,
                             "difficulty": task_difficulty(root, task_id)}  # fmt: skip
    metrics = goal_completion_by_difficulty(
        {t: r["success"] for t, r in per_task.items()},
        {t: r["difficulty"] for t, r in per_task.items()},
    )
    (root / "experiments" / "outputs" / experiment_name / "evaluations").mkdir(parents=True, exist_ok=True)
    (
        root / "experiments" / "outputs" / experiment_name / "evaluations" / f"{split}.loop_agents.json"
    ).write_text(json.dumps({"metrics": metrics, "per_task": per_task}, indent=2))
    return OfficialEvaluation(experiment_name, split, metrics, result["aggregate"], per_task)
