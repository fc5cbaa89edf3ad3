"""OpenEnv servers that fail in the ways a run meets, each a real server (OpenEnv's own server code, strict_app.py):
an action its schema rejects is an observation the agent reads (not a lost episode), a session refused at capacity
says "capacity", a server with fewer sessions than the run opens is one line at start-up, and a server that went
away is waited for (doubling backoff, bounded) and used again when it is back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
from omegaconf import OmegaConf

from loop_agents.envs.openenv.client import OpenEnvTaskSource
from loop_agents.envs.openenv.family import FAMILY
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.server_process import answers_health
from loop_agents.errors import ConfigError
from loop_agents.ports import free_port
from loop_agents.rollout.environment import EnvironmentFailure

pytestmark = pytest.mark.slow
APP = "tests.envs.openenv.strict_app:app"


def start_strict_server(port: int, **environ: str) -> subprocess.Popen:
    """strict_app.py under uvicorn on 127.0.0.1:`port` (a URL server, as a user runs one), ready when it returns."""
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", APP, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env={**os.environ, **environ}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not answers_health(f"http://127.0.0.1:{port}"):
        assert process.poll() is None and time.monotonic() < deadline, "strict_app did not start"
        time.sleep(0.2)
    return process


@pytest.fixture
def strict_two_sessions():
    port = free_port()
    process = start_strict_server(port, STRICT_MAX_SESSIONS="2")
    yield f"http://127.0.0.1:{port}"
    process.kill()
    process.wait()


def strict_source(url: str) -> OpenEnvTaskSource:
    return OpenEnvTaskSource(OpenEnvSettings(url=url, tasks="seeds", action_field="guess"))


def test_a_rejected_action_is_an_observation_and_a_full_server_says_capacity(strict_two_sessions):
    source = strict_source(strict_two_sessions)
    source.check()

    async def play():
        env = await source.make_env()
        await env.reset("seed-1")
        rejected = await env.step("I guess it is five")
        played = await env.step("3")
        evaluation = await env.evaluate()
        await env.close()
        return rejected, played, evaluation

    rejected, played, evaluation = asyncio.run(play())
    assert rejected.observation == (
        "Invalid action, rejected by the environment: guess: String should have at most 12 characters"
    ) and not rejected.done  # fmt: skip
    assert played.observation in (
        "No, higher.",
        "No, lower.",
        "Right!",
    )  # the session goes on after a rejection
    assert evaluation.details["rejected_actions"] == 1

    async def three_at_once():
        envs = [await source.make_env() for _ in range(3)]
        results = await asyncio.gather(
            *(env.reset(f"seed-{n}") for n, env in enumerate(envs)), return_exceptions=True
        )
        for env in envs:
            await env.close()
        return results

    failures = [r for r in asyncio.run(three_at_once()) if isinstance(r, Exception)]
    assert len(failures) == 1 and isinstance(failures[0], EnvironmentFailure)
    assert str(failures[0]).startswith(
        f"OpenEnv server {strict_two_sessions} is at capacity: 2 of 2 sessions in use"
    )


def test_fewer_sessions_than_the_run_opens_is_one_line_at_start_up(strict_two_sessions):
    url = strict_two_sessions
    cfg = OmegaConf.create(
        {"env": {"concurrency": 2}, "eval": {"enabled": True}, "learner": {"sft_epochs": 0}}
    )
    settings = OpenEnvSettings(url=url, tasks="seeds", action_field="guess")
    with pytest.raises(ConfigError) as err:
        FAMILY.check(cfg, settings)
    assert str(err.value) == (
        f"OpenEnv server {url} allows 2 concurrent sessions, fewer than the 4 the run opens (env.concurrency=2 "
        "episodes at once for the rollouts and as many for the evaluator); lower env.concurrency to 1 or start the "
        "server with more (OpenEnv's max_concurrent_envs)"
    )
    FAMILY.check(OmegaConf.merge(cfg, {"env": {"concurrency": 1}}), settings)  # 2 sessions: fits


def test_a_server_that_went_away_is_waited_for_with_backoff():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_strict_server(port)
    source = strict_source(url)
    source.check()
    process.kill()
    process.wait()

    async def gone_then_back():
        began = time.monotonic()
        short = await source.wait_until_healthy(3.0)  # bounded: gives up
        gave_up_after = time.monotonic() - began
        waiter = asyncio.ensure_future(source.wait_until_healthy(120.0))
        shared = asyncio.ensure_future(
            source.wait_until_healthy(120.0)
        )  # a second failing episode joins the wait
        await asyncio.sleep(4.0)
        restarted = await asyncio.to_thread(start_strict_server, port)
        return short, gave_up_after, await waiter, await shared, restarted

    short, gave_up_after, back, shared, restarted = asyncio.run(gone_then_back())
    try:
        assert short is False and 3.0 <= gave_up_after < 6.0
        assert back is True and shared is True
        env_ok = asyncio.run(_one_step(source))
        assert env_ok in ("No, higher.", "No, lower.", "Right!")
    finally:
        restarted.kill()
        restarted.wait()


async def _one_step(source: OpenEnvTaskSource) -> str:
    env = await source.make_env()
    await env.reset("seed-2")
    step = await env.step("4")
    await env.close()
    return step.observation


def test_train_refuses_a_server_with_too_few_sessions_in_one_line_exit_2(strict_two_sessions, tmp_path):
    url = strict_two_sessions
    began = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "loop_agents.train", "env=openenv", f"env.options.url={url}",
                          "env.options.tasks=seeds", "env.options.action_field=guess", "env.concurrency=2",
                          f"run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300)  # fmt: skip
    seconds = time.monotonic() - began
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    assert lines[0].startswith(
        f"config error: OpenEnv server {url} allows 2 concurrent sessions, fewer than the 4"
    )
    assert seconds < 20, seconds
    assert not (tmp_path / "run" / "checkpoints").exists()
