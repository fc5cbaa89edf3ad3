"""Learner training throughput vs a raw torch + peft forward/backward loop on the same batch.

`python -m benchmarks.learner_throughput` prints a JSON dict. Both sides run the same model (a
small Qwen2 built locally), the same LoRA config, the same trajectories and one optimizer step per
repetition; the learner's number is its own `tokens_per_s` (training phase: packed tokens through
forward + backward + step; old log-probs from the sampler so that both sides do the same work).
The raw loop pads the batch to [B, T], takes full-vocabulary logits, log-softmax, PPO-clip loss.
Goal: learner / raw >= 0.9.

Beside the wall-clock ratio, `cpu_ratio` compares tokens per CPU-second of this process for the same
steps (the learner's whole `train_iteration`, the raw step): on the shared 2-core machine, wall-clock
ratios swing between 0.4 and 4 with the other agents' load, CPU time much less. `share_prefix_off_vs_auto`
runs a second learner with learner.share_prefix=off on the same (unshared) batch, to show that the
default `auto` costs nothing where nothing is shared.
"""

from __future__ import annotations

import copy
import json
import tempfile
import time

import torch
import torch.nn.functional as F


def _batch(num: int, length: int, vocab: int, seed: int = 0):
    from loop_agents.rollout.trajectory import Trajectory

    gen = torch.Generator().manual_seed(seed)
    trajectories = []
    for i in range(num):
        n = length - int(torch.randint(0, length // 4, (1,), generator=gen))
        ids = torch.randint(0, vocab, (n,), generator=gen).tolist()
        mask = [0] * (n // 10) + [1] * (n - n // 10)
        trajectories.append(
            Trajectory(
                task_id=f"t{i // 2}",
                group_id=f"t{i // 2}",
                sample_index=i % 2,
                token_ids=ids,
                loss_mask=mask,
                sample_logprobs=[-7.0 if m else 0.0 for m in mask],
                reward=float(i % 3) / 2,
            )
        )
    return trajectories


def _raw_step(model, optimizer, trajectories, advantages) -> int:
    length = max(len(t.token_ids) for t in trajectories)
    ids = torch.zeros(len(trajectories), length, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros(len(trajectories), length, dtype=torch.bool)
    for i, t in enumerate(trajectories):
        ids[i, : len(t.token_ids)] = torch.tensor(t.token_ids)
        attn[i, : len(t.token_ids)] = 1
        mask[i, : len(t.token_ids)] = torch.tensor(t.loss_mask, dtype=torch.bool)
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    logprobs = torch.gather(F.log_softmax(logits, -1), 2, ids[:, 1:, None])[..., 0]
    old = torch.full_like(logprobs, -7.0)
    adv = advantages[:, None].expand_as(logprobs)
    ratio = torch.exp(logprobs - old)
    loss = -torch.minimum(ratio * adv, ratio.clamp(1 / 1.1, 1.1) * adv)
    m = mask[:, 1:]
    per_traj = (loss * m).sum(1) / m.sum(1).clamp(min=1)
    (per_traj.sum() / len(trajectories)).backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return int(attn.sum())


def run(
    num_trajectories: int = 8, length: int = 512, repetitions: int = 3, micro_token_budget: int | None = 1024
) -> dict:
    from loop_agents import reference as ref
    from loop_agents.algorithms import compute_advantages, preset
    from loop_agents.learner import Learner, LearnerConfig
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    model_dir = str(
        build_tiny_model(
            tempfile.mkdtemp(),
            TinyModelSpec(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=768),
        )
    )
    algorithm = preset("loop")
    algorithm.abs_adv_threshold = 0.0
    trajectories = _batch(num_trajectories, length, vocab=1000)
    compute_advantages(trajectories, algorithm)
    learner = Learner(
        LearnerConfig(
            model_path=model_dir,
            device="cpu",
            epochs=1,
            minibatch_size=num_trajectories,
            max_grad_norm=1.0,
            micro_token_budget=micro_token_budget or num_trajectories * length,
            recompute_old_logprobs=False,
        ),
        algorithm,
    )
    cfg = ref.ReferenceConfig()
    raw_model = ref.load_lora_policy(model_dir, cfg)
    raw_opt = ref.make_optimizer(raw_model, cfg)
    advantages = torch.tensor([t.advantage for t in trajectories])
    plain = Learner(copy.deepcopy(learner.cfg), algorithm)
    plain.cfg.share_prefix = "off"
    plain.share_mode = "off"
    learner.train_iteration(trajectories)  # warm-up all three
    plain.train_iteration(trajectories)
    _raw_step(raw_model, raw_opt, trajectories, advantages)
    learner_rates, raw_rates = [], []
    learner_cpu, raw_cpu, plain_cpu = [], [], []
    packed = sum(len(t.token_ids) for t in trajectories)
    for _ in range(repetitions):
        cpu = time.process_time()
        learner_rates.append(learner.train_iteration(trajectories)["tokens_per_s"])
        learner_cpu.append(packed / (time.process_time() - cpu))
        cpu, start = time.process_time(), time.perf_counter()
        tokens = _raw_step(raw_model, raw_opt, trajectories, advantages)
        raw_rates.append(tokens / (time.perf_counter() - start))
        raw_cpu.append(tokens / (time.process_time() - cpu))
        cpu = time.process_time()
        plain.train_iteration(trajectories)
        plain_cpu.append(packed / (time.process_time() - cpu))
    learner_best, raw_best = max(learner_rates), max(raw_rates)
    return {
        "batch": f"{num_trajectories} x <= {length} tokens",
        "threads": torch.get_num_threads(),
        "learner_tokens_per_s": round(learner_best, 1),
        "raw_torch_peft_tokens_per_s": round(raw_best, 1),
        "ratio": round(learner_best / raw_best, 3),
        "learner_tokens_per_cpu_s": round(max(learner_cpu), 1),
        "raw_torch_peft_tokens_per_cpu_s": round(max(raw_cpu), 1),
        "cpu_ratio": round(max(learner_cpu) / max(raw_cpu), 3),
        "share_prefix_off_tokens_per_cpu_s": round(max(plain_cpu), 1),
        "share_prefix_auto_vs_off": round(max(learner_cpu) / max(plain_cpu), 3),
        "goal": ">= 0.9",
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run learner_throughput`."""
    result = run(num_trajectories=4, length=256, repetitions=2) if quick else run()
    result.pop("goal", None)
    return {
        **result,
        "ratio_definition": "learner tokens/s / raw torch+peft tokens/s (best of the repetitions, interleaved)",
        "summary": f"learner {result['learner_tokens_per_s']:.0f} tok/s vs raw torch+peft "
        f"{result['raw_torch_peft_tokens_per_s']:.0f} tok/s ({result['batch']}, {result['threads']} threads); "
        f"per CPU-second {result['learner_tokens_per_cpu_s']:.0f} vs {result['raw_torch_peft_tokens_per_cpu_s']:.0f} "
        f"({result['cpu_ratio']:.2f}); share_prefix auto vs off {result['share_prefix_auto_vs_off']:.2f}",
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
