"""TGC and SGC (AppWorld's task and scenario goal completion), overall and per difficulty.

TGC = 100 * mean over tasks of success; SGC = 100 * mean over scenarios of min(success of its
tasks), i.e. a scenario counts only if every one of its tasks passed (AppWorld `Metric`,
docs/reference-ml-loop.md §5.4). Per difficulty, both use only the tasks of that difficulty.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from loop_agents.envs.appworld.splits import scenario_of


def goal_completion(successes: Mapping[str, bool]) -> dict[str, float]:
    """{"tgc", "sgc", "num_tasks", "num_scenarios"} for task id -> success."""
    if not successes:
        raise ValueError("goal_completion needs at least one task result")
    by_scenario: dict[str, list[bool]] = defaultdict(list)
    for task_id, success in successes.items():
        by_scenario[scenario_of(task_id)].append(bool(success))
    tgc = 100.0 * sum(map(bool, successes.values())) / len(successes)
    sgc = 100.0 * sum(all(v) for v in by_scenario.values()) / len(by_scenario)
    return {"tgc": tgc, "sgc": sgc, "num_tasks": len(successes), "num_scenarios": len(by_scenario)}


def goal_completion_by_difficulty(
    successes: Mapping[str, bool], difficulties: Mapping[str, int]
) -> dict[str, dict[str, float]]:
    """{"aggregate": ..., "difficulty_1": ..., ...} (only difficulties that occur)."""
    missing = [task_id for task_id in successes if task_id not in difficulties]
    if missing:
        raise ValueError(f"no difficulty for tasks {missing[:5]}")
    result = {"aggregate": goal_completion(successes)}
    for level in sorted({difficulties[t] for t in successes}):
        subset = {t: s for t, s in successes.items() if difficulties[t] == level}
        result[f"difficulty_{level}"] = goal_completion(subset)
    return result
