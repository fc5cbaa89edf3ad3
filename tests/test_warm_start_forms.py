"""benchmarks/warm_start_forms.py's copy-key statistic, on a hand-made demonstration whose tokens are known."""

from __future__ import annotations

from transformers import AutoTokenizer

from benchmarks.warm_start_forms import copy_key, variant
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.demonstration import demonstration_trajectory


def test_copy_key_counts_earlier_keys_and_what_followed_them(tiny_model_dir: str) -> None:
    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "Its code is 4 7."},
        {"role": "assistant", "content": "answer 4 7"},
    ]
    traj = demonstration_trajectory(chat, messages, "t")
    pieces = [chat.decode([t]) for t in traj.token_ids]
    # the tiny vocabulary writes a digit after a lone space token: "... is", " ", "4", " ", "7" ... "answer", " ", "4"
    assert pieces.count(" ") == 4, pieces
    stats = copy_key([traj], chat)
    # key = the space before the answer's "4"; earlier: the spaces before the note's 4 and 7; one is followed by 4,
    # and the most recent (before 7) is not. The two-token key ("answer", " ") never occurs before.
    assert stats == {"answering_demonstrations": 1, "key1_occurrences": 2.0, "key1_followed_by_code": 0.5,
                     "key1_most_recent_followed_by_code": 0.0, "key2_occurrences": 0.0, "key2_followed_by_code": 0.0,
                     "key2_most_recent_followed_by_code": 0.0}  # fmt: skip


def test_a_variant_is_a_name_and_its_overrides() -> None:
    assert variant("tools_4=agent=tools,llm.tiny.num_layers=4") == (
        "tools_4",
        ["agent=tools", "llm.tiny.num_layers=4"],
    )
    assert variant("text=") == ("text", [])


def test_the_length_control_declares_the_tools_and_keeps_text_actions(tiny_model_dir: str) -> None:
    """`declare_tools`: the text-form demonstrations with the tools' `# Tools` block in the system turn: longer by the
    declarations, the same trained tokens (text actions), the code still weighed, the checks scored alike."""
    from types import SimpleNamespace

    from benchmarks.warm_start_forms import text_form_with_tool_declarations
    from loop_agents.config.load import compose
    from loop_agents.envs.bundled.demonstrations import generate_demonstrations

    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    text = [demonstration_trajectory(chat, m, t) for t, m in generate_demonstrations(5, 0.0, seed=3)]
    checks = SimpleNamespace(chat=chat)
    cfg = compose(["experiment=demo"])
    padded, examples = text_form_with_tool_declarations(cfg, tiny_model_dir, text, checks)
    assert checks.chat is not chat and "# Tools" in checks.chat.decode(padded[0].token_ids)
    for before, after, (ids, mask, weights) in zip(text, padded, examples, strict=True):
        assert len(after.token_ids) > len(before.token_ids) + 100
        assert sum(after.loss_mask) == sum(before.loss_mask)
        assert ids == list(after.token_ids) and mask == list(after.loss_mask)
        assert sorted(set(weights)) == [1.0, 4.0]  # the answer's code symbols weigh 4x
