"""`action_format=react`: the model's reply cut to its action the way AgentGym's clients do it."""

from __future__ import annotations

from loop_agents.envs.agentgym.client import react_action


def test_babyai_and_sciworld_take_the_text_after_action():
    reply = "Thought:\nThe ball is ahead.\n\nAction:\ngo to red ball 1 "
    assert react_action("babyai", reply) == "go to red ball 1"
    assert react_action("sciworld", "look around") == "look around"  # no "Action:": the whole reply
    # AgentGym cuts 5 characters for the 4-character "</s>": the action's last character goes too
    assert react_action("sciworld", "Action: open door to kitchen</s>") == "open door to kitche"
    assert react_action("babyai", "Action: go to red ball 1\n</s>") == "go to red ball 1"


def test_textcraft_keeps_one_line_and_plain_characters():
    assert react_action("textcraft", "Thought: x\nAction: craft 1 blue dye using 1 lapis_lazuli!\nmore") == (
        "craft 1 blue dye using 1 lapislazuli"
    )
    assert react_action("textcraft", "Action: get 1 oak log\nAction: inventory") is None
    assert react_action("textcraft", "Action: look") == "inventory"
    assert react_action("textcraft", "get 1 oak log") == ""  # no "Action:": AgentGym sends an empty action
