"""Generic text-action agent for AgentGym-style environments (BabyAI, TextCraft, SciWorld, ...).

One assistant message = one action. The system prompt comes from the environment's reset info
(`info["system_prompt"]`, else the configured default); the first observation is the first user
message. The action is the assistant text after any thinking, stripped; with `action_regex` it is
the regex's first group (or whole match), and a message where it does not match gets feedback
instead of being sent to the environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loop_agents.rollout.agent import ParsedAction, answer_text
from loop_agents.rollout.environment import ResetResult

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in a text environment. Each of your messages is one action; "
    "the environment replies with what happened."
)


@dataclass(frozen=True)
class TextActionAgent:
    system_prompt: str = DEFAULT_SYSTEM_PROMPT  # used when the environment provides none
    system_prompt_key: str = "system_prompt"  # reset-info key holding the environment's system prompt
    action_regex: str | None = None  # e.g. r"Action:\s*(.+)"; None = the whole message is the action

    def __post_init__(self) -> None:
        if self.action_regex is not None:
            try:
                re.compile(self.action_regex)
            except re.error as err:
                raise ValueError(
                    f"TextActionAgent.action_regex {self.action_regex!r} is invalid: {err}"
                ) from err

    def initial_messages(self, reset: ResetResult) -> list[dict[str, str]]:
        system = reset.info.get(self.system_prompt_key) or self.system_prompt
        return [{"role": "system", "content": system}, {"role": "user", "content": reset.observation}]

    def parse_action(self, text: str) -> ParsedAction:
        answer = answer_text(text)
        if answer is None:
            return ParsedAction(None, "Your message ended inside <think> ... </think>; no action was taken.")
        answer = answer.strip()
        if self.action_regex is None:
            if not answer:
                return ParsedAction(None, "Your message was empty; write one action.")
            return ParsedAction(answer)
        match = re.search(self.action_regex, answer, re.DOTALL)
        if match is None:
            return ParsedAction(None, f"No action found: your message must match {self.action_regex!r}.")
        action = (match.group(1) if match.groups() else match.group(0)).strip()
        return ParsedAction(action) if action else ParsedAction(None, "The action was empty.")

    def format_observation(self, observation: str, reset: ResetResult) -> str:
        return observation
