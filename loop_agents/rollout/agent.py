"""What the episode runner needs from an agent: the opening prompt, action parsing, observation text.

Agents are stateless (one instance serves many concurrent episodes); everything episode-specific
comes from the environment's `ResetResult`. Tokens are not the agent's business: the runner renders
messages with the chat template turn by turn (chat.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from loop_agents.rollout.environment import ResetResult


@dataclass(frozen=True)
class ParsedAction:
    """An action for the environment, or (action None) feedback shown to the model instead."""

    action: str | None
    feedback: str = ""
    # a tool-calling agent's malformed call (tools/errors.py ToolErrorKind), counted per kind
    error_kind: str = ""


class Agent(Protocol):
    def initial_messages(self, reset: ResetResult) -> list[dict[str, str]]:
        """Chat messages (system, demonstrations, task) that open the episode."""
        ...

    def parse_action(self, text: str) -> ParsedAction:
        """Turn one assistant message (special tokens removed) into an action."""
        ...

    def format_observation(self, observation: str, reset: ResetResult) -> str:
        """Content of the message that carries an environment observation to the model."""
        ...


def answer_text(message: str) -> str | None:
    """The part of an assistant message after its thinking (Qwen3 `<think>…</think>`).

    Returns the message itself when it has no thinking, and None when the thinking never closed
    (the turn was cut inside it), since then there is no answer to act on.
    """
    if "</think>" in message:
        return message.rsplit("</think>", 1)[1]
    if "<think>" in message:
        return None
    return message
