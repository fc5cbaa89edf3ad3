"""Checks a built data root with the real engine: every solution passes all tests, a no-op does not.

Runs AppWorld in-process, one world at a time on the main thread (the only safe way in-process,
docs/appworld-offline.md §5); call it from the AppWorld venv, never from a trainer process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TaskCheck:
    task_id: str
    solution_passes: int
    solution_tests: int
    noop_passes: int
    solution_output: str

    @property
    def ok(self) -> bool:
        return self.solution_passes == self.solution_tests and self.noop_passes < self.solution_tests


def check_tasks(
    root: Path, task_ids: list[str], experiment_name: str = "loop_agents_verify"
) -> list[TaskCheck]:
    """Runs ground_truth/solution.py and a no-op (`complete_task()` only) for each task."""
    os.environ["APPWORLD_ROOT"] = str(root)
    from appworld import AppWorld

    checks = []
    for task_id in task_ids:
        solution = (root / "data" / "tasks" / task_id / "ground_truth" / "solution.py").read_text()
        with AppWorld(task_id=task_id, experiment_name=experiment_name, timeout_seconds=30) as world:
            output = world.execute(solution)
            result = world.evaluate(suppress_errors=True).to_dict()
        with AppWorld(
            task_id=task_id, experiment_name=experiment_name + "_noop", timeout_seconds=30
        ) as world:
            world.execute("apis.supervisor.complete_task()")
            noop = world.evaluate(suppress_errors=True).to_dict()
        checks.append(
            TaskCheck(
                task_id=task_id,
                solution_passes=len(result["passes"]),
                solution_tests=result["num_tests"],
                noop_passes=len(noop["passes"]),
                solution_output=output,
            )
        )
    return checks
