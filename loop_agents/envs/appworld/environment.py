"""AppWorldEnvironment: one episode on one pooled env server, behind the project's env protocol.

    reset(task_id) -> /initialize      observation = instruction; info = supervisor, datetime, ...
    step(code)     -> /execute, /task_completed    observation = execution output; done = completed
    evaluate()     -> /evaluate (suppress_errors)   reward = passed/num_tests (or 0/1), details
    close()        -> /close, server back to the pool, generated experiment outputs removed

The model's code runs in the server's IPython under AppWorld's safety guard and SIGALRM timeout;
syntax errors, exceptions, `import os` and timeouts come back as "Execution failed ..." output.
Anything that breaks the server itself (death, HTTP timeout, 5xx, a reply above
`max_output_bytes`) recycles the server and raises EnvironmentFailure, which the episode runner
records as `env_error` and retries on a fresh server.
"""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
from typing import Any

from loop_agents.envs.appworld.apps import APP_DESCRIPTIONS
from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.pool import AppWorldServerPool
from loop_agents.envs.appworld.reward import evaluation_from_report
from loop_agents.envs.appworld.server import AppWorldServer, OutputTooLarge, ServerError
from loop_agents.envs.appworld.splits import scenario_of, task_difficulty
from loop_agents.envs.protocol import EnvironmentFailure, Evaluation, ResetResult, StepResult

_episode_counter = itertools.count()
# The HTTP deadline of /execute: AppWorld's own cell timeout plus time to save DBs and logs.
_EXECUTE_MARGIN_S = 30.0


class AppWorldEnvironment:
    """One episode session; not reusable across tasks after close()."""

    def __init__(
        self, pool: AppWorldServerPool, config: AppWorldConfig, experiment_name: str | None = None
    ) -> None:
        self.pool = pool
        self.config = config
        self._generated_name = experiment_name is None
        self.experiment_name = experiment_name or (
            f"{config.experiment_prefix}_{os.getpid()}_{next(_episode_counter)}_{uuid.uuid4().hex[:6]}"
        )
        self.task_id: str | None = None
        self.interactions = 0
        self.completed = False
        self._server: AppWorldServer | None = None
        self._server_ok = True
        self._closed = False

    async def reset(self, task_id: str) -> ResetResult:
        if self.task_id is not None:
            raise RuntimeError("AppWorldEnvironment.reset called twice; make a new env per episode")
        scenario = scenario_of(task_id)
        difficulty = task_difficulty(self.config.root_path, task_id)
        self.task_id = task_id
        try:
            self._server = await self.pool.acquire()
        except ServerError as error:
            raise EnvironmentFailure(str(error)) from error
        task = await self._call(
            "initialize",
            timeout=self.config.initialize_timeout_s,
            experiment_name=self.experiment_name,
            max_interactions=self.config.max_interactions,
            max_api_calls_per_interaction=self.config.max_api_calls_per_interaction,
            timeout_seconds=self.config.execute_timeout_s,
            raise_on_unsafe_syntax=self.config.raise_on_unsafe_syntax,
        )
        info: dict[str, Any] = {
            "task_id": task_id,
            "instruction": task["instruction"],
            "supervisor": dict(task["supervisor"]),
            "datetime": str(task["datetime"]),
            "difficulty": difficulty,
            "scenario_id": scenario,
            "app_descriptions": dict(APP_DESCRIPTIONS),
            "experiment_name": self.experiment_name,
            "max_interactions": self.config.max_interactions,
        }
        return ResetResult(observation=task["instruction"], info=info)

    async def step(self, action: str) -> StepResult:
        if self._server is None or self.task_id is None:
            raise RuntimeError("AppWorldEnvironment.step before reset")
        if self.completed or self.interactions >= self.config.max_interactions:
            raise RuntimeError("AppWorldEnvironment.step after the episode ended")
        self.interactions += 1
        try:
            output = await self._call(
                "execute", timeout=self.config.execute_timeout_s + _EXECUTE_MARGIN_S, code=action
            )
        except EnvironmentFailure as failure:
            if isinstance(failure.__cause__, OutputTooLarge):
                # The model printed megabytes: its fault, so an observation, but the server's memory
                # and world are suspect, so the episode ends and the server is recycled.
                self.completed = True
                size = failure.__cause__.size
                return StepResult(
                    observation=f"Execution failed. The output exceeded {size} bytes and was dropped.",
                    done=True,
                    info={"error": "output_too_large"},
                )
            raise
        if not isinstance(output, str):
            output = str(output)
        self.completed = bool(await self._call("task_completed"))
        done = self.completed or self.interactions >= self.config.max_interactions
        return StepResult(
            observation=output,
            done=done,
            info={"task_completed": self.completed, "interactions": self.interactions},
        )

    async def evaluate(self) -> Evaluation:
        if self._server is None or self.task_id is None:
            raise RuntimeError("AppWorldEnvironment.evaluate before reset")
        if not self._server_ok:
            raise EnvironmentFailure("the episode's AppWorld server was recycled; cannot evaluate")
        report = await self._call(
            "evaluate", timeout=self.config.evaluate_timeout_s, suppress_errors=True, report=False
        )
        try:
            evaluation = evaluation_from_report(report, self.config.reward)
        except ValueError as error:
            raise EnvironmentFailure(str(error)) from error
        evaluation.details.update(
            task_id=self.task_id,
            experiment_name=self.experiment_name,
            task_completed=self.completed,
            interactions=self.interactions,
        )
        return evaluation

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        server, self._server = self._server, None
        if server is None:
            return
        if self._server_ok:
            try:
                await server.call("close", task_id=self.task_id)
            except ServerError:
                self._server_ok = False
        self.pool.release(server, healthy=self._server_ok)
        if self._generated_name and not self.config.keep_episode_outputs:
            shutil.rmtree(self.pool.outputs_dir / self.experiment_name, ignore_errors=True)

    async def _call(self, method: str, timeout: float | None = None, **body: Any) -> Any:
        assert self._server is not None
        if not self._server_ok:
            raise EnvironmentFailure(f"AppWorld server for {self.task_id} already failed")
        try:
            return await self._server.call(method, timeout=timeout, task_id=self.task_id, **body)
        except ServerError as error:
            self._server_ok = False  # recycled at close()
            raise EnvironmentFailure(f"AppWorld {method} failed for {self.task_id}: {error}") from error
