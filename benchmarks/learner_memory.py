"""Peak memory of one LOOP step vs one SFT step of the learner on the same batch.

`python -m benchmarks.learner_memory` prints a JSON dict. Each step runs in a fresh subprocess
(so the peaks do not mix): on CUDA the peak is `max_memory_allocated` during the step; on CPU it
is the growth of the process's peak RSS over its RSS just before the step. The LOOP step includes
the recompute of old log-probs (no grad) and the PPO loss; the SFT step is the token NLL.
Goal: LOOP / SFT <= 1.1.
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


def measure(mode: str, model_dir: str, num: int, length: int) -> float:
    """Peak MB of one `mode` (loop|sft) iteration in this process."""
    import torch

    from benchmarks.learner_throughput import _batch
    from loop_agents.algorithms import compute_advantages, preset
    from loop_agents.learner import Learner, LearnerConfig
    from loop_agents.learner.stress import peak_memory_mb

    algorithm = preset("loop" if mode == "loop" else "sft")
    algorithm.abs_adv_threshold = 0.0
    trajectories = _batch(num, length, vocab=1000)
    if mode == "loop":
        compute_advantages(trajectories, algorithm)
    cfg = LearnerConfig(
        model_path=model_dir,
        epochs=1,
        minibatch_size=num,
        micro_token_budget=num * length,
        logprob_chunk_size=1024,
    )
    learner = Learner(cfg, algorithm)
    device = learner.ctx.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device) / 2**20
    else:
        before = _rss_mb()
    learner.train_iteration(trajectories)
    return peak_memory_mb(device) - before


def run(num_trajectories: int = 8, length: int = 2048) -> dict:
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    model_dir = str(
        build_tiny_model(
            tempfile.mkdtemp(),
            TinyModelSpec(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=768),
        )
    )
    peaks = {}
    for mode in ("loop", "sft"):
        code = f"from benchmarks.learner_memory import measure; print(measure({mode!r}, {model_dir!r}, {num_trajectories}, {length}))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        peaks[mode] = float(out.stdout.strip().splitlines()[-1])
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


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
