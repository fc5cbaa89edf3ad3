"""The Ray actor wrapper: start, url, publish_adapter, health, suspend/resume, shutdown (its own server, in Ray)."""

from __future__ import annotations

import asyncio

import psutil
import pytest

from loop_agents.inference.client import VLLMClient
from loop_agents.inference.protocol import SamplingParams
from tests.inference.conftest import SERVED_NAME, tiny_inference_config


@pytest.mark.slow
def test_actor_serves_publishes_suspends_resumes_and_shuts_down(tiny_model_dir, lora_adapters, tmp_path):
    ray = pytest.importorskip("ray")
    pytest.importorskip("vllm")
    from loop_agents.inference.actor import make_inference_server_actor

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        actor = make_inference_server_actor(tiny_inference_config(tiny_model_dir, str(tmp_path)))
        url = ray.get(actor.start.remote(), timeout=700)
        assert url == ray.get(actor.url.remote()) and url.startswith("http://127.0.0.1:")
        name = ray.get(actor.publish_adapter.remote(lora_adapters["b"]))

        async def generate():
            client = VLLMClient([url], SERVED_NAME, adapter=name)
            out = await client.generate([5, 6, 7], SamplingParams(max_tokens=8))
            await client.aclose()
            return out

        assert asyncio.run(generate()).adapter == name
        health = ray.get(actor.health.remote())
        assert health["healthy"] and health["adapter"] == name and health["restarts"] == 0
        print(
            f"actor server start-up {health['last_startup_s']:.1f} s, publish {health['last_publish_s'] * 1000:.0f} ms"
        )
        # exclusive time-sharing on one device: stop for the learner, start again with the same adapter
        pid = health["pid"]
        ray.get(actor.suspend.remote(), timeout=60)
        assert not psutil.pid_exists(pid) and ray.get(actor.health.remote())["suspended"]
        assert ray.get(actor.resume.remote(), timeout=700) == url
        assert asyncio.run(generate()).adapter == name
        health = ray.get(actor.health.remote())
        assert health["healthy"] and health["start_count"] == 2 and health["restarts"] == 0
        pid = health["pid"]
        ray.get(actor.shutdown.remote(), timeout=60)
        assert not psutil.pid_exists(pid)
        ray.kill(actor)
    finally:
        ray.shutdown()
