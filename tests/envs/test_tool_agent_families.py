"""`agent=tools` on the families whose tool is the generic `act(action)`: AgentGym's protocol (`agentgym_http` on our
gem hunt server; babyai, textcraft and sciworld are the same family class and agent) and OpenEnv (the gem hunt
served as an OpenEnv environment). The solver's actions, sent once as text and once as `act` calls through the
real episode runner and the family's own task source on a real server, give the same observations and scores.
Through OpenEnv the tools are those the served gem hunt lists at its `/mcp` (`open`, `answer`), each call an OpenEnv
`call_tool` step."""

from __future__ import annotations

import asyncio

import pytest
from transformers import AutoTokenizer

from loop_agents.config.load import compose
from loop_agents.envs.agentgym import EnvServerProcess
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id
from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.openenv.tool_calls import encode_call
from loop_agents.envs.selected import close_task_source, make_task_source, start_task_source
from loop_agents.orchestration.agent_choice import make_agent
from loop_agents.orchestration.components import episode_config
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.demonstrations import call_for_action
from loop_agents.tools.parsers import HermesParser, ToolCall
from tests.rollout.scripted import ScriptedGenerator

pytestmark = pytest.mark.slow  # env servers
TASKS = ["gemhunt_10000", "gemhunt_10001"]


def solver_actions(task_id: str, wrong_first: bool) -> list[str]:
    task = generate_task(parse_task_id(task_id))
    wrong = [f"open {next(c for c in task.room if c not in task.chain)}"] if wrong_first else []
    return wrong + [f"open {name}" for name in task.chain] + [f"answer {task.code}"]


def act_call(action: str) -> ToolCall:
    return ToolCall("act", {"action": action})


def gem_hunt_call(action: str) -> ToolCall:
    """The gem hunt's own call (open(container), answer(code)) of a text action."""
    return call_for_action(action, GEM_HUNT_TOOLS)


def mcp_action(action: str) -> str:
    """The environment action of the gem hunt's call of `action` through OpenEnv's MCP tools."""
    call = gem_hunt_call(action)
    return encode_call(call.name, call.arguments)


async def play_both(
    overrides: list[str], tokenizer, call_of=act_call, sent=lambda action: action
) -> list[tuple]:
    """The solver's episodes as text actions, then as calls (`call_of`); `sent`: the environment action a call
    becomes (the text action itself for `act`)."""
    results = []
    for kind in ("text", "tools"):
        cfg = compose([*overrides, f"agent={kind}", "llm.max_new_tokens=64"])
        episode = episode_config(cfg, max_turns=10)
        chat, agent, source = chat_format(tokenizer, episode), make_agent(cfg), make_task_source(cfg)
        await start_task_source(source)
        try:
            for index, task_id in enumerate(TASKS):
                actions = solver_actions(task_id, wrong_first=index == 1)
                texts = actions if kind == "text" else [HermesParser().render([call_of(a)]) for a in actions]
                generator = ScriptedGenerator([chat.encode(t) + [chat.turn_end_id] for t in texts])
                traj = await run_episode(
                    await source.make_env(), generator, agent, chat, episode, task_id=task_id
                )
                assert traj.finish_reason is FinishReason.DONE and "tool_errors" not in traj.metadata, (
                    traj.metadata
                )
                assert [t.action_text for t in traj.turns] == (
                    actions if kind == "text" else [sent(a) for a in actions]
                )
                results.append(
                    (kind, task_id, [t.observation_text for t in traj.turns], traj.reward, traj.success)
                )
        finally:
            await close_task_source(source)
    return results


def check(results) -> None:
    text = [r[1:] for r in results if r[0] == "text"]
    tools = [r[1:] for r in results if r[0] == "tools"]
    assert tools == text
    assert [r[3] for r in text] == [True, True]


def test_agentgym_http_with_act_calls(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    with EnvServerProcess("gemhunt", startup_timeout_s=90) as server:
        check(
            asyncio.run(
                play_both(
                    ["env=agentgym_http", f"env.options.url={server.url}", "env.options.env=gemhunt"],
                    tokenizer,
                )
            )
        )


def test_openenv_with_the_served_mcp_tools(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    server = OpenEnvServerProcess(OpenEnvSettings(start_timeout_s=240, serve_family="bundled"))
    server.start()
    try:
        overrides = ["env=openenv", f"env.options.url={server.url}"]
        check(asyncio.run(play_both(overrides, tokenizer, gem_hunt_call, mcp_action)))
    finally:
        server.stop()
