"""LoRA publish latency on a real vLLM server: hot-load alone and the full publish (load, unload, drain, cache reset).

Usage: .venv/bin/python -m benchmarks.lora_publish [--model DIR] [--repeats 20]
Without --model the tiny local model is built in a temporary directory. Prints one JSON line of medians (ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.random_adapter import write_random_lora_adapter
from loop_agents.inference.server import VLLMServer

_HTTP = httpx.Client(trust_env=False)


def _timed_post(url: str, path: str, **kwargs) -> float:
    started = time.perf_counter()
    _HTTP.post(f"{url}{path}", timeout=60, headers=auth_headers(), **kwargs).raise_for_status()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rank", type=int, default=8)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lora_publish_"))
    model = args.model
    if model is None:
        from loop_agents.tiny_model import build_tiny_model

        model = str(build_tiny_model(tmp / "model"))
    adapters = [
        str(write_random_lora_adapter(model, tmp / f"adapter{i}", seed=i, rank=args.rank)) for i in range(2)
    ]
    config = InferenceConfig(
        model_path=model,
        max_model_len=2048,
        max_lora_rank=args.rank,
        dtype="float32",
        run_dir=str(tmp / "run"),
    )
    server = VLLMServer(config)
    started = time.perf_counter()
    server.start()
    startup_s = time.perf_counter() - started
    try:
        steps: dict[str, list[float]] = {
            "load": [],
            "unload": [],
            "pause_wait": [],
            "reset_prefix_cache": [],
            "resume": [],
        }
        for i in range(args.repeats):
            name = f"probe-{i}"
            steps["load"].append(
                _timed_post(
                    server.url,
                    "/v1/load_lora_adapter",
                    json={"lora_name": name, "lora_path": adapters[i % 2]},
                )
            )
            steps["unload"].append(
                _timed_post(server.url, "/v1/unload_lora_adapter", json={"lora_name": name})
            )
            steps["pause_wait"].append(
                _timed_post(server.url, "/pause", params={"mode": "wait", "clear_cache": "true"})
            )
            steps["reset_prefix_cache"].append(_timed_post(server.url, "/reset_prefix_cache"))
            steps["resume"].append(_timed_post(server.url, "/resume"))
        publish = []
        for i in range(args.repeats):
            server.publish_adapter(adapters[i % 2])
            publish.append(server.last_publish_s * 1000)
        result = {
            "startup_s": round(startup_s, 1),
            **{f"{k}_ms": round(statistics.median(v), 2) for k, v in steps.items()},
            "publish_ms_median": round(statistics.median(publish), 2),
            "publish_ms_max": round(max(publish), 2),
        }
        print(json.dumps(result))
    finally:
        server.stop()


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run lora_publish`: sync time as a fraction of an iteration.

    One process, one tiny model: a Learner (LoRA r 8 like conf/llm/tiny.yaml) trains a demo-shaped
    batch (16 tasks x 6 rollouts of <= 256 tokens, minibatch 24, 2 epochs: 8 optimizer steps) while a
    vLLM server with LoRA enabled serves the same model; each repetition then does what the driver
    does between learning and the next rollout (`time/sync`): `save_checkpoint` (adapter, optimizer,
    RNG) and `publish_adapter` (hot-load, unload the old one, drain, reset the prefix cache). The
    iteration here is learn + sync only, without the rollout, so the fraction is an upper bound.
    """
    from benchmarks.learner_throughput import _batch
    from loop_agents.algorithms import compute_advantages, preset
    from loop_agents.learner import Learner, LearnerConfig
    from loop_agents.tiny_model import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="lora_publish_bench_"))
    model = str(build_tiny_model(tmp / "model"))
    num, length, minibatch, epochs = (24, 256, 24, 1) if quick else (96, 256, 24, 2)
    repetitions = 2
    algorithm = preset("loop")
    algorithm.abs_adv_threshold = 0.0
    trajectories = _batch(num, length, vocab=1000)
    compute_advantages(trajectories, algorithm)
    learner = Learner(
        LearnerConfig(
            model_path=model,
            device="cpu",
            lora_r=8,
            lora_alpha=16,
            epochs=epochs,
            minibatch_size=minibatch,
            max_grad_norm=1.0,
            micro_token_budget=8192,
        ),
        algorithm,
    )
    server = VLLMServer(
        InferenceConfig(
            model_path=model, max_model_len=2048, max_lora_rank=8, dtype="float32", run_dir=str(tmp / "run")
        )
    )
    server.start()
    try:
        learn_s, save_s, publish_s = [], [], []
        for i in range(repetitions + 1):  # the first one, on a few trajectories, is a warm-up
            started = time.perf_counter()
            learner.train_iteration(trajectories if i else trajectories[:minibatch])
            learned = time.perf_counter()
            ckpt = learner.save_checkpoint(tmp / f"ckpt_{i}")
            saved = time.perf_counter()
            server.publish_adapter(Path(ckpt) / "adapter")
            published = time.perf_counter()
            if i:
                learn_s.append(learned - started)
                save_s.append(saved - learned)
                publish_s.append(published - saved)
    finally:
        server.stop()
    learn, save, publish = (statistics.median(x) for x in (learn_s, save_s, publish_s))
    sync = save + publish
    return {
        "ratio": round(sync / (learn + sync), 4),
        "ratio_definition": "(save_checkpoint + publish_adapter) / (train_iteration + save + publish), medians",
        "summary": f"sync {sync * 1e3:.0f} ms (save {save * 1e3:.0f} + publish {publish * 1e3:.0f}) vs learner "
        f"iteration {learn:.2f} s ({num} x <= {length} tokens, {epochs} epochs); rollout time not counted",
        "batch": f"{num} x <= {length} tokens, minibatch {minibatch}, {epochs} epochs",
        "learn_s_median": round(learn, 3),
        "save_checkpoint_ms_median": round(save * 1e3, 1),
        "publish_ms_median": round(publish * 1e3, 1),
        "publish_ms_max": round(max(publish_s) * 1e3, 1),
        "repetitions": repetitions,
    }


if __name__ == "__main__":
    main()
