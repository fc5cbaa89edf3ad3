"""Behaviour metrics (LOOP App. A.1) against hand-labelled trajectories."""

from __future__ import annotations

import math

import pytest

from loop_agents.eval import behaviour_metrics, code_cells, trajectory_behaviour
from loop_agents.rollout.trajectory import FinishReason, Trajectory, Turn

A_TURNS = [
    # 1 cell, 1 api_docs lookup (not show_api_doc)
    "Let me look.\n```python\nprint(apis.api_docs.show_app_descriptions())\n```",
    # 2 cells (multi-cell turn), a show_api_doc lookup, "Assuming" and "dummy" in code
    "```python\nprint(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))\n```\nthen\n"
    "```py\n# Assuming the password is known\ntoken = 'dummy'\n```",
    # gives up
    '```python\napis.supervisor.complete_task(status="fail")\n```',
]
B_TURNS = [
    # thinking is not code: its "assume"/"dummy" do not count; the code has 2 "assum" and 2 "dummy"
    "<think>I assume dummy values</think>\n```python\nx = ASSUMED_ID  # assumption: dummy DUMMY\n"
    "apis.supervisor.complete_task(answer=None)\n```",
    # thinking never closed: no code at all, even though a cell appears inside it
    "<think>unfinished ```python\nprint(apis.api_docs.show_api_doc(app_name='x', api_name='y'))\n```",
]
C_TURNS = ["```python\napis.supervisor.complete_task(answer=len(songs(1, (2))))\n```"]
# what followed each turn: a failed cell (raw engine text), a successful one (as the agent formats outputs), none
A_OBSERVATIONS = [
    "Execution failed. Traceback:\nNameError: x",
    "Output:\n```\nExecution successful.\n```",
    "",
]
# a cell past its deadline fails; the second turn had no code, so its "failed" feedback is not a failed execution
B_OBSERVATIONS = [
    "Output:\n```\nExecution failed. The cell ran past its 20 s limit\n```",
    "Execution failed. x",
]
# the cells' text as written above (what code_chars counts), per trajectory
A_CODE = [
    "print(apis.api_docs.show_app_descriptions())\n",
    "print(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))\n",
    "# Assuming the password is known\ntoken = 'dummy'\n",
    'apis.supervisor.complete_task(status="fail")\n',
]
B_CODE = ["x = ASSUMED_ID  # assumption: dummy DUMMY\napis.supervisor.complete_task(answer=None)\n"]
C_CODE = ["apis.supervisor.complete_task(answer=len(songs(1, (2))))\n"]


def _build(task_id, texts, context, generated, reason: FinishReason, observations=None):
    traj = Trajectory(task_id=task_id, group_id=task_id, finish_reason=reason)
    observations = observations or [""] * len(texts)
    for text, n_context, n_generated, seen in zip(texts, context, generated, observations, strict=True):
        traj.append_context([7] * n_context)
        start, end = traj.append_generation([9] * n_generated, [-0.5] * n_generated)
        traj.turns.append(Turn(gen_start=start, gen_end=end, action_text=text, observation_text=seen))
    return traj


def trajectories() -> list[Trajectory]:
    return [
        _build(
            "a_1", A_TURNS, [5, 2, 2], [3, 4, 2], FinishReason.DONE, A_OBSERVATIONS
        ),  # 18 tokens, 9 generated
        _build(
            "b_1", B_TURNS, [4, 1], [2, 3], FinishReason.TURN_BUDGET, B_OBSERVATIONS
        ),  # 10 tokens, 5 generated
        _build("c_1", C_TURNS, [6], [4], FinishReason.CONTEXT_BUDGET),  # 10 tokens, 4 generated
    ]


def test_per_trajectory_counts():
    a, b, c = (trajectory_behaviour(t) for t in trajectories())
    assert (a.num_turns, a.code_cells, a.multi_code_cell_turns) == (3, 4, 1)
    assert (a.api_doc_lookups, a.show_api_doc_calls) == (2, 1)
    assert (a.assum_mentions, a.dummy_mentions, a.gave_up, a.completed_without_answer) == (1, 1, True, False)
    assert (b.num_turns, b.code_cells, b.api_doc_lookups) == (2, 1, 0)
    assert (b.assum_mentions, b.dummy_mentions, b.gave_up, b.completed_without_answer) == (2, 2, False, True)
    assert (c.gave_up, c.completed_without_answer, c.tokens, c.generated_tokens) == (False, False, 10, 4)
    assert (a.no_code_turns, a.failed_executions, a.code_chars) == (0, 1, sum(map(len, A_CODE)))
    assert (b.no_code_turns, b.failed_executions, b.code_chars) == (1, 1, sum(map(len, B_CODE)))
    assert (c.no_code_turns, c.failed_executions, c.code_chars) == (0, 0, sum(map(len, C_CODE)))


def test_aggregate_by_hand():
    m = behaviour_metrics(trajectories())
    expected = {
        "behaviour/num_trajectories": 3.0,
        "behaviour/turns_mean": 2.0,  # (3 + 2 + 1) / 3
        "behaviour/tokens_mean": 38 / 3,  # (18 + 10 + 10) / 3
        "behaviour/generated_tokens_mean": 6.0,  # (9 + 5 + 4) / 3
        "behaviour/multi_code_cell_turn_rate": 1 / 6,
        "behaviour/multi_code_cell_turns_per_traj": 1 / 3,
        "behaviour/no_code_turn_rate": 1 / 6,  # b's unfinished thinking, of 6 turns
        "behaviour/failed_executions_per_traj": 2 / 3,  # (1 + 1 + 0) / 3
        "behaviour/code_chars_per_cell": sum(map(len, A_CODE + B_CODE + C_CODE)) / 6,  # 4 + 1 + 1 cells
        "behaviour/api_doc_lookups_per_traj": 2 / 3,
        "behaviour/show_api_doc_per_traj": 1 / 3,
        "behaviour/assum_per_traj": 1.0,  # (1 + 2 + 0) / 3
        "behaviour/dummy_per_traj": 1.0,
        "behaviour/give_up_rate": 1 / 3,
        "behaviour/no_answer_completion_rate": 1 / 3,
        "behaviour/finish_reason/done": 1 / 3,
        "behaviour/finish_reason/turn_budget": 1 / 3,
        "behaviour/finish_reason/context_budget": 1 / 3,
    }
    assert set(m) == set(expected)
    for key, value in expected.items():
        assert math.isclose(m[key], value), key


def test_turnless_records_use_assistant_messages():
    traj = Trajectory(task_id="d_1", group_id="d_1")
    traj.messages = [
        {"role": "user", "content": "```python\nprint(apis.api_docs.show_api_doc())\n```"},  # not the model's
        {"role": "assistant", "content": "```python\nprint(apis.api_docs.show_api_doc(a, b))\n```"},
    ]
    traj.messages.append({"role": "user", "content": "Output:\n```\nExecution failed. Traceback: x\n```"})
    counts = trajectory_behaviour(traj)
    assert (counts.num_turns, counts.show_api_doc_calls, counts.failed_executions) == (1, 1, 1)


def test_code_cells_and_empty_input():
    assert code_cells("```python\na\n```x```py\nb\n```") == ["a\n", "b\n"]
    assert code_cells("```bash\nls\n```") == []
    with pytest.raises(ValueError, match="at least one"):
        behaviour_metrics([])


def test_appworld_records_are_counted_from_the_raw_messages():
    """The runner keeps the executed cell's bare code as `action_text` and the model's raw text in `messages`:
    counting from `action_text` found no cell at all (every count 0 on the AppWorld runs before this test)."""
    raw = [
        "```python\nprint(apis.api_docs.show_api_doc(app_name='venmo', api_name='login'))\n```\n```python\nx = 1\n```",
        "```python\napis.supervisor.complete_task()\n```",
    ]
    traj = Trajectory(task_id="e_1", group_id="e_1")
    traj.messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for text, code in zip(raw, ["print(apis.api_docs.show_api_doc(app_name='venmo', api_name='login'))\n",
                                "apis.supervisor.complete_task()\n"], strict=True):  # fmt: skip
        traj.turns.append(
            Turn(gen_start=0, gen_end=0, action_text=code, observation_text="Execution failed. x")
        )
        traj.messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Output: ..."}]
    counts = trajectory_behaviour(traj)
    assert (counts.num_turns, counts.code_cells, counts.multi_code_cell_turns) == (2, 3, 1)
    assert (counts.show_api_doc_calls, counts.no_code_turns, counts.failed_executions) == (1, 0, 2)
    assert counts.completed_without_answer


def test_tool_calls_are_code_cells():
    """agent=tools: AppWorld's code comes as `execute(code)` calls, and counts as the cells it runs."""
    call = '<tool_call>\n{"name": "execute", "arguments": {"code": "print(apis.api_docs.show_api_doc())"}}\n</tool_call>'
    assert code_cells(call) == ["print(apis.api_docs.show_api_doc())"]
    assert code_cells(call * 2) == ["print(apis.api_docs.show_api_doc())"] * 2
    assert code_cells('<tool_call>\n{"name": "execute", "arguments": {"code": "x = 1"') == []  # truncated
    assert code_cells('<tool_call>\n{"name": "act", "arguments": {"action": "go"}}\n</tool_call>') == []
