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

from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.random_adapter import write_random_lora_adapter
from loop_agents.inference.server import VLLMServer

_HTTP = httpx.Client(trust_env=False)


def _timed_post(url: str, path: str, **kwargs) -> float:
    started = time.perf_counter()
    _HTTP.post(f"{url}{path}", timeout=60, **kwargs).raise_for_status()
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


if __name__ == "__main__":
    main()
