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
