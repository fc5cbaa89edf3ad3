"""The tool-calling agent (`agent=tools`): the family's tools in the chat template, one call per turn.

It wraps the family's text agent, which keeps what is the family's: the opening messages (system prompt, task) and
the text of an observation. What changes is the action: the chat template declares the family's tools in the
system turn (`ChatFormat(tools=...)`, set from `EpisodeConfig.tools`), the model answers with a call in its
family's format (tools/parsers.py), the call is checked against the tool's schema and becomes the environment's
text action through `ToolSpec.to_action`; the observation comes back as a `tool` message (observation_role tool).
Malformed output (tools/errors.py kinds) becomes one tool error message the model sees, counted per kind; the
episode goes on. Tool responses are context (loss mask 0) like every observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loop_agents.rollout.agent import ParsedAction, answer_text
from loop_agents.rollout.environment import ResetResult
from loop_agents.tools.dispatch import action_of_message
from loop_agents.tools.errors import ToolCallError, ToolErrorKind
from loop_agents.tools.parsers import ToolCallParser
from loop_agents.tools.spec import ToolSpec

THINKING_NOT_CLOSED = ToolCallError(
    ToolErrorKind.THINKING_NOT_CLOSED,
    "your message ended inside <think> ... </think>; no tool was called. Close </think>, then call one tool.",
)


@dataclass(frozen=True)
class ToolCallingAgent:
    inner: Any  # the family's text agent: opening messages and observation text
    tools: tuple[ToolSpec, ...]
    parser: ToolCallParser

    def initial_messages(self, reset: ResetResult) -> list[dict[str, str]]:
        return self.inner.initial_messages(reset)

    def parse_action(self, text: str) -> ParsedAction:
        answer = answer_text(text)
        try:
            if answer is None:
                raise THINKING_NOT_CLOSED
            action, _ = action_of_message(answer, self.tools, self.parser)
        except ToolCallError as err:
            return ParsedAction(None, err.feedback(), error_kind=err.kind.value)
        return ParsedAction(action)

    def format_observation(self, observation: str, reset: ResetResult) -> str:
        return self.inner.format_observation(observation, reset)

    def action_of(self, message: str) -> str | None:
        """The action the family's text agent reads in `message` (demonstrations are written that way)."""
        return self.inner.parse_action(message).action


def tool_schemas(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools as the chat template takes them (`apply_chat_template(tools=...)`)."""
    return [tool.openai_schema() for tool in tools]
