"""Score saved evaluation outputs (AppWorld's official evaluator, or saved trajectories), print TGC/SGC per
split and difficulty, append one line per run to a results file, log to wandb; see
loop_agents/eval/parse_and_log.py.

    python scripts/parse_and_log.py experiment=<name | dir | .jsonl> split=<split> [results_file=...]
        [wandb=offline|online|disabled]
"""

from loop_agents.eval.parse_and_log import main

if __name__ == "__main__":
    main()
