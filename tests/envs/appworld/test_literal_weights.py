"""`env.options.demo_literal_weight`: in a demonstration, exactly the cell tokens that spell the task's own
values weigh more; the instruction that holds the same values, the rest of the code and a noisy
demonstration's wrong value do not."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from loop_agents.config.load import compose
from loop_agents.envs.appworld.demos.episodes import scenario_families, task_literals
from loop_agents.envs.appworld.demos.scripted import script_for
from loop_agents.envs.appworld.literal_weights import literal_weights
from loop_agents.envs.appworld.splits import scenario_of
from loop_agents.orchestration.demonstrations import demonstration_weights, demonstrations
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.demonstration import demonstration_trajectory

FRIEND, AMOUNT = "'Jonas Lindqvist'", "27.75"


def _messages(friend: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You write Python."},
        {"role": "user", "content": "Task: Send $27.75 to my friend Jonas Lindqvist on Venmo."},
        {"role": "assistant", "content": f"```python\nfriend = find({friend}, name={friend})\n```"},
        {"role": "user", "content": "Output:\n```\nJonas Lindqvist 27.75\n```"},
        {"role": "assistant", "content": f"```python\npay(friend, amount={AMOUNT})\n```"},
    ]


def _weighted_text(chat: ChatFormat, traj, row: list[float], weight: float) -> str:
    return "".join(chat.decode([t]) for t, w in zip(traj.token_ids, row, strict=True) if w == weight)


def test_only_the_cells_literal_tokens_weigh_more(tiny_model_dir) -> None:
    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    clean = demonstration_trajectory(chat, _messages(FRIEND), "t_1")
    noisy = demonstration_trajectory(chat, _messages("'Chen Xu'"), "t_1")
    rows = literal_weights([clean, noisy], chat, lambda task_id: [FRIEND, AMOUNT], weight=5.0)

    assert [len(row) for row in rows] == [len(clean.token_ids), len(noisy.token_ids)]
    clean_text, noisy_text = (
        _weighted_text(chat, t, row, 5.0) for t, row in ((clean, rows[0]), (noisy, rows[1]))
    )
    assert (clean_text.count(FRIEND), clean_text.count(AMOUNT)) == (2, 1)  # both cells
    assert (noisy_text.count("Chen"), noisy_text.count(AMOUNT)) == (0, 1)  # the wrong friend is not weighed
    for text in (clean_text, noisy_text):  # besides the values, only what shares a token with their edges
        rest = text.replace(FRIEND, "").replace(AMOUNT, "")
        assert set(rest) <= set("(,=)") and len(rest) <= 2 * 3, text
    for traj, row in ((clean, rows[0]), (noisy, rows[1])):
        assert set(row) == {1.0, 5.0}
        assert all(mask for mask, w in zip(traj.loss_mask, row, strict=True) if w != 1.0)  # never the prompt


def _clean_demonstrations_weighed_3x(appworld_root, tiny_model_dir, values: str):
    """The debug preset's clean demonstrations with `demo_values=values`, their chat format and weight rows."""
    cfg = compose(["experiment=debug", f"env.options.root={appworld_root}", "env.options.demo_noise=0",
                   "env.options.demo_literal_weight=3", f"env.options.demo_values={values}"])  # fmt: skip
    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    demos = demonstrations(cfg, chat)
    return chat, demos, demonstration_weights(cfg, chat, demos)


@pytest.mark.slow  # builds AppWorld data and plays the scripts through the engine
def test_every_clean_demonstration_weighs_its_tasks_values(appworld_root, tiny_model_dir) -> None:
    chat, demos, rows = _clean_demonstrations_weighed_3x(appworld_root, tiny_model_dir, "literal")
    families = scenario_families(appworld_root)
    for traj, row in zip(demos, rows, strict=True):
        literals = task_literals(appworld_root, traj.task_id)
        assert len(literals) == len(script_for(families[scenario_of(traj.task_id)]).slots)
        weighted = _weighted_text(chat, traj, row, 3.0)
        for literal in literals:
            assert literal in weighted, (traj.task_id, literal, weighted)
    unweighted = compose(
        ["experiment=debug", f"env.options.root={appworld_root}", "env.options.demo_literal_weight=1"]
    )
    assert demonstration_weights(unweighted, chat, demos) is None  # weight 1: every token alike


@pytest.mark.slow  # builds AppWorld data and plays the scripts through the engine
def test_read_values_leave_no_literal_to_weigh(appworld_root, tiny_model_dir) -> None:
    """With `demo_values=read` (the presets) the cells hold none of the task's values, so the weight is inert."""
    _, demos, rows = _clean_demonstrations_weighed_3x(appworld_root, tiny_model_dir, "read")
    assert demos and len(rows) == len(demos)
    assert all(set(row) == {1.0} for row in rows)
