"""LOOP on OpenEnv environments through their tools (`env=openenv agent=tools`).

Against tools_app.py, a tools-only environment written with OpenEnv 0.10's own `MCPEnvironment` and `create_app`
(run in `.venv-openenv`): the tools come from `tools/list` at `/mcp`, the splits from OpenEnv's Task API by name,
each call the tool-calling agent makes is an OpenEnv `call_tool` step with its reward; a call off the tool's schema
is one tool error message, counted, that never reaches the server. A shrunk demo run trains 3 iterations on it.
Against guess_app.py (no `/mcp`, no Task API): the run falls back to the text action and to seeds, each said once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.openenv.client import OpenEnvTaskSource, probe
from loop_agents.envs.openenv.family import FAMILY
from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.errors import ConfigError
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.tool_agent import ToolCallingAgent
from loop_agents.rollout.trajectory import FinishReason, load_trajectories
from loop_agents.tools.parsers import parser_for

ROOT = Path(__file__).resolve().parents[3]
TOOLS_APP = {"app": "tests.envs.openenv.tools_app:app", "app_python": "openenv"}
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tools_server():
    server = OpenEnvServerProcess(OpenEnvSettings(start_timeout_s=240, **TOOLS_APP))
    server.start()
    yield server
    server.stop()


def call(name: str, arguments: dict) -> str:
    """A model message holding one call, in the Hermes format of the tiny model's Qwen2.5 template."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def test_tools_tasks_and_calls_through_mcp(tools_server):
    settings = OpenEnvSettings(url=tools_server.url)
    tools = FAMILY.tools(settings)
    assert [tool.name for tool in tools] == ["guess"]
    assert tools[0].parameters["properties"]["number"]["type"] == "integer"
    assert tools[0].parameters["required"] == ["number"]

    source = OpenEnvTaskSource(settings, use_tools=True)
    source.check()
    assert source.tool_calls
    assert source.task_ids("train") == [f"train-{i}" for i in range(20)]
    assert source.task_ids("eval") == [f"eval-{i}" for i in range(5)]
    with pytest.raises(ConfigError, match="its Task API has no split 'dev'; its splits: train, eval"):
        source.task_ids("dev")
    agent = ToolCallingAgent(TextActionAgent(), tuple(tools), parser_for("qwen2_5"))

    async def bisect(task_id: str):
        env = await source.make_env()
        await env.reset(task_id)
        off_schema = [agent.parse_action(call("guess", {"number": "five"})),
                      agent.parse_action(call("guess", {"number": 5, "hint": True})),
                      agent.parse_action(call("peek", {}))]  # fmt: skip
        low, high, seen, step = 0, 9, [], None
        while step is None or not step.done:
            parsed = agent.parse_action(call("guess", {"number": (low + high) // 2}))
            step = await env.step(parsed.action)
            seen.append(step.observation)
            low, high = (
                ((low + high) // 2 + 1, high)
                if "higher" in step.observation
                else (low, (low + high) // 2 - 1)
            )
        evaluation = await env.evaluate()
        await env.close()
        return off_schema, seen, evaluation

    async def many():
        return await asyncio.gather(*(bisect(f"eval-{i}") for i in range(5)))

    for off_schema, seen, evaluation in asyncio.run(many()):
        assert [p.action for p in off_schema] == [None, None, None]
        assert [p.error_kind for p in off_schema] == ["wrong_type", "unexpected_argument", "unknown_tool"]
        assert off_schema[0].feedback.startswith(
            "Error (wrong_type): guess: argument 'number' must be of type"
        )
        assert seen[-1] == "Right!" and all(s.startswith("No, ") for s in seen[:-1])
        assert (evaluation.reward, evaluation.success, evaluation.details["tool_errors"]) == (1.0, True, 0)

    async def server_side_error():  # a call only the server can refuse (sent without the agent's check)
        env = await source.make_env()
        await env.reset("train-0")
        step = await env.step(json.dumps({"tool": "guess", "arguments": {"number": "five"}}))
        evaluation = await env.evaluate()
        await env.close()
        return step, evaluation

    step, evaluation = asyncio.run(server_side_error())
    assert step.observation.startswith("Error (") and step.info == {"tool_error": True} and not step.done
    assert evaluation.details["tool_errors"] == 1 and evaluation.reward == 0.0

    with pytest.raises(ConfigError, match=r"its action has no field 'text'.*tools over MCP \(guess\)"):
        probe(tools_server.url, settings)  # a text agent on a tools-only server: one line saying agent=tools


def train(run_dir: Path, *overrides: str) -> str:
    """A shrunk `experiment=demo_openenv agent=tools` run of 3 iterations without a warm start; its output."""
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo_openenv", "agent=tools", f"run.dir={run_dir}",
        "env.options.serve_family=null", "env.options.demonstrations_from=null", "learner.sft_epochs=0",
        "learner.sft_until_p_optimal=null", "run.iterations=3", "algorithm.tasks_per_iteration=2",
        "algorithm.rollouts_per_task=4", "algorithm.minibatch_size=4", "env.turn_schedule.max_turns=3",
        "llm.max_new_tokens=24", "env.concurrency=4", "logging.wandb_mode=disabled", "logging.plots=false",
        "logging.progress=false", *overrides,
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return output


def training_rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [row for row in rows if "rollout/count" in row]


@pytest.mark.timeout(600)
def test_loop_trains_three_iterations_through_mcp_tools(tmp_path):
    run_dir = tmp_path / "run"
    output = train(run_dir, "env.options.app=tests.envs.openenv.tools_app:app", "env.options.app_python=openenv",
                   "env.train_split=train", "env.eval_split=eval", "eval.max_tasks=2", "eval.every_n_iterations=3",
                   "eval.held_out_tasks=0", "eval.runs_per_task=1")  # fmt: skip
    assert "no MCP tools" not in output and "no Task API" not in output
    check_tools_run(run_dir)


def check_tools_run(run_dir: Path) -> None:
    """The 3 iterations of the tools run: Task API ids, the tools declared, replies as tool messages, errors
    counted in the metrics as in the episodes, evaluations on the eval split."""
    rows = training_rows(run_dir)
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    for row in rows:
        episodes = load_trajectories(run_dir / "rollouts" / f"iter_{row['iteration']:06d}.jsonl")
        assert len(episodes) == 8 and {t.task_id for t in episodes} <= {f"train-{i}" for i in range(20)}
        counted: Counter[str] = Counter()
        for traj in episodes:
            assert traj.finish_reason in (FinishReason.DONE, FinishReason.TURN_BUDGET)
            system, opening = traj.messages[0]["content"], traj.messages[1]["content"]
            assert json.loads(opening) == {
                "metadata": {"task": traj.task_id}
            }  # the server's reset, by split/index
            roles = [m["role"] for m in traj.messages[2:]]
            assert set(roles[::2]) == {"assistant"} and set(roles[1::2]) <= {
                "tool"
            }  # replies as tool messages
            assert system
            counted.update(traj.metadata.get("tool_errors", {}))
        logged = {k.removeprefix("tools/error/"): v for k, v in row.items() if k.startswith("tools/error/")}
        assert logged == {kind: float(n) for kind, n in counted.items()}
    evaluations = [
        r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "eval/count" in r
    ]
    assert evaluations and all(
        r["eval/count"] == 2.0 for r in evaluations
    )  # eval-0, eval-1: the split by name
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "tiny_model")
    first = load_trajectories(run_dir / "rollouts" / "iter_000001.jsonl")[0]
    assert '"name": "guess"' in tokenizer.decode(first.token_ids[: first.turns[0].gen_start])  # declared


@pytest.mark.timeout(600)
def test_a_server_without_mcp_or_task_api_falls_back_and_says_so_once(tmp_path):
    run_dir = tmp_path / "run"
    output = train(run_dir, "env.options.app=tests.envs.openenv.guess_app:app", "env.options.action_field=guess",
                   "eval.enabled=false")  # fmt: skip
    assert output.count("no MCP tools") == 1 and output.count("no Task API") == 1
    assert "agent=tools acts through its text action instead, the one tool act(action)" in output
    assert "its splits are seeds instead" in output
    rows = training_rows(run_dir)
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    episodes = load_trajectories(run_dir / "rollouts" / "iter_000001.jsonl")
    assert len(episodes) == 8 and all(t.task_id.startswith("seed-") for t in episodes)
    assert all(t.messages[1]["content"] == "Guess my number from 0 to 9." for t in episodes)


EXAMPLES = (
    ROOT / "tests" / "envs" / "openenv" / "openenv_examples"
)  # OpenEnv's echo_env, unmodified (UPSTREAM.md)


@pytest.fixture(scope="module")
def echo_server():
    settings = OpenEnvSettings(
        start_timeout_s=240, app="envs.echo_env.server.app:app", app_python="openenv", app_dir=str(EXAMPLES)
    )
    server = OpenEnvServerProcess(settings)
    server.start()
    yield server
    server.stop()


@pytest.mark.timeout(600)
def test_loop_trains_on_openenv_echo_env_unmodified(echo_server, tmp_path):
    settings = OpenEnvSettings(url=echo_server.url)
    tools = FAMILY.tools(settings)
    assert [tool.name for tool in tools] == ["echo_message", "echo_with_length"]
    source = OpenEnvTaskSource(settings, use_tools=True, tools=lambda: tools)
    source.check()
    assert source.tool_calls and source.task_ids("dev")[:2] == ["seed-1000000", "seed-1000001"]  # no Task API

    async def echo():
        env = await source.make_env()
        await env.reset("seed-0")
        steps = [await env.step(tools[0].to_action({"message": "hello"})),
                 await env.step(tools[1].to_action({"message": "abc"}))]  # fmt: skip
        evaluation = await env.evaluate()
        await env.close()
        return steps, evaluation

    steps, evaluation = asyncio.run(echo())
    assert steps[0].observation == "hello" and json.loads(steps[1].observation) == {
        "message": "abc",
        "length": 3,
    }
    assert (evaluation.reward, evaluation.details["done"], evaluation.details["tool_errors"]) == (
        0.0,
        False,
        0,
    )

    run_dir = tmp_path / "run"
    output = train(run_dir, "env.options.app=envs.echo_env.server.app:app", "env.options.app_python=openenv",
                   f"env.options.app_dir={EXAMPLES}", "eval.enabled=false")  # fmt: skip
    assert "no MCP tools" not in output and output.count("no Task API") == 1
    assert [row["iteration"] for row in training_rows(run_dir)] == [1, 2, 3]
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "tiny_model")
    episodes = load_trajectories(run_dir / "rollouts" / "iter_000001.jsonl")
    assert len(episodes) == 8 and all(t.task_id.startswith("seed-") for t in episodes)
    opening = tokenizer.decode(episodes[0].token_ids[: episodes[0].turns[0].gen_start])
    assert '"name": "echo_message"' in opening and '"name": "echo_with_length"' in opening
