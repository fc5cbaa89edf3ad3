"""Behaviour metrics of the LOOP paper (arXiv 2502.01600, §5.3 and App. A.1) from saved Trajectories.

Counted on the code the model wrote: every complete ```python / ```py cell of each assistant turn,
after any Qwen3 thinking (a turn whose thinking never closed has no code); with `agent=tools`, the `code` of each
`execute` call instead:
- multi-code-cell turns: turns with 2 or more cells (LOOP: ~6x fewer after training);
- API-doc lookups: calls `apis.api_docs.<fn>(...)`, and `show_api_doc` calls alone (~1.6x more);
- "assum" and "dummy": case-insensitive occurrences in the code, e.g. `# assuming ...`, `dummy_id`
  (~30x and ~6x fewer);
- giving up: a `complete_task(... status="fail" ...)` call; separately, completing with no answer
  (`complete_task()` or `answer=None`), which is a give-up only for tasks that ask for an answer;
- average turns, tokens (all and generated), and the fraction of each finish reason;
- beside the paper's: turns without a complete code cell, cells whose execution failed (the observation starts
  with AppWorld's "Execution failed"), and characters of code per cell.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from loop_agents.rollout.agent import answer_text
from loop_agents.rollout.trajectory import Trajectory
from loop_agents.tools.errors import ToolCallError
from loop_agents.tools.parsers import HermesParser

_TOOL_CALLS = HermesParser()
_CODE_CELL = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)
_API_DOCS_CALL = re.compile(r"\bapis\s*\.\s*api_docs\s*\.\s*(\w+)\s*\(")
_COMPLETE_TASK = re.compile(r"\bcomplete_task\s*\(")
_FAIL_STATUS = re.compile(r"""\bstatus\s*=\s*(['"])fail(ed|ure)?\1""")
_EXECUTION_FAILED = re.compile(r"\s*(Output:\s*```\s*)?Execution failed")  # raw or as the agent formats it
_NO_ANSWER = re.compile(r"^\s*(answer\s*=\s*)?None\s*(,|$)")


@dataclass(frozen=True)
class TrajectoryBehaviour:
    """Behaviour counts of one trajectory."""

    num_turns: int
    code_cells: int
    multi_code_cell_turns: int
    api_doc_lookups: int  # any apis.api_docs.<fn>( call
    show_api_doc_calls: int  # apis.api_docs.show_api_doc( calls
    assum_mentions: int
    dummy_mentions: int
    no_code_turns: int  # turns without a complete code cell (nothing ran)
    failed_executions: int  # turns whose code ran and failed ("Execution failed ..." observation)
    code_chars: int  # characters of all cells
    gave_up: bool  # called complete_task with status="fail"
    completed_without_answer: bool  # called complete_task() or complete_task(answer=None)
    tokens: int
    generated_tokens: int
    finish_reason: str


def code_cells(message: str) -> list[str]:
    """Every complete ```python / ```py cell of an assistant message, after its thinking; a tool-calling agent's
    message has its `execute(code)` calls' code instead (AppWorld's tool)."""
    answer = answer_text(message)
    if answer is None:
        return []
    return _CODE_CELL.findall(answer) or _executed_code(answer)


def _executed_code(message: str) -> list[str]:
    try:
        calls = _TOOL_CALLS.parse(message).calls
    except ToolCallError:
        return []
    return [
        c.arguments["code"] for c in calls if c.name == "execute" and isinstance(c.arguments.get("code"), str)
    ]


def assistant_texts(traj: Trajectory) -> list[str]:
    """The model's raw text of each turn: the assistant messages where the record keeps them, else the turns'
    `action_text`. Not `action_text` first: for AppWorld that is the parsed code of the executed cell, without
    its fences, so every cell counted would be lost (every behaviour count read 0 on our AppWorld runs)."""
    messages = [m.get("content", "") for m in traj.messages if m.get("role") == "assistant"]
    if messages or not traj.turns:
        return messages
    return [turn.action_text for turn in traj.turns]


def observation_texts(traj: Trajectory) -> list[str]:
    """What followed each turn (from `turns`, or the next user message for turn-less records; "" if none)."""
    if traj.turns:
        return [turn.observation_text for turn in traj.turns]
    messages, texts = traj.messages, []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            following = messages[index + 1] if index + 1 < len(messages) else {}
            texts.append(following.get("content", "") if following.get("role") in ("user", "tool") else "")
    return texts


def trajectory_behaviour(traj: Trajectory) -> TrajectoryBehaviour:
    """Counts the paper's behaviours in one trajectory."""
    cells_per_turn = [code_cells(text) for text in assistant_texts(traj)]
    observations = observation_texts(traj)
    code = "\n".join(cell for cells in cells_per_turn for cell in cells)
    lookups = _API_DOCS_CALL.findall(code)
    completions = _call_arguments(code, _COMPLETE_TASK)
    return TrajectoryBehaviour(
        num_turns=len(cells_per_turn),
        code_cells=sum(len(cells) for cells in cells_per_turn),
        multi_code_cell_turns=sum(len(cells) >= 2 for cells in cells_per_turn),
        no_code_turns=sum(not cells for cells in cells_per_turn),
        failed_executions=sum(
            bool(cells) and _EXECUTION_FAILED.match(observation) is not None
            for cells, observation in zip(cells_per_turn, observations, strict=False)
        ),
        code_chars=sum(len(cell) for cells in cells_per_turn for cell in cells),
        api_doc_lookups=len(lookups),
        show_api_doc_calls=sum(name == "show_api_doc" for name in lookups),
        assum_mentions=code.lower().count("assum"),
        dummy_mentions=code.lower().count("dummy"),
        gave_up=any(_FAIL_STATUS.search(args) for args in completions),
        completed_without_answer=any(_NO_ANSWER.match(args) or not args.strip() for args in completions),
        tokens=traj.num_tokens,
        generated_tokens=traj.num_generated_tokens,
        finish_reason=traj.finish_reason.value,
    )


def behaviour_metrics(trajectories: Sequence[Trajectory], prefix: str = "behaviour") -> dict[str, float]:
    """Aggregates over a set of episodes (e.g. one checkpoint's evaluation on one split).

    Rates are per turn (`multi_code_cell_turn_rate`) or per trajectory (`give_up_rate`, ...);
    `*_per_traj` are means of per-trajectory counts.
    """
    if not trajectories:
        raise ValueError("behaviour_metrics needs at least one trajectory")
    rows = [trajectory_behaviour(t) for t in trajectories]
    n = len(rows)
    total_turns = sum(r.num_turns for r in rows)
    total_cells = sum(r.code_cells for r in rows)
    metrics = {
        "num_trajectories": float(n),
        "turns_mean": statistics.fmean(r.num_turns for r in rows),
        "tokens_mean": statistics.fmean(r.tokens for r in rows),
        "generated_tokens_mean": statistics.fmean(r.generated_tokens for r in rows),
        "multi_code_cell_turn_rate": sum(r.multi_code_cell_turns for r in rows) / total_turns
        if total_turns
        else 0.0,
        "multi_code_cell_turns_per_traj": statistics.fmean(r.multi_code_cell_turns for r in rows),
        "no_code_turn_rate": sum(r.no_code_turns for r in rows) / total_turns if total_turns else 0.0,
        "failed_executions_per_traj": statistics.fmean(r.failed_executions for r in rows),
        "code_chars_per_cell": sum(r.code_chars for r in rows) / total_cells if total_cells else 0.0,
        "api_doc_lookups_per_traj": statistics.fmean(r.api_doc_lookups for r in rows),
        "show_api_doc_per_traj": statistics.fmean(r.show_api_doc_calls for r in rows),
        "assum_per_traj": statistics.fmean(r.assum_mentions for r in rows),
        "dummy_per_traj": statistics.fmean(r.dummy_mentions for r in rows),
        "give_up_rate": sum(r.gave_up for r in rows) / n,
        "no_answer_completion_rate": sum(r.completed_without_answer for r in rows) / n,
    }
    for reason, count in sorted(Counter(r.finish_reason for r in rows).items()):
        metrics[f"finish_reason/{reason}"] = count / n
    return {f"{prefix}/{key}": value for key, value in metrics.items()}


def _call_arguments(code: str, call: re.Pattern[str]) -> list[str]:
    """The argument text of each call matched by `call` (which ends at the open paren), parens balanced."""
    found = []
    for match in call.finditer(code):
        depth, start = 1, match.end()
        for i in range(start, len(code)):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                found.append(code[start:i])
                break
    return found
