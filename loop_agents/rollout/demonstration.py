"""A demonstration conversation as a token-exact trajectory: the SFT warm start's unit.

A demonstration is a chat (system/user messages, then alternating assistant actions and user observations). It
becomes a Trajectory built with the same ChatFormat the rollouts use, so the SFT targets are exactly the token
layout the policy samples in: loss mask 1 on each assistant message and its `<|im_end|>`, 0 on everything else.
"""

from __future__ import annotations

from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.trajectory import Trajectory


def demonstration_trajectory(chat: ChatFormat, messages: list[dict[str, str]], task_id: str) -> Trajectory:
    """Token-exact trajectory of a demonstration conversation (assistant turns trainable), in the form of the chat's
    agent (`chat.demonstration_form`: tool calls and tool messages for a tool-calling agent)."""
    if chat.demonstration_form is not None:
        messages = chat.demonstration_form(list(messages))
    first_assistant = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    traj = Trajectory(task_id=task_id, group_id=f"demo/{task_id}")
    traj.append_context(chat.initial_ids(messages[:first_assistant]))
    for message in messages[first_assistant:]:
        if message["role"] == "assistant":
            traj.append_context(chat.generation_prompt_ids)
            ids = chat.encode(message["content"]) + [chat.turn_end_id]
            traj.append_generation(ids, [0.0] * len(ids))
            traj.append_context(chat.close_turn_ids(ids))
        else:
            traj.append_context(chat.observation_ids(message["content"]))
    traj.messages = list(messages)
    return traj


def action_spans(mask: list[int]) -> list[list[int]]:
    """Contiguous runs of 1s in a loss mask: in a demonstration, one per assistant message (its tokens,
    then <|im_end|>)."""
    spans, current = [], []
    for position, on in enumerate(mask):
        if on:
            current.append(position)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return spans
