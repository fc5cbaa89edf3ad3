"""Evaluate a checkpoint (or the base model) on a split; see loop_agents.checkpoint_eval.evaluate_checkpoint.py.

python scripts/evaluate.py checkpoint=<checkpoint dir | run dir | base> split=<name> [runs=N]
    [server_url=http://127.0.0.1:PORT] [out=<dir>] [max_tasks=N] [max_turns=N] [compare=<checkpoint>]
    <hydra overrides...>
Prints per split and difficulty the mean success (TGC, SGC) with its 95 % bootstrap interval over tasks, avg@k,
pass@k and the episodes behind them; with compare=, the paired difference checkpoint - compare and its interval.
"""

from loop_agents.checkpoint_eval.cli import main

if __name__ == "__main__":
    main()
