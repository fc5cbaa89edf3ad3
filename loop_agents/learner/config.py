"""Typed configuration of the learner (model, LoRA, optimiser, batching, memory, checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field

LORA_TARGETS_ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DTYPES = ("float32", "bfloat16", "float16")
SCHEDULERS = ("constant", "linear_warmup", "cosine")
OVERLONG_POLICIES = ("truncate", "drop")
SHARE_PREFIX_MODES = ("auto", "on", "off")
PRECISIONS = ("fp32", "bf16", "auto")


@dataclass
class LearnerConfig:
    """Everything the algorithm-blind learner needs. Defaults = the LOOP preset on a tiny model."""

    model_path: str = ""  # Hugging Face model directory (config.json, weights, tokenizer)
    dtype: str = "float32"  # base weights dtype; LoRA and the value head stay float32
    device: str = "auto"  # "auto" (cuda:LOCAL_RANK if available, else cpu), "cpu" or "cuda"
    lora_r: int = 16  # LoRA rank (LOOP: 16 for 32B)
    lora_alpha: int = 32  # LoRA alpha (LOOP: 32)
    lora_dropout: float = 0.0  # LoRA dropout (LOOP: 0)
    lora_target_modules: list[str] = field(
        default_factory=lambda: list(LORA_TARGETS_ALL_PROJECTIONS)
    )  # LoRA targets
    lr: float = 5e-5  # AdamW learning rate (LOOP: 5e-5 constant)
    weight_decay: float = 0.01  # AdamW weight decay (LOOP: 0.01)
    adam_betas: tuple[float, float] = (0.9, 0.999)  # AdamW betas
    adam_eps: float = 1e-8  # AdamW epsilon
    scheduler: str = "constant"  # one of SCHEDULERS; stepped once per iteration (as LOOP)
    warmup_iterations: int = 0  # warmup length for linear_warmup/cosine
    total_iterations: int = 200  # horizon of the cosine schedule
    max_grad_norm: float = 0.1  # global grad-norm clip, reduced once across ranks (LOOP repo: 0.1)
    epochs: int = 2  # PPO epochs per iteration (LOOP: 2)
    minibatch_size: int = 32  # global rollouts per optimizer step (LOOP: 32)
    micro_token_budget: int = 16384  # max tokens packed into one forward/backward per rank
    logprob_chunk_size: int = 1024  # positions per lm-head chunk: [chunk x vocab] logits at most
    max_seq_len: int = 32768  # longest trajectory trained on
    overlong_policy: str = "truncate"  # "truncate" (keep the prefix) or "drop"; both counted
    recompute_old_logprobs: bool = True  # LOOP: recompute π_old with the learner; False: sampler logprobs
    sampler_logprobs_if_agree: bool = (
        False  # with recompute: use the sampler's logprobs as π_old once a recompute agrees
    )
    sampler_logprobs_tolerance: float = 1e-3  # agreement = max |sampler - recomputed| logprob <= this (nats)
    sampler_logprobs_recheck_every: int = 10  # while trusted, recompute and re-check every N iterations
    share_prefix: str = (
        "auto"  # shared-prefix forward per micro-batch: auto (prefix >= min tokens) | on | off
    )
    share_prefix_min_tokens: int = 32  # auto: share a micro-batch's common prefix from this length on
    precision: str = "fp32"  # compute precision: fp32 | bf16 (autocast) | auto (bf16 where the device has it)
    activation_checkpointing: bool = False  # recompute decoder layers in backward (GPU presets: True)
    use_fsdp: bool = True  # with torch.distributed initialised: shard with FSDP2 fully_shard
    value_head_hidden: list[int] = field(default_factory=list)  # critic MLP widths; [] = no value head
    seed: int = 0  # LoRA init, epoch order
    temperature: float = 1.0  # logits divided by this (must equal the sampling temperature)
    keep_checkpoints: int = 3  # save_checkpoint keeps the newest N complete checkpoints in a run dir

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if not self.model_path:
            raise ValueError("learner.model_path is empty")
        for name, allowed in (
            ("dtype", DTYPES),
            ("scheduler", SCHEDULERS),
            ("overlong_policy", OVERLONG_POLICIES),
            ("share_prefix", SHARE_PREFIX_MODES),
            ("precision", PRECISIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"learner.{name}={getattr(self, name)!r} is not one of {allowed}")
        for name in (
            "lora_r",
            "epochs",
            "minibatch_size",
            "micro_token_budget",
            "logprob_chunk_size",
            "max_seq_len",
            "share_prefix_min_tokens",
            "sampler_logprobs_recheck_every",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"learner.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_grad_norm <= 0 or self.temperature <= 0:
            raise ValueError("learner.max_grad_norm and learner.temperature must be > 0")
        if self.sampler_logprobs_tolerance <= 0:
            raise ValueError("learner.sampler_logprobs_tolerance must be > 0")
        if self.share_prefix == "on" and self.activation_checkpointing:
            raise ValueError(
                "learner.share_prefix=on needs activation_checkpointing=false (the prefix's key/value cache "
                "cannot be recomputed in backward); use share_prefix=auto or off"
            )
