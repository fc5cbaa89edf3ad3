"""Peak memory of one LOOP step vs one SFT step of the learner on the same batch.

`python -m benchmarks.learner_memory` prints a JSON dict. Each step runs in a fresh subprocess
(so the peaks do not mix): on CUDA the peak is `max_memory_allocated` during the step; on CPU it
is the growth of the process's peak RSS over its RSS just before the step. The LOOP step includes
the recompute of old log-probs (no grad) and the PPO loss; the SFT step is the token NLL.
Goal: LOOP / SFT <= 1.1.

`run_ppo`, run by `benchmarks/learner_memory_ppo.py` (issue item 5, second half; report only): the same LOOP step vs one PPO step with a critic
and a reference, on the same batch: advantage `gae` with the value head (the critic's values are
computed first, as the driver does), `kl_coef` > 0 so the reference log-probs (the base model, the
LoRA disabled) are computed too, then the PPO epoch with the clipped value loss.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


PPO_KL_COEF = 0.05  # any value > 0 makes the learner compute the reference log-probs
PPO_VALUE_HEAD = [256]  # the critic MLP of conf/algorithm/ppo_gae.yaml (components.learner_config)


def measure(mode: str, model_dir: str, num: int, length: int) -> float:
    """Peak MB of one `mode` (loop|sft|ppo) iteration in this process."""
    import torch

    from benchmarks.learner_throughput import _batch
    from loop_agents.algorithms import compute_advantages, preset
    from loop_agents.learner import Learner, LearnerConfig
    from loop_agents.learner.stress import peak_memory_mb

    algorithm = preset({"loop": "loop", "sft": "sft", "ppo": "ppo_gae"}[mode])
    algorithm.abs_adv_threshold = 0.0
    if mode == "ppo":
        algorithm.kl_coef = PPO_KL_COEF
    trajectories = _batch(num, length, vocab=1000)
    if mode == "loop":
        compute_advantages(trajectories, algorithm)
    cfg = LearnerConfig(
        model_path=model_dir,
        epochs=1,
        minibatch_size=num,
        micro_token_budget=num * length,
        logprob_chunk_size=1024,
        value_head_hidden=list(PPO_VALUE_HEAD) if mode == "ppo" else [],
    )
    learner = Learner(cfg, algorithm)
    device = learner.ctx.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device) / 2**20
    else:
        before = _rss_mb()
    if mode == "ppo":  # as orchestration.components.learn: critic values, GAE, then the PPO step
        result = compute_advantages(trajectories, algorithm, learner.compute_values(trajectories))
        learner.train_iteration(trajectories, result.token_advantages, result.returns)
    else:
        learner.train_iteration(trajectories)
    return peak_memory_mb(device) - before


def _model_dir() -> str:
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    return str(
        build_tiny_model(
            tempfile.mkdtemp(prefix="learner_memory_"),
            TinyModelSpec(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=768),
        )
    )


def _peak_in_subprocess(mode: str, model_dir: str, num: int, length: int) -> float:
    code = f"from benchmarks.learner_memory import measure; print(measure({mode!r}, {model_dir!r}, {num}, {length}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def run(num_trajectories: int = 8, length: int = 2048) -> dict:
    model_dir = _model_dir()
    peaks = {mode: _peak_in_subprocess(mode, model_dir, num_trajectories, length) for mode in ("loop", "sft")}
    return {
        "batch": f"{num_trajectories} x <= {length} tokens, one packed micro-step",
        "loop_step_peak_mb": round(peaks["loop"], 1),
        "sft_step_peak_mb": round(peaks["sft"], 1),
        "ratio": round(peaks["loop"] / peaks["sft"], 3),
        "goal": "<= 1.1",
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run learner_memory`."""
    result = run(num_trajectories=4, length=1024) if quick else run()
    result.pop("goal", None)
    return {
        **result,
        "ratio_definition": "peak memory growth of one LOOP step / of one SFT step (fresh process each)",
        "summary": f"LOOP step {result['loop_step_peak_mb']:.0f} MB vs SFT step "
        f"{result['sft_step_peak_mb']:.0f} MB ({result['batch']})",
    }


def run_ppo(num_trajectories: int = 8, length: int = 2048, rounds: int = 2) -> dict:
    """LOOP step vs PPO (critic + reference) step, alternating fresh processes; the lower peak of each."""
    model_dir = _model_dir()
    samples: dict[str, list[float]] = {"loop": [], "ppo": []}
    for _ in range(rounds):
        for mode in ("loop", "ppo"):
            samples[mode].append(_peak_in_subprocess(mode, model_dir, num_trajectories, length))
    loop, ppo = min(samples["loop"]), min(samples["ppo"])
    return {
        "batch": f"{num_trajectories} x <= {length} tokens, one packed micro-step",
        "loop_step_peak_mb": round(loop, 1),
        "ppo_critic_ref_step_peak_mb": round(ppo, 1),
        "samples_mb": {k: [round(v, 1) for v in vs] for k, vs in samples.items()},
        "ppo_setup": f"advantage gae + value head {PPO_VALUE_HEAD}, kl_coef {PPO_KL_COEF} (reference = base "
        "model with the LoRA disabled: one more no-grad forward, no second copy of the weights)",
        "ratio": round(ppo / loop, 3),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
