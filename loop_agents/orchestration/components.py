"""Builders that turn the Hydra config into the pieces the driver composes (learner, episode settings,
environments, metrics). Each package keeps its own typed config; this module is the one mapping."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from loop_agents.algorithms import AlgorithmConfig, compute_advantages, filter_by_advantage
from loop_agents.algorithms.registry import from_schema
from loop_agents.errors import CachedModelMismatch
from loop_agents.learner import Learner, LearnerConfig
from loop_agents.learner.checkpoint import checkpoint_name, latest_complete_checkpoint, prune_checkpoints
from loop_agents.orchestration.agent_choice import agent_tool_schemas
from loop_agents.orchestration.cpu_pinning import learner_threads
from loop_agents.orchestration.placement import plan
from loop_agents.orchestration.staleness import max_staleness
from loop_agents.orchestration.warm_start import sft_warm_start
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.trajectory import FinishReason, Trajectory
from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

__all__ = ["plan", "prune_checkpoints"]


def warm_seed(cfg: DictConfig) -> int:
    """The seed of the policy's start: the tiny model's initialisation and the warm start (`learner.sft_seed`,
    else `run.seed`)."""
    seed = OmegaConf.select(cfg, "learner.sft_seed", default=None)
    return int(cfg.run.seed if seed is None else seed)


def resolve_model(cfg: DictConfig, run_dir: Path) -> str:
    """The model directory: `tiny` builds the tiny test model into the run dir (once)."""
    if cfg.llm.model_path != "tiny":
        return str(cfg.llm.model_path)

    out = run_dir / "tiny_model"
    size = dict(cfg.llm.tiny)
    if not (out / "config.json").exists():
        began = time.perf_counter()
        print(f"[model] building the tiny test model into {out} (its tokenizer is trained here)", flush=True)
        build_tiny_model(out, TinyModelSpec(**size, chat_template=cfg.llm.chat_template, seed=warm_seed(cfg)))
        print(f"[model] tiny model ready in {time.perf_counter() - began:.0f} s", flush=True)
    else:
        check_tiny_model_size(out, size)
    return str(out)


def check_tiny_model_size(model_dir: Path, size: dict) -> None:
    """A tiny model cached in the run directory must have the sizes `llm.tiny` asks for (else one clear error)."""
    config = json.loads((model_dir / "config.json").read_text())
    found = {
        "hidden_size": config.get("hidden_size"),
        "num_layers": config.get("num_hidden_layers"),
        "num_heads": config.get("num_attention_heads"),
        "num_kv_heads": config.get("num_key_value_heads"),
        "intermediate_size": config.get("intermediate_size"),
    }
    for key, value in found.items():
        if key in size and size[key] != value:
            raise CachedModelMismatch(
                f"{model_dir} has {key}={value} but llm.tiny.{key}={size[key]} (built by another preset?); "
                f"delete {model_dir.parent} or choose another run.dir"
            )


def algorithm_config(cfg: DictConfig) -> AlgorithmConfig:
    """Map `algorithm.*` onto the algorithms package's config (the presets use the same mapping). Asynchronous
    with π_old recomputed, π_old is the proximal policy and the loss takes the decoupled behaviour weights."""
    decoupled = max_staleness(cfg) > 0 and cfg.algorithm.recompute_old_logprobs
    return replace(
        from_schema(cfg.algorithm),
        loss_divisor=cfg.algorithm.minibatch_size,
        behaviour_weight="decoupled" if decoupled else "none",
        behaviour_weight_cap=cfg.algorithm.behaviour_weight_cap,
    )


def learner_config(cfg: DictConfig, model_path: str) -> LearnerConfig:
    a, lora = cfg.algorithm, cfg.llm.lora
    return LearnerConfig(
        model_path=model_path,
        dtype=cfg.llm.dtype,
        device="cuda" if cfg.gpu_allocation.device == "cuda" else "cpu",
        lora_r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        lora_target_modules=list(lora.target_modules),
        lr=a.lr,
        weight_decay=a.weight_decay,
        scheduler={"constant": "constant", "linear": "linear_warmup", "cosine": "cosine"}[a.lr_schedule],
        warmup_iterations=a.warmup_iterations,
        total_iterations=max(cfg.run.iterations, 1),
        max_grad_norm=a.max_grad_norm,
        epochs=a.epochs,
        minibatch_size=a.minibatch_size,
        micro_token_budget=cfg.learner.micro_batch_tokens,
        logprob_chunk_size=cfg.learner.logprob_chunk_size,
        max_seq_len=cfg.learner.max_seq_len,
        overlong_policy=cfg.learner.overlong,
        recompute_old_logprobs=a.recompute_old_logprobs,
        sampler_logprobs_if_agree=a.sampler_logprobs_if_agree,
        sampler_logprobs_tolerance=a.sampler_logprobs_tolerance,
        sampler_logprobs_recheck_every=a.sampler_logprobs_recheck_every,
        share_prefix=cfg.learner.share_prefix,
        share_prefix_min_tokens=cfg.learner.share_prefix_min_tokens,
        precision=cfg.learner.precision,
        activation_checkpointing=cfg.learner.activation_checkpointing,
        value_head_hidden=[256] if a.advantage == "gae" else [],
        seed=cfg.run.seed,
        temperature=cfg.llm.temperature,
        keep_checkpoints=cfg.run.keep_checkpoints,
    )


def build_learner(cfg: DictConfig, model_path: str) -> Learner:
    if cfg.gpu_allocation.device == "cpu":
        threads = learner_threads(cfg)
        if threads < cfg.gpu_allocation.cpu_learner_threads:
            print(f"[cpu] learner: {threads} thread(s), one per pinned CPU (cpu_learner_threads="
                  f"{cfg.gpu_allocation.cpu_learner_threads})", flush=True)  # fmt: skip
        torch.set_num_threads(threads)
    return Learner(learner_config(cfg, model_path), algorithm_config(cfg))


def latest_checkpoint(run_dir: Path) -> Path | None:
    return latest_complete_checkpoint(run_dir / "checkpoints")


def checkpoint_dir(run_dir: Path, iteration: int) -> Path:
    return run_dir / "checkpoints" / checkpoint_name(iteration)


def episode_config(cfg: DictConfig, max_turns: int, evaluation: bool = False) -> EpisodeConfig:
    """Per-episode generation settings; the context budget equals the learner's max_seq_len. With `agent=tools`
    the template declares the family's tools and observations come back as tool messages."""
    tools = agent_tool_schemas(cfg)
    return EpisodeConfig(
        temperature=cfg.llm.eval_temperature if evaluation else cfg.llm.temperature,
        max_tokens_per_turn=cfg.llm.max_new_tokens,
        max_turns=max_turns,
        max_context_tokens=cfg.learner.max_seq_len,
        min_tokens_per_turn=min(16, cfg.llm.max_new_tokens),
        observation_max_tokens=cfg.env.observation_max_tokens,
        enable_thinking=cfg.llm.enable_thinking if cfg.llm.chat_template == "qwen3" else None,
        observation_role="tool" if tools else "user",
        tools=tools,
        inference_retries=cfg.rollout.episode_retries,
        generation_timeout_s=cfg.rollout.request_timeout_s,
        env_timeout_s=cfg.rollout.env_timeout_s,
        env_reset_timeout_s=cfg.rollout.env_reset_timeout_s,
        seed=cfg.run.seed,
    )


def advantages_and_filter(
    rollouts: list[Trajectory], cfg: DictConfig, world_size: int
) -> tuple[list[Trajectory], dict[str, float]]:
    """Advantages per group (written to Trajectory.advantage), then LOOP's |A| filter."""
    alg = algorithm_config(cfg)
    if not rollouts:
        return [], {"adv/kept": 0.0}
    if alg.advantage_estimator not in ("loo", "rloo", "grpo", "dr_grpo"):
        # token-level estimators (reinforce_pp, gae) are computed inside the learner, which owns the critic
        return rollouts, {}
    alg.singleton_groups = "zero"  # a straggler cut may leave a task with one rollout: no baseline, skip it
    result = compute_advantages(rollouts, alg)
    kept, filter_stats = filter_by_advantage(
        rollouts,
        alg.abs_adv_threshold,
        multiple_of=world_size,
        pos_adv_only=alg.pos_adv_only,
        seed=cfg.run.seed + len(rollouts),
    )
    kept_ids = {id(t) for t in kept}
    for traj in rollouts:
        traj.metadata["filtered"] = id(traj) not in kept_ids
    return kept, {**result.stats, **filter_stats}


def warm_start(learner: Learner, demonstrations: list[Trajectory], cfg: DictConfig) -> dict[str, float]:
    """SFT the adapter on demonstrations (every rank, same list); RL then starts from it."""
    return sft_warm_start(learner, demonstrations, cfg.learner.sft_epochs, cfg.learner.sft_lr)


def learn(learner: Learner, trajectories: list[Trajectory], on_step=None) -> dict[str, float]:
    """One learner iteration on every rank. Token-level estimators run here: gae needs the critic.
    `on_step(steps done, steps)` reports progress (the driver's bar)."""
    alg = learner.algorithm
    if alg.advantage_estimator == "gae":
        result = compute_advantages(trajectories, alg, learner.compute_values(trajectories))
        metrics = learner.train_iteration(trajectories, result.token_advantages, result.returns, on_step)
    elif alg.advantage_estimator == "reinforce_pp":
        advantages = compute_advantages(trajectories, alg).token_advantages
        metrics = learner.train_iteration(trajectories, advantages, on_step=on_step)
    else:
        metrics = learner.train_iteration(trajectories, on_step=on_step)
    return {f"learn/{k}": v for k, v in metrics.items()}


def rollout_metrics(rollouts: list[Trajectory], prefix: str = "rollout") -> dict[str, float]:
    """Reward, success, lengths and finish reasons of a batch of episodes."""
    if not rollouts:
        return {f"{prefix}/count": 0.0}
    n = len(rollouts)
    metrics = {
        f"{prefix}/count": float(n),
        f"{prefix}/reward_mean": sum(t.reward for t in rollouts) / n,
        f"{prefix}/success_rate": sum(t.success for t in rollouts) / n,
        f"{prefix}/turns_mean": sum(len(t.turns) for t in rollouts) / n,
        f"{prefix}/tokens_mean": sum(t.num_tokens for t in rollouts) / n,
        f"{prefix}/generated_tokens": float(sum(t.num_generated_tokens for t in rollouts)),
    }
    for reason in FinishReason:
        metrics[f"{prefix}/finish_{reason.value}"] = sum(t.finish_reason == reason for t in rollouts) / n
    # Episodes the policy's own code ended (AppWorld: timeout, env_killed, output_too_large, api_channel_closed,
    # state_too_large, api_cpu_budget): scored on the state they left and trained on, so a policy that breaks its
    # episodes shows up here rather than as missing samples.
    ended = [t.reward_details.get("episode_ended") for t in rollouts]
    for why in sorted({w for w in ended if w}):
        metrics[f"{prefix}/ended_{why}"] = sum(w == why for w in ended) / n
    metrics.update(
        tool_error_metrics(rollouts, "tools/error" if prefix == "rollout" else f"{prefix}/tools/error")
    )
    return metrics


def tool_error_metrics(rollouts: list[Trajectory], prefix: str = "tools/error") -> dict[str, float]:
    """Malformed tool calls of a tool-calling agent, per kind (tools/errors.py): how many in these episodes,
    each answered with one tool error message. Empty for text agents."""
    counts: dict[str, float] = {}
    for traj in rollouts:
        for kind, count in traj.metadata.get("tool_errors", {}).items():
            counts[f"{prefix}/{kind}"] = counts.get(f"{prefix}/{kind}", 0.0) + count
    return counts


def policy_lag(rollouts: list[Trajectory], iteration: int) -> dict[str, float]:
    """How many updates behind the learner the sampling policy was: the learner of iteration i holds
    policy i-1, so a synchronous loop has lag 0 and async one-step-off lag 1 (from iteration 2)."""
    versions = [t.policy_version for t in rollouts if t.policy_version is not None]
    return {"rollout/policy_lag": float(iteration - 1 - min(versions))} if versions else {}


def format_progress(iteration: int, total: int, metrics: dict[str, Any]) -> str:
    def get(key: str) -> str:
        value = metrics.get(key)
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

    return (
        f"[iter {iteration}/{total}] reward {get('rollout/reward_mean')} success {get('rollout/success_rate')} "
        f"loss {get('learn/loss')} clip {get('learn/clip_fraction')} kl {get('learn/kl_old_k3')} | "
        f"rollout {get('time/rollout')}s "
        f"learn {get('time/learn')}s sync {get('time/sync')}s"
    )
