"""Agents: code/action extraction, and the AppWorld demonstration is correct code."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from loop_agents.envs.appworld.agent import AppWorldAgent, extract_code
from loop_agents.envs.appworld.prompt import build_messages
from loop_agents.rollout.environment import ResetResult
from loop_agents.rollout.text_agent import TextActionAgent

INFO = {
    "instruction": "How many songs are in my 'Road trip' playlist?",
    "supervisor": {"first_name": "Sam", "last_name": "Lee", "email": "sam@x.com", "phone_number": "123"},
    "datetime": "2023-05-18T12:00:00",
}


def test_extract_code_takes_the_first_complete_block_after_thinking():
    assert extract_code("a\n```python\nx = 1\n```\nb\n```python\ny = 2\n```") == "x = 1\n"
    assert extract_code("```py\nprint(1)\n```") == "print(1)\n"
    assert extract_code("no code here") is None
    assert extract_code("```python\nprint('cut by max_tokens')") is None  # unterminated: not executed
    assert extract_code("```\nplain fence\n```") is None
    assert extract_code("<think>\n```python\nbad()\n```\n</think>\n\n```python\ngood()\n```") == "good()\n"
    assert extract_code("<think>\n```python\nbad()\n```\n</think>\nno code after thinking") is None
    assert extract_code("<think>\n```python\nbad()\n```") is None


def test_appworld_agent_feedback_and_observation_format():
    agent = AppWorldAgent()
    assert agent.parse_action("```python\nx = 1\n```").action == "x = 1\n"
    no_code = agent.parse_action("I would call the API.")
    assert no_code.action is None and "No complete Python code block" in no_code.feedback
    assert "</think>" in agent.parse_action("<think>\nhmm").feedback
    observation = agent.format_observation("[1, 2]\n", ResetResult("", INFO))
    assert observation.startswith("Output:\n```\n[1, 2]\n```\n\nAs a reminder:\nToday's date is: 2023-05-18")
    assert observation.endswith("Task: How many songs are in my 'Road trip' playlist?")
    assert (
        AppWorldAgent(restate_task=False).format_observation("ok", ResetResult("", INFO))
        == "Output:\n```\nok\n```"
    )


def test_prompt_structure_and_task_facts():
    messages = build_messages(INFO)
    roles = [m["role"] for m in messages]
    assert roles[:2] == ["system", "user"] and roles[2:] == ["assistant", "user"] * 9
    final = messages[-1]["content"]
    assert "Output:\n```\nMarked the active task complete.\n```" in final  # last demo output, then the task
    assert "My name is: Sam Lee. My personal email is sam@x.com and phone number is 123." in final
    assert final.endswith("Task: How many songs are in my 'Road trip' playlist?")
    with pytest.raises(ValueError, match="lacks \\['supervisor'\\]"):
        build_messages({"instruction": "x"})
    custom = build_messages({**INFO, "app_descriptions": [{"name": "spotify", "description": "music"}]})
    assert '"description": "music"' in custom[3]["content"]


class _DemoApp:
    """Answers the demo's API calls the way AppWorld would, for checking that the demo code runs."""

    def __init__(self, name: str, world: dict) -> None:
        self.name, self.world = name, world

    def __getattr__(self, api: str):
        def call(**kwargs):
            if api == "show_account_passwords":
                return [
                    {"account_name": "amazon", "password": "a"},
                    {"account_name": "spotify", "password": "s"},
                ]
            if api == "login":
                assert kwargs == {"username": "joyce-weav@gmail.com", "password": "s"}, kwargs
                return {"access_token": "tok", "token_type": "Bearer"}
            if api == "show_playlist_library":
                assert kwargs["access_token"] == "tok" and kwargs["page_limit"] <= 20
                return [{"playlist_id": i} for i in range(20 * kwargs["page_index"], 23)][:20]
            if api == "complete_task":
                self.world["answer"] = kwargs.get("answer")
                return None
            return [{"name": "x", "description": "y"}]

        return call


def test_demonstration_code_runs_and_gives_its_shown_outputs():
    """The reference's demo had a list indexed with "password" and an undefined token; ours runs."""
    messages = build_messages(INFO)
    world: dict = {}
    namespace = {"apis": type("Apis", (), {"__getattr__": lambda self, app: _DemoApp(app, world)})()}
    for assistant, observation in zip(messages[2::2], messages[3::2], strict=True):
        blocks = re.findall(r"```(?:python|py)\n(.*?)```", assistant["content"], re.DOTALL)
        assert len(blocks) == 1 and extract_code(assistant["content"]) == blocks[0]
        assert not re.search(r"^[ \t]+```", assistant["content"], re.MULTILINE)  # no indented fence
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(blocks[0], "<demo>", "exec"), namespace)
        assert observation["content"].startswith("Output:\n```\n")
        if "num_playlists = len(playlists)" in blocks[0]:
            assert out.getvalue() == "23\n" and observation["content"].startswith("Output:\n```\n23\n```")
        if "show_account_passwords" in blocks[0]:
            shown = observation["content"].split("```\n")[1].rsplit("\n```", 1)[0]
            assert all(set(account) == {"account_name", "password"} for account in json.loads(shown))
    assert world["answer"] == 23


def test_text_agent_actions():
    agent = TextActionAgent(action_regex=r"Action:\s*(.+)")
    assert agent.parse_action("Thought: go.\nAction: go to the red ball \n").action == "go to the red ball"
    assert agent.parse_action("<think>\nAction: no\n</think>\nAction: yes").action == "yes"
    missing = agent.parse_action("I will go")
    assert missing.action is None and "Action" in missing.feedback
    assert TextActionAgent().parse_action("  look around \n").action == "look around"
    assert TextActionAgent().parse_action("   ").action is None
    reset = ResetResult("You are in a room.", {"system_prompt": "Env rules."})
    assert TextActionAgent().initial_messages(reset) == [
        {"role": "system", "content": "Env rules."},
        {"role": "user", "content": "You are in a room."},
    ]
    with pytest.raises(ValueError, match="action_regex"):
        TextActionAgent(action_regex="(unclosed")
