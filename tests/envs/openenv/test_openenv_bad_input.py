"""Bad OpenEnv servers: refused, silent, not OpenEnv, the wrong fields, a step that times out. At start-up each is
one line naming the URL and what was expected (exit 2 from the train command); in a run, the episode fails with an
EnvironmentFailure, is retried and counted, and never becomes a silent zero."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.openenv.client import OpenEnvTaskSource, probe
from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.errors import ConfigError
from loop_agents.orchestration.collector import collect_groups
from loop_agents.ports import free_port
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.environment import EnvironmentFailure
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.trajectory import FinishReason
from tests.rollout.scripted import ScriptedGenerator


class NotOpenEnv(BaseHTTPRequestHandler):
    """An HTTP server that is healthy but is no OpenEnv server: its /schema is something else."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"status": "healthy"} if self.path == "/health" else {"routes": ["/play"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def not_openenv_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotOpenEnv)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def silent_url():
    """A socket that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text, text
    return text


def test_refused_silent_and_foreign_servers_are_one_line_naming_the_url(not_openenv_url, silent_url):
    refused = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError) as err:
        probe(refused, OpenEnvSettings(url=refused))
    assert one_line(err.value).startswith(
        f"OpenEnv server {refused} refused"
    ) and "expected an OpenEnv" in str(err.value)
    with pytest.raises(ConfigError) as err:
        probe(silent_url, OpenEnvSettings(url=silent_url, connect_timeout_s=1.0))
    assert (
        one_line(err.value)
        == f"OpenEnv server {silent_url}: no answer to GET /health or /schema within 1.0 s"
    )
    with pytest.raises(ConfigError) as err:
        probe(not_openenv_url, OpenEnvSettings(url=not_openenv_url))
    assert f"OpenEnv server {not_openenv_url}: GET /schema is not OpenEnv's schema" in one_line(err.value)


@pytest.mark.slow
def test_wrong_fields_are_named(guess_server):
    url = guess_server.url
    with pytest.raises(ConfigError) as err:
        probe(url, OpenEnvSettings(url=url, action_field="text"))
    assert one_line(err.value) == (
        f"OpenEnv server {url}: its action has no field 'text' (env.options.action_field); its fields: metadata, guess"
    )
    with pytest.raises(ConfigError, match="no field 'board' \\(env.options.observation_field\\)"):
        probe(url, OpenEnvSettings(url=url, action_field="guess", observation_field="board"))


@pytest.mark.slow
def test_a_refused_server_fails_the_episode_not_the_run():
    url = f"http://127.0.0.1:{free_port()}"
    source = OpenEnvTaskSource(OpenEnvSettings(url=url, tasks="seeds"))
    source.finish_supported = False  # skip the start-up probe: the server goes away after start-up

    async def episode():
        env = await source.make_env()
        await env.reset("seed-0")

    with pytest.raises(
        EnvironmentFailure, match=f"OpenEnv server {url}: the WebSocket connect to /ws failed"
    ):
        asyncio.run(episode())


@pytest.mark.slow
def test_a_step_past_the_timeout_is_an_environment_failure(monkeypatch):
    monkeypatch.setenv("SLOW_STEP_S", "4")
    server = OpenEnvServerProcess(
        OpenEnvSettings(app="tests.envs.openenv.guess_app:app", start_timeout_s=240)
    )
    url = server.start()

    async def slow_step():
        source = OpenEnvTaskSource(OpenEnvSettings(url=url, tasks="seeds", action_field="guess",
                                                   message_timeout_s=1.0))  # fmt: skip
        env = await source.make_env()
        await env.reset("seed-0")
        await env.step("3")

    try:
        with pytest.raises(EnvironmentFailure, match=f"OpenEnv server {url}: no answer to step within 1.0 s"):
            asyncio.run(slow_step())
    finally:
        server.stop()


@pytest.mark.slow
def test_in_a_run_a_failing_episode_is_retried_and_counted(guess_server, tiny_model_dir):
    """The collector's retries over our runner: an OpenEnv error reply ends each attempt ENV_ERROR; after the
    retries the episode is dropped and counted (`collect/lost`), not returned with reward 0."""
    cfg = EpisodeConfig(
        max_tokens_per_turn=32, max_turns=3, max_context_tokens=2048, observation_max_tokens=64
    )
    chat = chat_format(AutoTokenizer.from_pretrained(tiny_model_dir), cfg)
    source = OpenEnvTaskSource(OpenEnvSettings(url=guess_server.url, tasks="seeds", action_field="guess"))

    async def episode(task_id, group_id, sample_index):
        generator = ScriptedGenerator([chat.encode("crash") + [chat.turn_end_id]])
        env = await source.make_env()
        return await run_episode(env, generator, TextActionAgent(), chat, cfg, task_id=task_id, group_id=group_id,
                                 sample_index=sample_index)  # fmt: skip

    trajs, stats = asyncio.run(collect_groups(["seed-1"], 1, episode, concurrency=1, retries=2))
    assert trajs == [] and (stats.retried, stats.failed, stats.finished) == (2, 1, 0)

    async def one():
        return await episode("seed-1", "g", 0)

    traj = asyncio.run(one())
    assert traj.finish_reason is FinishReason.ENV_ERROR and "crashed" in traj.metadata["error"]
    assert guess_server.url in traj.metadata["error"]


@pytest.mark.slow
def test_train_refuses_a_bad_server_in_one_line_exit_2(not_openenv_url, tmp_path):
    refused = f"http://127.0.0.1:{free_port()}"
    for url, expected in ((refused, "is not reachable"), (not_openenv_url, "is not OpenEnv's schema")):
        run = subprocess.run([sys.executable, "-m", "loop_agents.train", "env=openenv", f"env.options.url={url}",
                              f"run.dir={tmp_path / 'run'}"],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
        lines = [line for line in run.stderr.strip().splitlines() if line.strip()]
        assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
        assert url in lines[0] and expected in lines[0]
