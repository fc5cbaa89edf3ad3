"""The transformers-backed TokenGenerator: sampling maths, logprobs, stop ids, and real episodes with it."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.inference.hf_generator import HFTokenGenerator, _draw
from loop_agents.inference.protocol import SamplingParams
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.trajectory import FinishReason

from .repl_env import GuessNumberEnv, PythonReplEnv
from .scripted import RecordingGenerator, assert_token_exact


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def recomputed_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log pi(token t | tokens < t) for t >= 1, from one forward pass over the whole sequence."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def counts(logits: list[float], params: SamplingParams, n: int = 4000) -> list[float]:
    rng = torch.Generator().manual_seed(0)
    draws = [_draw(torch.tensor(logits), params, rng) for _ in range(n)]
    return [draws.count(i) / n for i in range(len(logits))]


def test_sampling_filters_match_hand_computed_distributions():
    logits = [0.0, math.log(2), math.log(4)]  # probabilities 1/7, 2/7, 4/7
    for got, want in zip(counts(logits, SamplingParams()), [1 / 7, 2 / 7, 4 / 7], strict=True):
        assert got == pytest.approx(want, abs=0.025)
    # temperature 2 halves the logits: weights 1, sqrt 2, 2
    z = 1 + math.sqrt(2) + 2
    for got, want in zip(
        counts(logits, SamplingParams(temperature=2.0)), [1 / z, math.sqrt(2) / z, 2 / z], strict=True
    ):
        assert got == pytest.approx(want, abs=0.025)
    # top-k 2 keeps 2/7 and 4/7 -> 1/3, 2/3; top-p 0.6 keeps the same two (4/7 < 0.6 <= 6/7)
    for params in (SamplingParams(top_k=2), SamplingParams(top_p=0.6)):
        for got, want in zip(counts(logits, params), [0, 1 / 3, 2 / 3], strict=True):
            assert got == pytest.approx(want, abs=0.025)
    assert counts(logits, SamplingParams(top_p=0.5), n=200) == [0, 0, 1]  # 4/7 alone already covers 0.5
    assert counts(logits, SamplingParams(temperature=0.0), n=10) == [0, 0, 1]


def test_greedy_matches_transformers_generate_and_logprobs_match_a_forward_pass(model):
    generator = HFTokenGenerator(model)
    prompt = [1680, 368, 198, 71, 72, 1681, 198, 1680, 647, 198]
    completion = asyncio.run(generator.generate(prompt, SamplingParams(max_tokens=12, temperature=0.0)))
    with torch.no_grad():
        reference = model.generate(
            torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=None
        )
    assert completion.token_ids == reference[0, len(prompt) :].tolist()
    assert completion.finish_reason == "length"
    recomputed = recomputed_logprobs(model, prompt + completion.token_ids)[len(prompt) - 1 :]
    assert torch.allclose(torch.tensor(completion.logprobs), recomputed, atol=1e-5)


def test_stop_token_is_included_and_seeds_reproduce(model):
    generator = HFTokenGenerator(model)
    prompt = [1680, 368, 198, 71, 72]
    greedy = asyncio.run(generator.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0)))
    stop = greedy.token_ids[3]
    first = greedy.token_ids.index(stop)
    stopped = asyncio.run(
        generator.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0, stop_token_ids=[stop]))
    )
    assert stopped.token_ids == greedy.token_ids[: first + 1] and stopped.finish_reason == "stop"
    seeded = SamplingParams(max_tokens=16, seed=123)
    a, b = (asyncio.run(generator.generate(prompt, seeded)) for _ in range(2))
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs
    c = asyncio.run(generator.generate(prompt, replace(seeded, seed=124)))
    assert c.token_ids != a.token_ids


def test_bad_requests_are_rejected_with_a_message(model):
    generator = HFTokenGenerator(model, max_model_len=64)
    with pytest.raises(ValueError, match="empty prompt"):
        asyncio.run(generator.generate([], SamplingParams()))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        asyncio.run(generator.generate([10**6], SamplingParams()))
    with pytest.raises(ValueError, match="max_model_len"):
        asyncio.run(generator.generate([1] * 60, SamplingParams(max_tokens=8)))


@pytest.mark.parametrize("template", ["qwen2_5", "qwen3"])
def test_real_three_turn_episode_is_token_exact(template, tiny_model_dir, tiny_qwen3_model_dir, model):
    """A real model and a real environment: mask on exactly the sampled ids; logprobs = learner forward."""
    path = tiny_model_dir if template == "qwen2_5" else tiny_qwen3_model_dir
    tokenizer = AutoTokenizer.from_pretrained(path)
    cfg = EpisodeConfig(max_tokens_per_turn=24, max_turns=3, max_context_tokens=8192, seed=7)
    if template == "qwen3":
        cfg = replace(cfg, enable_thinking=True)
    agent, env, task = (
        (AppWorldAgent(), PythonReplEnv(), "sum:4")
        if template == "qwen2_5"
        else (TextActionAgent(), GuessNumberEnv(), "guess:4")
    )
    chat = chat_format(tokenizer, cfg)
    generator = RecordingGenerator(
        HFTokenGenerator(model)
    )  # same weights; the template only changes the text
    traj = asyncio.run(run_episode(env, generator, agent, chat, cfg, task_id=task))
    assert traj.finish_reason in (FinishReason.TURN_BUDGET, FinishReason.DONE)
    assert len(traj.turns) == len(generator.completions) == 3
    assert_token_exact(traj, generator)
    stop_ids = set(chat.stop_token_ids(cfg.stop_tokens))
    for completion in generator.completions:
        assert (completion.finish_reason == "stop") == (completion.token_ids[-1] in stop_ids)
    recomputed = recomputed_logprobs(model, traj.token_ids)
    mask = torch.tensor(traj.loss_mask[1:], dtype=torch.bool)
    sampled = torch.tensor(traj.sample_logprobs[1:])[mask]
    assert torch.allclose(sampled, recomputed[mask], atol=1e-4)
