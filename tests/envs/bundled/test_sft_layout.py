"""Warm-start demonstrations train exactly on the assistant actions and their `<|im_end|>`."""

from __future__ import annotations

from loop_agents.envs.bundled.demonstrations import generate_demonstrations
from loop_agents.orchestration.warm_start import demonstration_trajectory


def test_loss_mask_covers_exactly_the_actions(tiny_model_dir):
    from transformers import AutoTokenizer

    from loop_agents.rollout.chat import ChatFormat

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    chat = ChatFormat(tokenizer)
    ((task_id, messages),) = generate_demonstrations(1, noise=0.5, seed=3)
    traj = demonstration_trajectory(chat, messages, task_id)
    ids, mask = traj.token_ids, traj.loss_mask
    assert ids == chat.encode(chat.render(messages))  # same ids as the template on the whole conversation
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    actions = [m["content"] for m in messages if m["role"] == "assistant"]
    assert trained == "".join(f"{a}<|im_end|>" for a in actions)
