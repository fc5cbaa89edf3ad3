"""Helpers of the tests that drive our served families with OpenEnv's current client (current_openenv.py, run in
`.venv-openenv`): the driver call, a server per mode, and episodes planned in process."""

from __future__ import annotations

import json
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.openenv.version import REPO_ROOT, openenv_python
from loop_agents.tools.spec import ToolSpec

DRIVER = Path(__file__).with_name("current_openenv.py")
CURRENT_OPENENV = "0.10.0"


def require_openenv_venv() -> None:
    if not openenv_python().exists():
        pytest.skip("OpenEnv venv missing: run bash scripts/install_openenv.sh (scripts/test.sh does)")


def current_openenv(request: dict[str, Any], timeout_s: float = 600) -> Any:
    """Run OpenEnv's current client (its own classes, unmodified) on `request`; its result."""
    run = subprocess.run([str(openenv_python()), str(DRIVER)], input=json.dumps(request), capture_output=True,
                         text=True, timeout=timeout_s, cwd=REPO_ROOT)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    reply = json.loads(run.stdout.strip().splitlines()[-1])
    assert reply["openenv"] == CURRENT_OPENENV
    return reply["result"]


@contextmanager
def started(family: str, overrides: list[str] | None = None, mode: str = "simulation", sessions: int = 64):
    """`serve <family>` on 127.0.0.1 in `mode`, stopped at the end."""
    require_openenv_venv()
    settings = OpenEnvSettings(serve_family=family, serve_overrides=overrides or [], max_sessions=sessions,
                               start_timeout_s=300)  # fmt: skip
    server = OpenEnvServerProcess(settings, mode=mode)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def as_calls(actions: list[str], tools: list[ToolSpec]) -> list[list[Any]]:
    """Text actions as [tool, arguments] calls through the tools' `from_action` (the first tool that takes it)."""
    calls = []
    for action in actions:
        for tool in tools:
            arguments = tool.from_action(action) if tool.from_action else None
            if arguments is not None:
                calls.append([tool.name, arguments])
                break
        else:
            raise AssertionError(f"no tool takes the action {action!r}")
    return calls


async def play_in_process(source: Any, task_id: str, actions: list[str]) -> tuple[list[str], Any]:
    """Our own episode of `task_id` with `actions` (stopping at done), scored as our trainer scores it."""
    env = await source.make_env()
    try:
        texts = [(await env.reset(task_id)).observation]
        for action in actions:
            result = await env.step(action)
            texts.append(result.observation)
            if result.done:
                break
        return texts, await env.evaluate()
    finally:
        await env.close()
