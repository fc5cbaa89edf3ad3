"""env.* -> task source, agent and demonstrations; bad options name the key."""

from __future__ import annotations

import asyncio

import pytest
from transformers import AutoTokenizer

from loop_agents.config.load import compose
from loop_agents.config.validate import ConfigError
from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.envs.selected import make_agent, make_task_source, scenario_function
from loop_agents.orchestration.demonstrations import demonstrations
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.text_agent import TextActionAgent


def test_bundled_source_agent_and_scenarios() -> None:
    cfg = compose(["env=bundled"])
    source = make_task_source(cfg)
    assert source.task_ids("dev")[0] == "gemhunt_10000" and len(source.task_ids("dev")) == 500
    env = asyncio.run(source.make_env())
    reset = asyncio.run(env.reset("gemhunt_10000"))
    assert reset.observation.startswith("Room:") and "gem" in reset.info["system_prompt"]
    assert isinstance(make_agent(cfg), TextActionAgent)
    assert scenario_function(cfg)("gemhunt_3") == "gemhunt_3"


def test_appworld_gets_the_react_agent_and_scenario_ids() -> None:
    cfg = compose(["env=appworld"])
    assert isinstance(make_agent(cfg), AppWorldAgent)
    assert scenario_function(cfg)("82e2fac_2") == "82e2fac"


def test_unknown_option_names_the_key_and_the_allowed_ones() -> None:
    """Checked at start-up (composition), before any worker builds the task source."""
    with pytest.raises(
        ConfigError, match=r"env\.options\.spare_move: not a setting of env 'bundled'.*spare_moves"
    ):
        compose(["env=bundled", "+env.options.spare_move=2"])


def test_agentgym_http_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="env.options.url"):
        compose(["env=agentgym_http", "~env.options.url"])


def test_options_reach_the_task_source_typed() -> None:
    """`env.options.<key>=v` needs no `+`; values arrive converted to the settings' types."""
    from loop_agents.envs.settings import env_settings

    settings = env_settings(compose(["env=appworld", "env.options.root=/data/appworld", "env.concurrency=3"]))
    assert (settings.root, settings.pool_size, settings.reward) == ("/data/appworld", 3, "partial")
    babyai = env_settings(compose(["env=babyai", "env.options.retries=5", "env.options.request_timeout_s=7"]))
    assert (babyai.env, babyai.retries, babyai.request_timeout_s) == ("babyai", 5, 7.0)
    assert isinstance(babyai.request_timeout_s, float)


def test_demonstrations_are_token_exact_with_actions_trainable(tiny_model_dir) -> None:
    cfg = compose(["env=bundled", "env.options.demo_count=3"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    chat = ChatFormat(tokenizer)
    demos = demonstrations(cfg, chat)
    assert len(demos) == 3
    for traj in demos:
        traj.validate()
        trained = [t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m]
        actions = [m["content"] for m in traj.messages if m["role"] == "assistant"]
        expected = []
        for action in actions:
            expected += chat.encode(action) + [chat.turn_end_id]
        assert trained == expected
    with pytest.raises(ValueError, match="does not generate"):
        demonstrations(compose(["env=babyai"]), chat)
