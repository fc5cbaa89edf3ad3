"""An action our served family's game raises on is the policy's (issue 48): `serve bundled` answers it as an
observation the agent sees and the episode goes on, scored as the same episode without that action; never an error
reply, which our client turns into an EnvironmentFailure that the collector retries and then drops (a policy that
wrote actions the game chokes on would otherwise make its own failing episodes disappear). Both protocols: the text
action (`{"text": ...}`) and the gem hunt's `open` tool over MCP (`call_tool`)."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time

import pytest

from loop_agents.envs.bundled.demonstrations import noisy_action
from loop_agents.envs.bundled.env import BundledEnvironment, BundledTaskSource
from loop_agents.envs.openenv.client import OpenEnvTaskSource
from loop_agents.envs.openenv.family import FAMILY
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.openenv.version import REPO_ROOT
from loop_agents.envs.server_process import answers_health
from loop_agents.ports import free_port
from tests.envs.openenv.choking_serve import VOID

pytestmark = pytest.mark.slow
ERROR = f"Error: the game could not carry out {VOID!r} (KeyError: 'void')."


@pytest.fixture(scope="module")
def choking_server():
    """Our `serve bundled` (OpenEnv's server in .venv-openenv, our family host here), its game raising on VOID."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.envs.openenv.choking_serve", str(port)], cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 240
    while not answers_health(url):
        assert process.poll() is None, process.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "serve bundled did not start"
        time.sleep(0.5)
    yield url
    process.terminate()  # SIGTERM: serve stops OpenEnv's server, then itself
    process.wait(30)


async def solve_with_a_void(
    source: OpenEnvTaskSource, task_id: str, action_of
) -> tuple[list, object, object]:
    """The scripted solver's episode with VOID sent after its first move, through our client; beside it the same
    solver in process without VOID. (our steps, our evaluation, the in-process evaluation)."""
    mirror, env = BundledEnvironment(), await source.make_env()
    await mirror.reset(task_id)
    await env.reset(task_id)
    steps, done, first = [], False, True
    while not done:
        action = noisy_action(mirror.game, 0.0, random.Random(0))
        local = await mirror.step(action)
        steps.append(await env.step(action_of(action)))
        assert steps[-1].observation == local.observation and steps[-1].done == local.done
        if first:
            steps.append(await env.step(action_of(VOID)))
            first = False
        done = local.done
    evaluation = await env.evaluate()
    await env.close()
    return steps, evaluation, await mirror.evaluate()


@pytest.mark.parametrize("protocol", ["text", "tools"])
def test_an_action_the_game_raises_on_is_an_observation_and_the_episode_goes_on(choking_server, protocol):
    settings = OpenEnvSettings(url=choking_server)
    if protocol == "text":
        source, action_of = OpenEnvTaskSource(settings), lambda action: action
    else:
        tools = FAMILY.tools(settings)  # the served gem hunt's MCP tools: open(container), answer(code)
        source = OpenEnvTaskSource(settings, use_tools=True, tools=lambda: tools)
        opener = next(t for t in tools if t.name == "open")
        answer = next(t for t in tools if t.name == "answer")

        def action_of(action: str) -> str:
            verb, _, argument = action.partition(" ")
            tool = opener if verb == "open" else answer
            return tool.to_action({"container" if verb == "open" else "code": argument})

    source.check()
    assert source.tool_calls == (protocol == "tools")
    task_id = BundledTaskSource().task_ids("dev")[4]
    steps, evaluation, local = asyncio.run(solve_with_a_void(source, task_id, action_of))
    choked = steps[1]
    assert choked.observation == ERROR and choked.done is False and choked.reward == 0.0, choked
    assert "tool_error" not in choked.info  # a well-formed call: the game's failure, not the call's
    scored = (evaluation.reward, evaluation.success)
    assert steps[-1].done and scored == (local.reward, local.success) == (1.0, True), scored
