"""ReAct code agent for AppWorld: one Python code cell per turn (docs/reference-ml-loop.md §3).

Differences from ml-loop's `MinimalReactAgent`, on purpose (§8 items 9-10):
- only the first complete ```python (or ```py) block is executed, as the prompt asks, rather than
  all blocks concatenated plus a trailing unterminated one; a message with no complete block gets a
  feedback observation instead of an empty execution;
- with Qwen3 thinking, code is taken only from the text after `</think>`;
- observations use the same `Output:` + fenced-block format as the demonstration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loop_agents.envs.appworld.compact_prompt import build_compact_messages
from loop_agents.envs.appworld.prompt import build_messages, format_output, task_block
from loop_agents.rollout.agent import ParsedAction, answer_text
from loop_agents.rollout.environment import ResetResult

_CODE_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)

NO_CODE_FEEDBACK = (
    "No complete Python code block was found in your message, so nothing was executed. "
    "Write exactly one block that starts with ```python on its own line and ends with ```."
)
THINKING_NOT_CLOSED_FEEDBACK = (
    "Your message ended inside <think> ... </think>, so nothing was executed. "
    "Think briefly, close </think>, then write one ```python code block."
)


def extract_code(message: str) -> str | None:
    """The contents of the first complete ```python / ```py block after any thinking, or None."""
    answer = answer_text(message)
    if answer is None:
        return None
    match = _CODE_BLOCK.search(answer)
    return match.group(1) if match else None


PROMPTS = ("full", "compact")  # env.prompt: AppWorld's ReAct prompt with its worked example | compact


@dataclass(frozen=True)
class AppWorldAgent:
    """Stateless ReAct agent; `restate_task` repeats the task after each output (ml-loop's reminder).

    `prompt="compact"` (env.prompt) starts from the compact prompt and never restates the task: its
    episodes are short and the task is already in the only user message.
    """

    restate_task: bool = True  # append "As a reminder" + date/supervisor/task to every observation
    prompt: str = "full"  # full | compact

    def __post_init__(self) -> None:
        if self.prompt not in PROMPTS:
            raise ValueError(
                f"env.prompt={self.prompt!r} is not allowed; choose one of: {', '.join(PROMPTS)}"
            )

    def initial_messages(self, reset: ResetResult) -> list[dict[str, str]]:
        if self.prompt == "compact":
            return build_compact_messages(reset.info)
        return build_messages(reset.info)

    def parse_action(self, text: str) -> ParsedAction:
        code = extract_code(text)
        if code is not None:
            return ParsedAction(action=code)
        if answer_text(text) is None:
            return ParsedAction(action=None, feedback=THINKING_NOT_CLOSED_FEEDBACK)
        return ParsedAction(action=None, feedback=NO_CODE_FEEDBACK)

    def format_observation(self, observation: str, reset: ResetResult) -> str:
        content = format_output(observation)
        if self.restate_task and self.prompt == "full":
            content += "\n\nAs a reminder:\n" + task_block(reset.info)
        return content
