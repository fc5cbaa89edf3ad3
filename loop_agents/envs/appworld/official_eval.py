"""Runs AppWorld's own evaluator over saved experiment outputs, in the AppWorld venv.

The outputs are what env servers wrote under `<root>/experiments/outputs/<experiment>/tasks/`
for episodes run with that `experiment_name`. The evaluator replays them on the task DBs in a
fresh process (as `appworld evaluate <experiment> <split>` does) and writes
`evaluations/<split>.json`; we return TGC/SGC per difficulty from its per-task results.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.metrics import goal_completion_by_difficulty
from loop_agents.envs.appworld.splits import split_task_ids, task_difficulty
from loop_agents.redaction import child_environment

_RUNNER = """
import json, sys
from appworld.evaluator import evaluate_tasks
task_ids = json.loads(sys.argv[2])
result = evaluate_tasks(task_ids=task_ids, experiment_name=sys.argv[1], suppress_errors=True,
                        include_details=True, save_reports=True)
print("@@RESULT@@" + json.dumps(result, default=str))
"""


@dataclass
class OfficialEvaluation:
    """AppWorld's scores of one experiment on one split."""

    experiment_name: str
    split: str
    metrics: dict[str, dict[str, float]]  # aggregate / difficulty_N -> tgc, sgc, counts
    appworld_aggregate: dict[str, float]  # AppWorld's own {task_goal_completion, scenario_goal_completion}
    per_task: dict[str, dict[str, Any]]  # task id -> {success, num_tests, num_passed, difficulty}


def run_official_evaluation(
    experiment_name: str, split: str, config: AppWorldConfig, timeout_s: float = 1800.0
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
    env = child_environment({"APPWORLD_ROOT": str(root), "APPWORLD_CACHE": str(root / ".appworld_cache")})
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(config.python_path), "-c", _RUNNER, experiment_name, json.dumps(task_ids)],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    marker = "@@RESULT@@"
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(marker)), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"AppWorld evaluation failed (rc {done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(line[len(marker) :])
    per_task = {}
    for task_id, tracker in result["individual"].items():
        per_task[task_id] = {
            "success": bool(tracker["success"]),
            "num_tests": tracker["num_tests"],
            "num_passed": len(tracker["passes"]),
            "difficulty": task_difficulty(root, task_id),
        }
    metrics = goal_completion_by_difficulty(
        {t: r["success"] for t, r in per_task.items()},
        {t: r["difficulty"] for t, r in per_task.items()},
    )
    (root / "experiments" / "outputs" / experiment_name / "evaluations").mkdir(parents=True, exist_ok=True)
    (
        root / "experiments" / "outputs" / experiment_name / "evaluations" / f"{split}.loop_agents.json"
    ).write_text(json.dumps({"metrics": metrics, "per_task": per_task}, indent=2))
    return OfficialEvaluation(experiment_name, split, metrics, result["aggregate"], per_task)
