"""AppWorld warm start: the tokens that spell the task's own values in a demonstration's code, weighed up.

A cloned policy learns the scripts' shared code in one epoch; what it gets wrong on held-out scenarios is
the few characters it must copy from the instruction (`'Dariq Fontaine'` for Jonas Lindqvist, `'fitness'`
for the tag 'travel': issue 19). With `env.options.demo_literal_weight = w`, each token that overlaps one of
the task's literals in an assistant cell counts w times in the SFT loss (the loss is the weighted mean NLL,
`full_sft.masked_token_nll`). A noisy demonstration's wrong value is not the task's, so it is not weighed.
"""

from __future__ import annotations

from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.demonstration import action_spans
from loop_agents.rollout.trajectory import Trajectory


def _occurrences(text: str, literal: str) -> list[tuple[int, int]]:
    spans, start = [], text.find(literal)
    while start >= 0:
        spans.append((start, start + len(literal)))
        start = text.find(literal, start + 1)
    return spans


def literal_token_positions(traj: Trajectory, chat: ChatFormat, literals: list[str]) -> list[int]:
    """Indices in `traj.token_ids` of the assistant tokens whose characters overlap an occurrence of one of
    `literals` (the trajectory must be `demonstration_trajectory`'s: one loss span per assistant message)."""
    actions = [m["content"] for m in traj.messages if m["role"] == "assistant"]
    spans = action_spans(traj.loss_mask)
    if len(actions) != len(spans):
        raise ValueError(f"{traj.task_id}: {len(actions)} assistant messages but {len(spans)} trained spans")
    positions = []
    for content, span in zip(actions, spans, strict=True):
        encoded = chat.tokenizer(content, add_special_tokens=False, return_offsets_mapping=True)
        if list(encoded["input_ids"]) != [traj.token_ids[p] for p in span[:-1]]:
            raise ValueError(f"{traj.task_id}: an assistant message's tokens differ from its trajectory's")
        chars = [c for literal in literals for c in _occurrences(content, literal)]
        for index, (start, end) in enumerate(encoded["offset_mapping"]):
            if any(start < c_end and c_start < end for c_start, c_end in chars):
                positions.append(span[index])
    return positions


def literal_weights(
    demos: list[Trajectory], chat: ChatFormat, literals_of, weight: float
) -> list[list[float]]:
    """Per-token loss weights: `weight` on each demonstration's literal tokens (`literals_of(task_id)`), 1
    elsewhere (the loss mask still decides what is trained)."""
    rows = []
    for traj in demos:
        row = [1.0] * len(traj.token_ids)
        for position in literal_token_positions(traj, chat, literals_of(traj.task_id)):
            row[position] = weight
        rows.append(row)
    return rows
