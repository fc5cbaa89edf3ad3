"""The gem hunt's moves as tools: `open(container)` and `answer(code)`, each the text action the game takes."""

from __future__ import annotations

import re

from loop_agents.tools.spec import ToolSpec


def _argument_of(verb: str, key: str):
    pattern = re.compile(rf"^{verb} (.+)$")

    def from_action(action: str) -> dict[str, str] | None:
        match = pattern.match(action)
        return {key: match.group(1)} if match else None

    return from_action


def _one_string(key: str, description: str) -> dict:
    return {
        "type": "object",
        "properties": {key: {"type": "string", "description": description}},
        "required": [key],
    }


GEM_HUNT_TOOLS = [
    ToolSpec(
        name="open",
        description="Look inside a container of the room.",
        parameters=_one_string("container", 'The container, e.g. "red box".'),
        to_action=lambda arguments: f"open {arguments['container']}",
        from_action=_argument_of("open", "container"),
    ),
    ToolSpec(
        name="answer",
        description="Finish with the gem's code.",
        parameters=_one_string("code", 'The code, e.g. "4 7".'),
        to_action=lambda arguments: f"answer {arguments['code']}",
        from_action=_argument_of("answer", "code"),
    ),
]
