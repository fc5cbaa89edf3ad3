"""Small but real environments for the rollout tests (the project's real ones live in loop_agents/envs/).

`PythonReplEnv`: a child Python process executes code cells in a persistent namespace, AppWorld
style (`apis.supervisor.complete_task(answer=...)` ends the task; a traceback is reported as
"Execution failed."). Task ids are `sum:N` (answer: 0 + 1 + ... + N) or `say:TEXT` (answer: TEXT).
`GuessNumberEnv`: an in-process text game for the text-action agent (`guess:N`, N in 0..9).
"""

from __future__ import annotations

import asyncio
import json
import sys

from loop_agents.rollout.environment import EnvironmentFailure, Evaluation, ResetResult, StepResult

_CHILD = r"""
import contextlib, io, json, sys, traceback

class _Supervisor:
    def __init__(self):
        self.answer, self.completed = None, False
    def complete_task(self, answer=None):
        self.answer, self.completed = answer, True
        print("Marked the active task complete.")

class _Apis:
    def __init__(self):
        self.supervisor = _Supervisor()

namespace = {}
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "reset":
        namespace = {"apis": _Apis()}
        reply = {"ok": True}
    elif request["op"] == "exec":
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            try:
                exec(compile(request["code"], "<cell>", "exec"), namespace)
            except BaseException:
                print("Execution failed. Traceback:\n" + traceback.format_exc(limit=-1))
        supervisor = namespace["apis"].supervisor
        reply = {"output": buffer.getvalue(), "done": supervisor.completed}
    else:
        reply = {"answer": repr(namespace["apis"].supervisor.answer), "done": namespace["apis"].supervisor.completed}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""


class PythonReplEnv:
    """A real code-execution environment in a child process; one episode per reset."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self.process: asyncio.subprocess.Process | None = None
        self.task_id = ""

    async def _request(self, payload: dict) -> dict:
        if self.process is None or self.process.returncode is not None:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _CHILD,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=2**24,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write((json.dumps(payload) + "\n").encode())
            await self.process.stdin.drain()
            line = await asyncio.wait_for(self.process.stdout.readline(), self.timeout_s)
        except (TimeoutError, ConnectionError) as err:
            await self.close()
            raise EnvironmentFailure(f"python child did not answer {payload['op']}: {err!r}") from err
        if not line:
            await self.close()
            raise EnvironmentFailure(f"python child died during {payload['op']}")
        return json.loads(line)

    async def reset(self, task_id: str) -> ResetResult:
        kind, _, arg = task_id.partition(":")
        if kind == "sum":
            instruction = f"What is the sum of the integers from 0 to {int(arg)}?"
        elif kind == "say":
            instruction = f"Complete the task with the answer {arg!r}."
        else:
            raise EnvironmentFailure(f"unknown task id {task_id!r}")
        self.task_id = task_id
        await self._request({"op": "reset"})
        supervisor = {
            "first_name": "Ada",
            "last_name": "Lovelace",
            "email": "ada@example.com",
            "phone_number": "555",
        }
        info = {"instruction": instruction, "supervisor": supervisor, "datetime": "2024-05-01T10:00:00"}
        return ResetResult(observation="", info=info)

    async def step(self, action: str) -> StepResult:
        reply = await self._request({"op": "exec", "code": action})
        return StepResult(observation=reply["output"], done=reply["done"])

    async def evaluate(self) -> Evaluation:
        reply = await self._request({"op": "answer"})
        kind, _, arg = self.task_id.partition(":")
        expected = repr(sum(range(int(arg) + 1))) if kind == "sum" else repr(arg)
        success = reply["done"] and reply["answer"] == expected
        return Evaluation(reward=float(success), success=success, details={"answer": reply["answer"]})

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.process = None


class GuessNumberEnv:
    """Guess a digit; the environment says higher/lower. Reward 1 if guessed, minus 0.1 per extra guess."""

    def __init__(self) -> None:
        self.target = -1
        self.guesses = 0
        self.solved = False

    async def reset(self, task_id: str) -> ResetResult:
        kind, _, arg = task_id.partition(":")
        if kind != "guess" or not arg.isdigit() or len(arg) != 1:
            raise EnvironmentFailure(f"unknown task id {task_id!r}")
        self.target, self.guesses, self.solved = int(arg), 0, False
        prompt = "Guess my digit (0-9). Reply with `Action: <digit>`."
        return ResetResult(observation=prompt, info={"system_prompt": "You play a guessing game."})

    async def step(self, action: str) -> StepResult:
        self.guesses += 1
        if not action.isdigit():
            return StepResult(observation=f"Invalid action {action!r}: say one digit.", done=False)
        guess = int(action)
        if guess == self.target:
            self.solved = True
            return StepResult(observation="Correct!", done=True, reward=1.0)
        return StepResult(observation="Higher." if guess < self.target else "Lower.", done=False, reward=0.0)

    async def evaluate(self) -> Evaluation:
        reward = max(0.0, 1.0 - 0.1 * (self.guesses - 1)) if self.solved else 0.0
        return Evaluation(reward=reward, success=self.solved, details={"guesses": self.guesses})

    async def close(self) -> None:
        return None
