"""Checkpoints: exact resume in a new process, PEFT adapter loadable with identical logits, atomicity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner, latest_complete_checkpoint
from loop_agents.learner.checkpoint import prune_checkpoints
from tests.learner.batch import learner_config, loop_algorithm, make_batch

REPO = Path(__file__).resolve().parents[2]


def _worker(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.learner.worker", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def _train(learner: Learner, start: int, stop: int) -> list[dict]:
    metrics = []
    for it in range(start, stop):
        batch = make_batch(seed=it)
        compute_advantages(batch, loop_algorithm())
        metrics.append(learner.train_iteration(batch))
    return metrics


@pytest.mark.slow  # a second process
def test_resume_is_exact_in_a_new_process(tiny_model_dir, tmp_path):
    """4 iterations straight == 2 iterations, save, resume in a NEW process, 2 iterations."""
    ckpt = tmp_path / "run" / "checkpoint-2"
    straight = Learner(learner_config(tiny_model_dir), loop_algorithm())
    straight_metrics = _train(straight, 0, 4)
    first = Learner(learner_config(tiny_model_dir), loop_algorithm())
    first_metrics = _train(first, 0, 2)
    first.save_checkpoint(ckpt, {"next_batch": 2})
    _worker("train", tiny_model_dir, str(tmp_path / "second.pt"), str(ckpt), "2", "4", "resume")
    second = torch.load(tmp_path / "second.pt", weights_only=False)
    for name, tensor in straight.trainable_state().items():
        assert torch.allclose(second["state"][name], tensor, atol=1e-7, rtol=0), name
    for a, b in zip(straight_metrics, first_metrics + second["metrics"], strict=True):
        for key in ("loss", "grad_norm", "clip_fraction", "kl_old_k3", "iteration", "global_step", "lr"):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), key
    state = json.loads((ckpt / "learner_state.json").read_text())
    assert state["iteration"] == 2 and state["global_step"] == 12


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    learner = Learner(learner_config(tiny_model_dir, epochs=1), loop_algorithm())
    batch = make_batch(seed=1)
    compute_advantages(batch, loop_algorithm())
    learner.train_iteration(batch)
    run_dir = tmp_path_factory.mktemp("run")
    learner.save_checkpoint(run_dir / "checkpoint-1", {"sampler": [1, 2, 3]})
    return learner, run_dir


def test_saved_adapter_loads_in_peft_with_same_logits(tiny_model_dir, trained):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    learner, run_dir = trained
    adapter = run_dir / "checkpoint-1" / "adapter"
    assert {p.name for p in adapter.iterdir()} >= {"adapter_model.safetensors", "adapter_config.json"}
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 4 and set(config["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    loaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), str(adapter)
    ).eval()
    ids = torch.tensor([make_batch(seed=5)[0].token_ids])
    with torch.no_grad():
        theirs = loaded(input_ids=ids).logits
        ours = learner.policy.peft_model(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(input_ids=ids).logits
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert not torch.allclose(base, theirs, atol=1e-4)  # the adapter is not a no-op


def test_export_adapter_matches_checkpoint_adapter(trained, tmp_path):
    from safetensors.torch import load_file

    learner, run_dir = trained
    learner.export_adapter(tmp_path / "exported")
    a = load_file(tmp_path / "exported" / "adapter_model.safetensors")
    b = load_file(run_dir / "checkpoint-1" / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(".lora_A.weight" in k or ".lora_B.weight" in k for k in a)  # PEFT naming, no adapter name


def test_latest_complete_checkpoint_skips_incomplete_and_prunes(trained, tmp_path):
    learner, run_dir = trained
    assert learner.load_checkpoint(run_dir / "checkpoint-1") == {"sampler": [1, 2, 3]}
    (tmp_path / "checkpoint-5").mkdir()  # crashed mid-write: no done marker
    for n in (1, 2, 3):
        learner.save_checkpoint(tmp_path / f"checkpoint-{n}", {})
    assert latest_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-3"
    with pytest.raises(ValueError, match="incomplete"):
        learner.load_checkpoint(tmp_path / "checkpoint-5")
    prune_checkpoints(tmp_path, keep=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-3", "checkpoint-5"]
    assert latest_complete_checkpoint(tmp_path / "missing") is None
