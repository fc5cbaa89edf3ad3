"""A deterministic multi-turn batch and config shared by the learner tests and their torchrun workers."""

from __future__ import annotations

import random

from loop_agents import reference as ref
from loop_agents.algorithms import preset
from loop_agents.learner import LearnerConfig
from loop_agents.rollout.trajectory import Trajectory

LR = 1e-2
MINIBATCH = 4
EPOCHS = 2
MAX_GRAD_NORM = 0.5
LORA_R, LORA_ALPHA = 4, 8


def _episode(rng: random.Random, prompt: list[int], task: int, sample: int) -> Trajectory:
    """`prompt`, then 2 turns of sampled tokens each followed by an observation; a random reward."""
    ids, mask = list(prompt), [0] * len(prompt)
    for _ in range(2):
        action = rng.randint(3, 9)
        ids += [rng.randint(10, 1000) for _ in range(action)]
        mask += [1] * action
        obs = rng.randint(2, 6)
        ids += [rng.randint(10, 1000) for _ in range(obs)]
        mask += [0] * obs
    return Trajectory(
        task_id=f"task{task}",
        group_id=f"task{task}",
        sample_index=sample,
        token_ids=ids,
        loss_mask=mask,
        sample_logprobs=[-1.0 if m else 0.0 for m in mask],
        reward=round(rng.random(), 3),
    )


def make_batch(seed: int = 0, groups: int = 3, k: int = 3) -> list[Trajectory]:
    """Groups of K trajectories: prompt, then turns of sampled tokens each followed by an observation."""
    rng = random.Random(seed)
    trajectories = []
    for g in range(groups):
        for i in range(k):
            prompt = [rng.randint(10, 1000) for _ in range(rng.randint(4, 8))]
            trajectories.append(_episode(rng, prompt, g, i))
    return trajectories


def make_shared_batch(seed: int = 0, groups: int = 3, k: int = 3, system_len: int = 6) -> list[Trajectory]:
    """AppWorld-shaped: every trajectory starts with the same system prompt, the K of a group with the same
    task prompt after it; then turns of sampled tokens and observations (as make_batch)."""
    rng = random.Random(seed)
    system = [rng.randint(10, 1000) for _ in range(system_len)]
    trajectories = []
    for g in range(groups):
        prompt = system + [rng.randint(10, 1000) for _ in range(rng.randint(4, 8))]
        trajectories.extend(_episode(rng, prompt, g, i) for i in range(k))
    return trajectories


def learner_config(model_dir: str, **overrides) -> LearnerConfig:
    base = dict(
        model_path=model_dir,
        lr=LR,
        minibatch_size=MINIBATCH,
        epochs=EPOCHS,
        max_grad_norm=MAX_GRAD_NORM,
        lora_r=LORA_R,
        lora_alpha=LORA_ALPHA,
        micro_token_budget=60,
        logprob_chunk_size=7,
        device="cpu",
    )
    base.update(overrides)
    return LearnerConfig(**base)


def reference_config() -> ref.ReferenceConfig:
    return ref.ReferenceConfig(
        lr=LR,
        minibatch_size=MINIBATCH,
        epochs=EPOCHS,
        max_grad_norm=MAX_GRAD_NORM,
        lora_r=LORA_R,
        lora_alpha=LORA_ALPHA,
        abs_adv_threshold=0.0,
    )


def loop_algorithm():
    algorithm = preset("loop")
    algorithm.abs_adv_threshold = 0.0
    return algorithm
