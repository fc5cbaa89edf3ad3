"""Scripted policies for the rollout tests: fixed assistant turns played back as token ids.

They behave like an inference server on the request (a stop id ends the turn and is included,
`max_tokens` cuts it with finish "length") and record every prompt they were sent.
"""

from __future__ import annotations

from loop_agents.inference.protocol import Completion, InferenceFailure, SamplingParams
from loop_agents.rollout.trajectory import Trajectory


class ScriptedGenerator:
    """Plays `turns` (lists of ids) in order; logprob of the k-th token of turn t is -(t + 1) - k / 1000."""

    def __init__(self, turns: list[list[int]]) -> None:
        self.turns = [list(t) for t in turns]
        self.prompts: list[list[int]] = []
        self.params: list[SamplingParams] = []
        self.completions: list[Completion] = []

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        index = len(self.prompts)
        self.prompts.append(list(prompt_ids))
        self.params.append(params)
        script = self.turns[index % len(self.turns)]
        ids: list[int] = []
        finish = "length"
        for token in script[: params.max_tokens]:
            ids.append(token)
            if token in params.stop_token_ids:
                finish = "stop"
                break
        logprobs = [-(index + 1) - k / 1000 for k in range(len(ids))]
        completion = Completion(token_ids=ids, logprobs=logprobs, finish_reason=finish)
        self.completions.append(completion)
        return completion


class FailingGenerator:
    """Wraps a generator and raises InferenceFailure on the first `failures` requests."""

    def __init__(self, inner, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.calls = 0

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        self.calls += 1
        if self.calls <= self.failures:
            raise InferenceFailure(f"server unavailable (call {self.calls})")
        return await self.inner.generate(prompt_ids, params)


class RecordingGenerator:
    """Passes requests to a real generator and keeps the prompts and completions for the checks."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.prompts: list[list[int]] = []
        self.params: list[SamplingParams] = []
        self.completions: list[Completion] = []

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        self.prompts.append(list(prompt_ids))
        self.params.append(params)
        completion = await self.inner.generate(prompt_ids, params)
        self.completions.append(completion)
        return completion


def assert_token_exact(traj: Trajectory, generator: ScriptedGenerator | RecordingGenerator) -> None:
    """Loss mask 1 exactly on the returned ids, with their logprobs; every prompt is a prefix."""
    expected_mask = [0] * traj.num_tokens
    for turn, completion in zip(traj.turns, generator.completions, strict=True):
        assert traj.token_ids[turn.gen_start : turn.gen_end] == completion.token_ids
        assert traj.sample_logprobs[turn.gen_start : turn.gen_end] == completion.logprobs
        expected_mask[turn.gen_start : turn.gen_end] = [1] * len(completion.token_ids)
    assert traj.loss_mask == expected_mask
    for turn, prompt in zip(traj.turns, generator.prompts, strict=True):
        assert traj.token_ids[: turn.gen_start] == prompt
    assert all(lp == 0.0 for lp, m in zip(traj.sample_logprobs, traj.loss_mask, strict=True) if not m)
