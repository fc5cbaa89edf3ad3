"""Full-weight warm start: the cloned model fits its demonstrations, and a finished warm model is reused."""

from __future__ import annotations

import json

from transformers import AutoTokenizer

from loop_agents.orchestration.full_sft import build_warm_model
from loop_agents.rollout.trajectory import Trajectory


def _demos(tokenizer, n: int = 8) -> list[Trajectory]:
    out = []
    for i in range(n):
        prompt = tokenizer(f"<|im_start|>user\nopen box {i}<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
        action = tokenizer(f"answer {i} {i}<|im_end|>")["input_ids"]
        ids = prompt + action
        mask = [False] * len(prompt) + [True] * len(action)
        out.append(
            Trajectory(
                task_id=f"t{i}",
                group_id=f"t{i}",
                token_ids=ids,
                loss_mask=mask,
                sample_logprobs=[0.0] * len(ids),
            )
        )
    return out


def test_warm_model_fits_the_demonstrations_and_is_reused(tiny_model_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer)
    out = build_warm_model(tiny_model_dir, tmp_path / "warm", demos, epochs=12, lr=3e-3, seed=0, batch_size=4)
    report = json.loads((out / "warm_start.json").read_text())
    losses = report["epoch_losses"]
    assert len(losses) == 12 and report["demonstrations"] == 8
    assert losses[-1] < 0.5 * losses[0], losses  # it learned the answers
    assert not (tmp_path / ".warm.tmp").exists()  # written atomically

    stamp = (out / "model.safetensors").stat().st_mtime_ns
    again = build_warm_model(
        tiny_model_dir, tmp_path / "warm", demos, epochs=12, lr=3e-3, seed=0, batch_size=4
    )
    assert again == out and (out / "model.safetensors").stat().st_mtime_ns == stamp  # cached, not retrained
