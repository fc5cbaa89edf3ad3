"""Peak learner memory of one PPO step with a critic and a reference vs one LOOP step, same batch.

Issue item 5, second half (report only). `python -m benchmarks.learner_memory_ppo` prints a JSON dict.
The measurement is `learner_memory.run_ppo`: fresh process per step, alternating LOOP / PPO rounds;
PPO = advantage `gae` with the value head (critic values computed first, as the driver does) and
`kl_coef` > 0 (the reference log-probs: the base model with the LoRA disabled).
"""

from __future__ import annotations

import json

from benchmarks.learner_memory import run_ppo


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run learner_memory_ppo`."""
    result = run_ppo(num_trajectories=4, length=1024, rounds=2) if quick else run_ppo()
    return {
        **result,
        "ratio_definition": "peak memory growth of one PPO step with critic (gae, value head) and reference "
        "(kl_coef > 0) / of one LOOP step, same batch, fresh process each, lower of 2 alternating rounds",
        "summary": f"PPO+critic+ref step {result['ppo_critic_ref_step_peak_mb']:.0f} MB vs LOOP step "
        f"{result['loop_step_peak_mb']:.0f} MB ({result['batch']})",
    }


if __name__ == "__main__":
    print(json.dumps(run_ppo(), indent=2))
