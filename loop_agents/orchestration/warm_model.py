"""The policy's starting weights: the base model, or with a full-weight warm start (`learner.sft_target=full`)
its SFT'd copy on the environment's demonstrations, built once per run (or taken from `learner.sft_cache_dir`)."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.selected import prepare_environment
from loop_agents.orchestration import components as C
from loop_agents.orchestration.agent_choice import demonstrations_in_agent_form
from loop_agents.orchestration.demonstrations import demonstration_weights, demonstrations, warm_start_checks
from loop_agents.orchestration.full_sft import build_warm_model, check_reusable, recorded_warm_settings
from loop_agents.orchestration.warm_cache import through_cache, warm_model_key
from loop_agents.rollout.runner import chat_format


def full_warm_start(cfg: DictConfig) -> bool:
    return cfg.learner.sft_epochs > 0 and cfg.learner.sft_target == "full"


def warm_start_cached(cfg: DictConfig, run_dir: Path) -> bool:
    """Whether the full-weight warm model was built by an earlier run (this one then reuses it)."""
    return full_warm_start(cfg) and (run_dir / "warm_model" / "warm_start.json").is_file()


def policy_model_path(cfg: DictConfig, run_dir: Path) -> str:
    """The policy's base model; with a full-weight warm start, the SFT'd copy (built once, cached)."""
    base = C.resolve_model(cfg, run_dir)
    if not full_warm_start(cfg):
        return base
    threads = torch.get_num_threads()
    # The learner's thread count, not the machine's cores: the summation order (and so the warm model)
    # then depends on the config only, not on the machine's core count. `cpu_learner_threads` as set, even where
    # the RL steps take fewer (cpu_pinning.learner_threads): a pinned run then shares the cached warm model of the
    # same preset unpinned, and the one-off warm start pays the oversubscription once.
    torch.set_num_threads(cfg.gpu_allocation.cpu_learner_threads)
    try:
        options = OmegaConf.to_container(cfg.env.options, resolve=True) or {}
        provenance = {"env_options": options, "threads": cfg.gpu_allocation.cpu_learner_threads,
                      "stall_copy": cfg.learner.get("sft_stall_copy")}  # fmt: skip
        settings = dict(
            epochs=cfg.learner.sft_epochs,
            lr=cfg.learner.sft_lr,
            seed=C.warm_seed(cfg),
            batch_size=cfg.learner.sft_batch_size,
            provenance=provenance,
            ready_at=cfg.learner.sft_until_p_optimal,
            max_epochs=cfg.learner.sft_max_epochs,
            redraws=cfg.learner.sft_redraws,
            redraw_epoch=cfg.learner.sft_redraw_epoch,
            attention=cfg.learner.sft_attention,
        )
        # only then: the cache keys of unshared warm starts stay valid
        if cfg.learner.sft_share_prefix == "auto":
            settings["share_prefix_min_tokens"] = cfg.learner.share_prefix_min_tokens
        if warm_start_cached(cfg, run_dir):
            # a rerun (resume) of this run: its own finished warm model, checked as any reuse is, without building
            # and tokenizing the demonstrations again (8,000 of them took 35-55 s of every resume)
            warm = run_dir / "warm_model"
            check_reusable(warm, Path(base), recorded_warm_settings(warm, settings))
            print(
                f"[warm start] this run's warm model is finished: {warm} (demonstrations not rebuilt)",
                flush=True,
            )
            return str(warm)
        demos, readiness, token_weights, stall_probe = warm_start_inputs(cfg, base)

        def build() -> Path:
            return build_warm_model(
                base,
                run_dir / "warm_model",
                demos,
                readiness=readiness,
                token_weights=token_weights,
                stall_probe=stall_probe,
                **settings,
            )

        if cfg.learner.sft_cache_dir:
            key_settings = {**settings, "env": cfg.env.name, "prompt": cfg.env.prompt}
            key = warm_model_key(base, demos, key_settings, token_weights)
            warm, _ = through_cache(cfg.learner.sft_cache_dir, key, run_dir / "warm_model", build)
        else:
            warm = build()
    finally:
        torch.set_num_threads(threads)
    return str(warm)


def warm_chat_format(cfg: DictConfig, model_path: str):
    """The chat format the warm start trains in: the run's template and tools, demonstrations written in the form
    its agent acts in."""
    from transformers import AutoTokenizer

    chat = chat_format(AutoTokenizer.from_pretrained(model_path), C.episode_config(cfg, max_turns=1))
    return demonstrations_in_agent_form(chat, cfg)


def warm_start_demonstrations(cfg: DictConfig, model_path: str):
    """(chat format, demonstrations) of the warm start, full-weight or LoRA."""
    prepare_environment(cfg)  # AppWorld's demonstrations are played on the self-made data: build it first
    chat = warm_chat_format(cfg, model_path)
    return chat, demonstrations(cfg, chat)


def warm_start_inputs(cfg: DictConfig, model_path: str):
    """The full-weight warm start's demonstrations, its readiness check (P(optimal held-out episode)), the
    demonstrations' token weights (None: all alike) and its stall probe (None: the readiness rule)."""
    chat, demos = warm_start_demonstrations(cfg, model_path)
    readiness, stall_probe = warm_start_checks(cfg, chat, {d.task_id for d in demos})
    return demos, readiness, demonstration_weights(cfg, chat, demos), stall_probe
