"""`agent=tools` from the config: every built-in family gets the tool-calling agent with its declared tools, and
the warm start's demonstrations and checks come in tool form (calls as the template writes them, observations as
tool responses, the gem's code symbols found inside the answer call)."""

from __future__ import annotations

import pytest
from transformers import AutoModelForCausalLM

from loop_agents.config.load import compose
from loop_agents.envs.bundled.demonstrations import heldout_clean_demonstrations
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id
from loop_agents.envs.bundled.warm_checks import code_token_weights
from loop_agents.envs.bundled.warm_start_quality import code_token_positions, episode_probabilities
from loop_agents.envs.openenv.catalogue import stop_shared_servers
from loop_agents.envs.selected import selected_family
from loop_agents.envs.settings import env_settings
from loop_agents.orchestration.agent_choice import make_agent
from loop_agents.orchestration.components import episode_config
from loop_agents.orchestration.warm_model import warm_start_demonstrations
from loop_agents.rollout.demonstration import demonstration_trajectory
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.tool_agent import ToolCallingAgent


@pytest.fixture(autouse=True, scope="module")
def _stop_openenv_servers():
    """env=openenv with agent=tools starts the served gem hunt to ask its /mcp for tools: stopped after the module."""
    yield
    stop_shared_servers()


TOOLS_OF = {
    "bundled": ["open", "answer"],
    "appworld": ["execute"],
    "babyai": ["act"],
    "textcraft": ["act"],
    "sciworld": ["act"],
    "agentgym_http": ["act"],
    "openenv": ["open", "answer"],  # the served gem hunt's tools, from tools/list at its /mcp
}
EXTRA = {
    "agentgym_http": ["env.options.url=http://127.0.0.1:9"],
    "openenv": ["env.options.serve_family=bundled"],
}


@pytest.mark.parametrize(
    "family", [pytest.param(f, marks=pytest.mark.slow) if f == "openenv" else f for f in sorted(TOOLS_OF)]
)  # openenv starts the served gem hunt (a server: slow)
def test_every_built_in_family_gets_its_tools(family) -> None:
    cfg = compose([f"env={family}", "agent=tools", *EXTRA.get(family, [])])
    agent = make_agent(cfg)
    assert isinstance(agent, ToolCallingAgent) and [t.name for t in agent.tools] == TOOLS_OF[family]
    episode = episode_config(cfg, max_turns=2)
    assert episode.observation_role == "tool"
    assert [t["function"]["name"] for t in episode.tools] == TOOLS_OF[family]
    text = compose([f"env={family}", *EXTRA.get(family, [])])  # the default stays the family's own agent
    assert not isinstance(make_agent(text), ToolCallingAgent)
    assert (episode_config(text, max_turns=2).observation_role, episode_config(text, max_turns=2).tools) == (
        "user",
        None,
    )


def test_warm_start_demonstrations_are_tool_calls(tiny_model_dir) -> None:
    cfg = compose(
        ["experiment=demo", "agent=tools", "env.options.demo_count=20", "learner.sft_check_episodes=5"]
    )
    chat, demos = warm_start_demonstrations(cfg, tiny_model_dir)
    assert chat.tools and len(demos) == 20
    for traj in demos:
        trained = chat.tokenizer.decode([t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m])
        assistant = [m["content"] for m in traj.messages if m["role"] == "assistant"]
        assert all(
            a.startswith('<tool_call>\n{"name": "') and a.endswith("}\n</tool_call>") for a in assistant
        )
        assert trained == "<|im_end|>".join(assistant) + "<|im_end|>"
        assert [m["role"] for m in traj.messages[2:]] == ["assistant", "tool"] * (len(assistant) - 1) + [
            "assistant"
        ]
    weights = code_token_weights(demos, chat, 4.0)
    answered = [
        (t, w) for t, w in zip(demos, weights, strict=True) if '"name": "answer"' in t.messages[-1]["content"]
    ]
    assert answered
    for traj, row in answered:  # 4x on exactly the code's two symbols inside `"code": "4 7"`
        code = traj.messages[-1]["content"].split('"code": "')[1].split('"')[0]
        weighed = [chat.decode([traj.token_ids[p]]) for p, w in enumerate(row) if w == 4.0]
        assert "".join(weighed) == code.replace(" ", "")
    # the warm start's checks score the solver's episodes in the same tool form, the code found inside the call
    checks = heldout_clean_demonstrations(3, {d.task_id for d in demos})
    for task_id, messages in checks:
        traj = demonstration_trajectory(chat, messages, task_id)
        assert traj.messages[-1]["content"].startswith('<tool_call>\n{"name": "answer"')
        code = generate_task(parse_task_id(task_id)).code
        symbols = "".join(chat.decode([traj.token_ids[p]]) for p in code_token_positions(traj, chat))
        assert symbols == code.replace(" ", "")
    factors = episode_probabilities(AutoModelForCausalLM.from_pretrained(tiny_model_dir), chat, checks)
    assert 0 < factors["p_code_1"] < 1 and factors["p_optimal_dev_episode"] <= factors["p_answer"] < 1


@pytest.mark.slow  # starts the served gem hunt
def test_openenv_borrowed_demonstrations_become_calls_of_the_served_tools(tiny_model_dir) -> None:
    """env=openenv serving the gem hunt: with agent=tools the agent calls the tools its /mcp lists (open, answer),
    the borrowed text demonstrations become calls of them (the gem hunt's own tools lend their from_action), and
    the code inside `"code": "4 7"` is what the warm start weighs."""
    cfg = compose(
        ["experiment=demo_openenv", "agent=tools", "env.options.demonstration_options.demo_count=20"]
    )
    chat, demos = warm_start_demonstrations(cfg, tiny_model_dir)
    assert [t["function"]["name"] for t in chat.tools] == ["open", "answer"]
    for traj in demos:
        assistant = [m["content"] for m in traj.messages if m["role"] == "assistant"]
        assert all(a.startswith('<tool_call>\n{"name": "') for a in assistant)
    weights = selected_family(cfg).demonstration_weights(cfg, env_settings(cfg), chat, demos)
    answered = [
        (t, w) for t, w in zip(demos, weights, strict=True) if '"name": "answer"' in t.messages[-1]["content"]
    ]
    assert answered
    for traj, row in answered:
        code = traj.messages[-1]["content"].split('"code": "')[1].split('"')[0]
        # the code's weight is scaled in tool form (test below), so it is the row's largest
        code_weight = max(row)
        assert code_weight > 4.0
        assert "".join(
            chat.decode([traj.token_ids[p]]) for p, w in enumerate(row) if w == code_weight
        ) == code.replace(" ", "")


def test_text_demonstrations_stay_text(tiny_model_dir) -> None:
    cfg = compose(["experiment=demo", "env.options.demo_count=5"])
    chat, demos = warm_start_demonstrations(cfg, tiny_model_dir)
    assert not chat.tools and isinstance(make_agent(cfg), TextActionAgent)
    assert all(not m["content"].startswith("<tool_call>") for d in demos for m in d.messages)


def test_the_code_keeps_its_share_of_the_warm_start_loss_in_tool_form(tiny_model_dir) -> None:
    """A tool call's scaffolding makes a demonstration's trained tokens ~5x as many as its text actions; the gem's
    code is weighed up by that factor in tool form, so its share of the loss is the text form's (within 3 points),
    not a fifth of it (at which three warm-start orders copied the code at chance)."""

    def code_share(overrides: list[str]) -> tuple[float, list]:
        cfg = compose(["experiment=demo", "env.options.demo_count=100", *overrides])
        chat, demos = warm_start_demonstrations(cfg, tiny_model_dir)
        weights = selected_family(cfg).demonstration_weights(cfg, env_settings(cfg), chat, demos)
        trained = [
            (w, m)
            for row, d in zip(weights, demos, strict=True)
            for w, m in zip(row, d.loss_mask, strict=True)
            if m
        ]
        return sum(w for w, _ in trained if w > 1) / sum(w for w, _ in trained), weights

    text_share, text_weights = code_share([])
    tools_share, tools_weights = code_share(["agent=tools"])
    assert {w for row in text_weights for w in row} == {1.0, 4.0}  # the text form as before
    assert max(w for row in tools_weights for w in row) > 4.0 * 3
    assert abs(tools_share - text_share) < 0.03, (text_share, tools_share)
