"""AppWorldTaskSource: split task ids for the sampler, and environment sessions on the pool."""

from __future__ import annotations

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.environment import AppWorldEnvironment
from loop_agents.envs.appworld.pool import AppWorldServerPool
from loop_agents.envs.appworld.splits import available_splits, scenario_of, split_task_ids, task_difficulty


class AppWorldTaskSource:
    """Implements `loop_agents.rollout.environment.TaskSource` for AppWorld.

    Create it, `await start()` (starts the server pool), and `await close()` at the end.
    """

    def __init__(self, config: AppWorldConfig) -> None:
        self.config = config
        self.pool = AppWorldServerPool(config)

    async def start(self) -> float:
        """Starts the server pool; returns its start-up wall time in seconds."""
        return await self.pool.start()

    async def close(self) -> None:
        await self.pool.close()

    def splits(self) -> list[str]:
        return available_splits(self.config.root_path)

    def task_ids(self, split: str) -> list[str]:
        """Task ids of `split` (a split file, `<split>_difficulty_<n>`, or `a_and_b`)."""
        return split_task_ids(self.config.root_path, split)

    def check_in_split(self, task_id: str, split: str) -> None:
        """Raises ValueError if `task_id` is not a task of `split`."""
        if task_id not in set(self.task_ids(split)):
            raise ValueError(f"AppWorld task {task_id!r} is not in split {split!r}")

    def difficulty(self, task_id: str) -> int:
        return task_difficulty(self.config.root_path, task_id)

    def scenario(self, task_id: str) -> str:
        return scenario_of(task_id)

    async def make_env(self, experiment_name: str | None = None) -> AppWorldEnvironment:
        """A new episode session; pass `experiment_name` to keep outputs for official scoring."""
        return AppWorldEnvironment(self.pool, self.config, experiment_name=experiment_name)
