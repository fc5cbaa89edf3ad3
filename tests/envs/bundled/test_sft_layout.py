"""scripts/sft_warm_start.py trains exactly on the assistant actions and their `<|im_end|>`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from loop_agents.envs.bundled.demonstrations import generate_demonstrations


def _script():
    path = Path(__file__).resolve().parents[3] / "scripts" / "sft_warm_start.py"
    spec = importlib.util.spec_from_file_location("sft_warm_start", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_loss_mask_covers_exactly_the_actions(tiny_model_dir):
    from transformers import AutoTokenizer

    from loop_agents.rollout.chat import ChatFormat

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    chat = ChatFormat(tokenizer)
    ((_, messages),) = generate_demonstrations(1, noise=0.5, seed=3)
    ids, mask = _script().demonstration_ids(chat, messages)
    assert ids == chat.encode(chat.render(messages))  # same ids as the template on the whole conversation
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    actions = [m["content"] for m in messages if m["role"] == "assistant"]
    assert trained == "".join(f"{a}<|im_end|>" for a in actions)
