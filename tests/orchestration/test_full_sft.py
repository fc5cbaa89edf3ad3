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


def _weights_digest(model_dir) -> str:
    import hashlib

    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


def test_warm_start_is_deterministic_for_a_seed_and_thread_count(tiny_model_dir, tmp_path):
    """Same seed and torch thread count → bit-identical warm weights; another seed → other weights."""
    import torch

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer, n=12)
    threads = torch.get_num_threads()
    digests = {}
    try:
        for name, seed, n_threads in (("a", 0, 2), ("b", 0, 2), ("c", 1, 2), ("d", 0, 1), ("e", 0, 1)):
            torch.set_num_threads(n_threads)
            out = build_warm_model(
                tiny_model_dir, tmp_path / name, demos, epochs=3, lr=3e-3, seed=seed, batch_size=4
            )
            digests[name] = _weights_digest(out)
    finally:
        torch.set_num_threads(threads)
    assert digests["a"] == digests["b"]  # repeated with 2 threads
    assert digests["d"] == digests["e"]  # repeated with 1 thread
    assert digests["a"] != digests["c"]  # the seed matters (shuffling), so the check can fail


def test_a_cached_warm_model_from_other_settings_is_refused(tiny_model_dir, tmp_path):
    import pytest

    from loop_agents.orchestration.full_sft import CachedModelMismatch

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer, n=4)
    out = build_warm_model(
        tiny_model_dir,
        tmp_path / "warm",
        demos,
        epochs=1,
        lr=3e-3,
        seed=0,
        batch_size=4,
        provenance={"threads": 2},
    )
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    with pytest.raises(CachedModelMismatch, match=r"built with threads=2 but this run asks for 1"):
        build_warm_model(
            tiny_model_dir, out, demos, epochs=1, lr=3e-3, seed=0, batch_size=4, provenance={"threads": 1}
        )
    with pytest.raises(CachedModelMismatch, match=r"built with epochs=1 but this run asks for 2"):
        build_warm_model(tiny_model_dir, out, demos, epochs=2, lr=3e-3, seed=0, batch_size=4)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # nothing overwritten


def test_a_warm_model_of_another_size_is_refused(tiny_model_dir, tmp_path):
    import pytest

    from loop_agents.orchestration.full_sft import CachedModelMismatch
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    wider = build_tiny_model(tmp_path / "wider", TinyModelSpec(hidden_size=128, num_heads=4))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer, n=4)
    out = build_warm_model(tiny_model_dir, tmp_path / "warm", demos, epochs=1, lr=3e-3, seed=0, batch_size=4)
    with pytest.raises(CachedModelMismatch, match=r"has hidden_size=64 but this run's base model has 128"):
        build_warm_model(wider, out, demos, epochs=1, lr=3e-3, seed=0, batch_size=4)
