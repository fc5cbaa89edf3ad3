"""AppWorldEnvironment: one episode on one pooled episode host, behind the project's env protocol.

    reset(task_id) -> /initialize      observation = instruction; info = supervisor, datetime, ...
    step(code)     -> /execute, /task_completed    observation = execution output; done = completed
    evaluate()     -> /evaluate                    reward = passed/num_tests (or 0/1), details
    close()        -> /close, host back to the pool, generated experiment outputs removed

The model's code is untrusted. It runs in a fresh process per episode, forked from a zygote that
only ever held code and confined while single-threaded (a private tmpfs view, namespaces, no
capabilities, Landlock, a seccomp allow list, rlimits; see host/policy_process.py and
docs/security.md). The task's databases live in a separate API process that answers only the task's
public app APIs; the end state it saves is signed by the host and scored by AppWorld's own evaluator
in a third process. AppWorld's name guard still runs first, but it is not a boundary: `import os`
passes it, and the sandbox is what stops the cell.
Syntax errors, exceptions and sandbox refusals (PermissionError, unreachable network) come back as
"Execution failed ..." output and the episode goes on. Whatever else the policy's code does to its own side
ends the episode as a failed attempt: a cell that runs past its deadline, kills or wedges its own process,
floods its output, closes its channel to the apps, or reaches a budget the API process holds (saved-state
size, API CPU): done=True, `info["error"]` names why, and evaluate() scores the state the API process holds
(what its calls did until then), with `details["episode_ended"]` naming why. Only a failure of a trusted
process (host, API process, evaluator: death, timeout, 5xx), which nothing the policy sends can cause,
raises EnvironmentFailure, which the episode runner records as `env_error` and retries.
"""

from __future__ import annotations

import asyncio
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
from loop_agents.rollout.environment import EnvironmentFailure, Evaluation, ResetResult, StepResult

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
        self.ended: str | None = None  # why the host ended the episode (the policy's own doing)

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
            "isolation_timing": task.get("timing", {}),
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
                "execute",
                timeout=self.config.execute_timeout_s + self.config.grace_s + _EXECUTE_MARGIN_S,
                code=action,
            )
        except EnvironmentFailure as failure:
            if isinstance(failure.__cause__, OutputTooLarge):  # the host's own cap failed to catch it
                return self._end("output_too_large", {"size": failure.__cause__.size})
            raise
        if isinstance(output, dict) and "ended" in output:
            return self._end(str(output["ended"]), output)
        if not isinstance(output, str):
            output = str(output)
        completed = await self._call("task_completed")
        if isinstance(completed, dict) and "ended" in completed:
            return self._end(str(completed["ended"]), completed)
        self.completed = completed is True
        done = self.completed or self.interactions >= self.config.max_interactions
        return StepResult(
            observation=output,
            done=done,
            info={"task_completed": self.completed, "interactions": self.interactions},
        )

    def _end(self, why: str, reply: dict[str, Any]) -> StepResult:
        """The policy ended its own episode: a failed attempt, scored by evaluate() on the state its calls made."""
        self.completed = True
        self.ended = why
        messages = {
            "timeout": f"Execution failed. The cell ran past its {self.config.execute_timeout_s} s limit "
            "and was killed; the episode is over.",
            "output_too_large": f"Execution failed. The output exceeded {reply.get('size', '?')} bytes and was "
            "dropped; the episode is over.",
            "state_too_large": "Execution failed. The apps' saved state would exceed its "
            f"{reply.get('state_cap_mb', '?')} MB cap; the last API call was undone and the episode is over.",
            "api_channel_closed": "Execution failed. The code closed its connection to the apps; "
            "the episode is over.",
            "api_cpu_budget": "Execution failed. The apps used the episode's CPU time; the episode is over.",
        }
        observation = messages.get(why, "Execution failed. The execution process died; the episode is over.")
        return StepResult(
            observation=observation, done=True, info={"error": why, "interactions": self.interactions}
        )

    async def evaluate(self) -> Evaluation:
        """AppWorld's score of the state the API process holds, also for an episode the policy ended itself
        (`details["episode_ended"]` says how); reward 0 only where the host could not score that state."""
        if self._server is None or self.task_id is None:
            raise RuntimeError("AppWorldEnvironment.evaluate before reset")
        if not self._server_ok:
            raise EnvironmentFailure("the episode's AppWorld host was recycled; cannot evaluate")
        report = await self._call("evaluate", timeout=self.config.evaluate_timeout_s)
        if isinstance(report, dict) and "ended" in report:  # tampered or unscorable output
            self.ended = self.ended or str(report["ended"])
            evaluation = Evaluation(
                reward=0.0, success=False, details={"episode_ended": str(report["ended"]), "tests": []}
            )
        else:
            try:
                evaluation = evaluation_from_report(report, self.config.reward)
            except ValueError as error:
                raise EnvironmentFailure(str(error)) from error
            evaluation.details["evaluate_s"] = report.get("evaluate_s")  # the evaluator fork's wall time
            evaluation.details["evaluator_timing"] = report.get("timing", {})
            if self.ended is not None:
                evaluation.details["episode_ended"] = self.ended
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
            # off the event loop: a large folder must not stall the other episodes and the trainer
            await asyncio.to_thread(shutil.rmtree, self.pool.outputs_dir / self.experiment_name, True)

    async def _call(self, method: str, timeout: float | None = None, **body: Any) -> Any:
        assert self._server is not None
        if not self._server_ok:
            raise EnvironmentFailure(f"AppWorld server for {self.task_id} already failed")
        try:
            return await self._server.call(method, timeout=timeout, task_id=self.task_id, **body)
        except ServerError as error:
            self._server_ok = False  # recycled at close()
            raise EnvironmentFailure(f"AppWorld {method} failed for {self.task_id}: {error}") from error
