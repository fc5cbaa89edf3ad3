"""Build a run's full-weight warm start alone (what `learner.sft_target=full` does first in a run).

    python scripts/sft_warm_start.py experiment=demo run.seed=1 run.dir=runs/demo_s1 [--eval-tasks 200]

Takes the same Hydra overrides as `loop_agents.train`, so the model (tiny sizes included), the
demonstrations and the SFT settings are exactly those of the run. It writes `run.dir/warm_model`,
which a later `loop_agents.train` with the same run directory reuses, and reports P(optimal dev
episode) (`p_optimal`, the predictor of whether RL can start). `--eval-tasks N` then plays N
dev gem hunt tasks with Hugging Face sampling (no vLLM) and prints success and mean reward: the
number RL starts from. The demonstrations' token layout (loss on each assistant action and its
`<|im_end|>` only) is `loop_agents.orchestration.warm_start.demonstration_trajectory`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from loop_agents.config.load import compose_or_exit
from loop_agents.envs.bundled.warm_start_quality import optimal_episode_probabilities, sampled_dev
from loop_agents.orchestration.full_sft import CachedModelMismatch
from loop_agents.orchestration.warm_model import policy_model_path
from loop_agents.rollout.chat import ChatFormat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eval-tasks", type=int, default=0, help="dev tasks to play after SFT (0 = none)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of that check")
    parser.add_argument(
        "--p-optimal", type=int, default=100, help="clean dev episodes for P(optimal episode)"
    )
    args, overrides = parser.parse_known_args()
    cfg = compose_or_exit(overrides)
    if cfg.learner.sft_target != "full" or cfg.learner.sft_epochs == 0:
        parser.error("needs learner.sft_target=full and learner.sft_epochs > 0 (experiment=demo sets both)")
    run_dir = Path(cfg.run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        warm = Path(policy_model_path(cfg, run_dir))
    except CachedModelMismatch as err:
        print(f"run directory error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    report = json.loads((warm / "warm_start.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(warm)
    model = AutoModelForCausalLM.from_pretrained(warm, dtype=torch.float32).eval()
    if args.p_optimal:
        report.update(optimal_episode_probabilities(model, ChatFormat(tokenizer), args.p_optimal))
    if args.eval_tasks:
        t0 = time.perf_counter()
        spare = cfg.env.options.get("spare_moves", 1)
        report["dev"] = sampled_dev(
            model, ChatFormat(tokenizer), args.eval_tasks, spare, args.temperature, cfg.run.seed
        )
        report["eval_s"] = time.perf_counter() - t0
    print(json.dumps({"warm_model": str(warm), **report}, indent=2))


if __name__ == "__main__":
    main()
