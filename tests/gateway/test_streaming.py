"""`stream: true` as the sampler produces it (loop_agents/gateway/streaming.py): the `openai` package's streaming
client against the real gateway server, the tiny model sampling on CPU (HFTokenGenerator) or fixed turns played
back id by id. The deltas reach the program before the sample is complete, join to the reply's content, and the
recorded trajectory is the one a call that is not streamed records."""

from __future__ import annotations

import asyncio
import random

import pytest
from openai import APIError, AsyncOpenAI
from transformers import AutoTokenizer

from loop_agents.gateway.server import GatewayServer
from loop_agents.gateway.session import EpisodeSession
from loop_agents.gateway.streaming import IncrementalText, certain_content
from loop_agents.inference.hf_generator import HFTokenGenerator
from loop_agents.inference.protocol import InferenceFailure
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.trajectory import FinishReason
from tests.gateway.sessions import gem_hunt_session
from tests.gateway.test_recording import OPEN_CALL, OPENING, TOOLS
from tests.rollout.scripted import ScriptedGenerator

CALL_TAG = "<tool_call>"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def hf_generator(tiny_model_dir):
    return HFTokenGenerator(tiny_model_dir, max_model_len=2048, seed=0)


class StreamedScript(ScriptedGenerator):
    """Fixed turns (tests/rollout/scripted.py), handed over one id at a time as a streaming sampler would."""

    async def generate_streaming(self, prompt_ids, params, on_tokens):
        completion = await self.generate(prompt_ids, params)
        for token, logprob in zip(completion.token_ids, completion.logprobs, strict=True):
            await on_tokens([token], [logprob])
            await asyncio.sleep(0)
        return completion


class FailsWhileStreaming(StreamedScript):
    """Hands over the first `hand_over` ids of its first sample, then fails as a server that died would."""

    def __init__(self, turns, hand_over: int) -> None:
        super().__init__(turns)
        self.hand_over = hand_over

    async def generate_streaming(self, prompt_ids, params, on_tokens):
        if len(self.prompts) == 0:
            self.prompts.append(list(prompt_ids))
            for token in self.turns[0][: self.hand_over]:
                await on_tokens([token], [-1.0])
                await asyncio.sleep(0)
            raise InferenceFailure("the server went away")
        return await super().generate_streaming(prompt_ids, params, on_tokens)


class HeldUntilSeen:
    """A streaming generator whose sample is not returned before the program has received a content delta: a
    gateway that sent the reply only once sampled would wait here until the test fails."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seen = asyncio.Event()

    async def generate_streaming(self, prompt_ids, params, on_tokens):
        completion = await self.inner.generate_streaming(prompt_ids, params, on_tokens)
        await asyncio.wait_for(self.seen.wait(), 30)
        return completion

    async def generate(self, prompt_ids, params):
        return await self.inner.generate(prompt_ids, params)


def _session(tokenizer, generator) -> EpisodeSession:
    return gem_hunt_session(
        tokenizer,
        generator,
        EpisodeConfig(max_tokens_per_turn=64, max_turns=4, max_context_tokens=4096, seed=0),
    )


async def _call(session: EpisodeSession, stream: bool, on_delta=None, **body):
    """One chat completion of `session` through a real gateway server and the openai client: (the joined content,
    the content deltas, the tool calls, the finish reason) for a stream, the message otherwise."""
    server = GatewayServer()
    root = await server.start()
    server.open(session)
    try:
        client = AsyncOpenAI(base_url=f"{root}/v1", api_key=session.key, max_retries=0)
        request = {"model": "policy", "messages": OPENING, "tools": TOOLS, **body}
        if not stream:
            return (await client.chat.completions.create(**request)).choices[0].message
        deltas, calls, finish = [], {}, None
        async for chunk in await client.chat.completions.create(**request, stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                deltas.append(delta.content)
                if on_delta is not None:
                    on_delta()
            for call in delta.tool_calls or []:
                calls.setdefault(call.index, call)
            finish = chunk.choices[0].finish_reason or finish
        await client.close()
        return "".join(deltas), deltas, [calls[i] for i in sorted(calls)], finish
    finally:
        await server.stop()


def _recorded(session: EpisodeSession):
    traj = session.recorder.trajectory
    turns = [(t.gen_start, t.gen_end, t.finish_reason) for t in traj.turns]
    return traj.token_ids, traj.loss_mask, traj.sample_logprobs, turns, traj.segment_starts


def test_the_sampled_reply_streams_as_it_is_sampled_and_records_the_same(tokenizer, hf_generator):
    held = HeldUntilSeen(hf_generator)
    streamed = _session(tokenizer, held)
    joined, deltas, calls, finish = asyncio.run(_call(streamed, True, on_delta=held.seen.set))
    plain = _session(tokenizer, hf_generator)
    message = asyncio.run(_call(plain, False))

    assert len(deltas) > 1, deltas  # more than one content delta for a multi-token reply
    assert joined == message.content and not calls and not message.tool_calls
    assert finish in ("stop", "length")
    assert _recorded(streamed) == _recorded(plain)  # same prompt ids, sampled ids, log-probs, mask
    assert streamed.recorder.trajectory.num_generated_tokens > 1
    assert "gateway_stream" not in streamed.recorder.trajectory.metadata  # nothing diverged


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [
        tokenizer.convert_tokens_to_ids("<|im_end|>")
    ]


@pytest.mark.parametrize(
    ("reply", "streamed_before_the_end"),
    [
        (f"I will open it.\n{OPEN_CALL}", "I will open it."),  # the calls come parsed, at the end
        ("<think>\nThe box first.\n</think>\n\nThe gem is 4 7.", "\n\nThe gem is 4 7."),
        ("The code: 4 7 <tool", "The code: 4 7"),  # a cut tag is held, then sent as the text it is
    ],
    ids=["text_then_call", "thinking", "cut_tag"],
)
def test_deltas_join_to_the_content_and_calls_come_parsed(tokenizer, reply, streamed_before_the_end):
    streamed = _session(tokenizer, StreamedScript([_ids(tokenizer, reply)]))
    joined, deltas, calls, finish = asyncio.run(_call(streamed, True))
    plain = _session(tokenizer, ScriptedGenerator([_ids(tokenizer, reply)]))
    message = asyncio.run(_call(plain, False))

    assert joined == (message.content or "")
    assert len(deltas) > 1 and "".join(deltas).startswith(streamed_before_the_end)
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        (c.function.name, c.function.arguments) for c in message.tool_calls or []
    ]
    assert finish == ("tool_calls" if message.tool_calls else "stop")
    assert _recorded(streamed) == _recorded(plain)


def test_a_generator_without_streaming_sends_one_delta(tokenizer):
    session = _session(tokenizer, ScriptedGenerator([_ids(tokenizer, f"Looking.\n{OPEN_CALL}")]))
    joined, deltas, calls, finish = asyncio.run(_call(session, True, stream_options={"include_usage": True}))
    assert deltas == ["Looking."] and finish == "tool_calls"
    assert [(c.id, c.function.name) for c in calls] == [("call_0_0", "open")]


def test_leading_whitespace_before_a_call_is_the_one_divergence_and_is_counted(tokenizer):
    reply = f"\nLooking.\n{OPEN_CALL}"
    session = _session(tokenizer, StreamedScript([_ids(tokenizer, reply)]))
    joined, _, calls, _ = asyncio.run(_call(session, True))
    assert joined == "\nLooking." and len(calls) == 1  # the non-streamed content is "Looking." (stripped)
    assert session.recorder.trajectory.metadata["gateway_stream"] == {"diverged": 1}


def test_a_sample_that_fails_after_content_was_sent_ends_the_episode(tokenizer):
    """Sent text cannot be taken back: no retry, the episode is lost (inference_error) and retried whole; a sample
    that fails before any content was sent is retried as a call that is not streamed is."""
    reply = "The gem is in the red box."
    late = _session(tokenizer, FailsWhileStreaming([_ids(tokenizer, reply)], hand_over=4))
    with pytest.raises(APIError, match="inference server failed"):
        asyncio.run(_call(late, True))
    assert late.ended == FinishReason.INFERENCE_ERROR and len(late.generator.prompts) == 1
    assert late.recorder.trajectory.turns == []  # nothing of the failed call is a turn

    early = _session(tokenizer, FailsWhileStreaming([_ids(tokenizer, reply)], hand_over=0))
    early.cfg.inference_retry_backoff_s = 0.0
    joined, _, _, finish = asyncio.run(_call(early, True))
    assert joined == reply and finish == "stop" and early.ended is None
    assert len(early.generator.prompts) == 2  # the failed attempt, then the retry


def test_certain_content_holds_back_what_may_change():
    assert certain_content("Hello wor", CALL_TAG) == "Hello wor"
    assert certain_content("Hello \n", CALL_TAG) == "Hello"  # trailing whitespace waits
    assert certain_content("Hello <tool", CALL_TAG) == "Hello"  # could become a call
    assert certain_content("Hello <tool", None) == "Hello <tool"  # calls are not parsed: plain text
    assert certain_content("Hello <thi", None) == "Hello"  # could open thinking
    assert certain_content("A\n<tool_call>\n{", CALL_TAG) == "A"
    assert certain_content("<think>\nstill thinking", CALL_TAG) == ""
    assert certain_content("still thinking", CALL_TAG, thinking=True) == ""
    assert certain_content("thought</think>\n\nAnswer", CALL_TAG, thinking=True) == "\n\nAnswer"
    assert certain_content("caf\ufffd", None) == "caf"  # a character whose bytes are not all sampled


def test_incremental_text_is_the_start_of_the_whole_decode(tokenizer):
    """On random ids (special tokens and half characters included), the incrementally decoded text is always the
    start of the decode of all ids so far, and at the end it lacks at most a tail still held as half a character."""
    rng = random.Random(0)

    def decode(ids):
        return tokenizer.decode(ids, skip_special_tokens=True)

    for _ in range(20):
        ids = [rng.randrange(len(tokenizer)) for _ in range(200)]
        text, given = IncrementalText(decode), 0
        while given < len(ids):
            step = rng.randint(1, 3)
            text.extend(ids[given : given + step])
            given += step
            assert decode(ids[:given]).startswith(text.text)
        whole = decode(ids)
        assert whole == text.text or whole.endswith("\ufffd")
