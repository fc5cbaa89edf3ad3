"""`python scripts/evaluate.py ...` / `loop-evaluate ...`: one evaluation, or a paired comparison of two checkpoints
(usage: `loop_agents/checkpoint_eval/evaluate_checkpoint.py`'s docstring)."""

from __future__ import annotations

import sys

from loop_agents.checkpoint_eval import evaluate_checkpoint
from loop_agents.checkpoint_eval.compare import evaluate_pair, prepare_compare
from loop_agents.checkpoint_eval.eval_target import PROG
from loop_agents.checkpoint_eval.evaluate_checkpoint import evaluate, prepare
from loop_agents.checkpoint_eval.request import KEYS, EvalRequest
from loop_agents.errors import ConfigError
from loop_agents.eval.cli_args import UsageError, exit_with, parse_args


def main(argv: list[str] | None = None) -> None:
    try:
        values, overrides = parse_args(
            sys.argv[1:] if argv is None else argv, KEYS, evaluate_checkpoint.__doc__
        )
        request = EvalRequest(**values, overrides=overrides)
        prep = prepare(request)
        pair = prepare_compare(request, prep) if request.compare is not None else None
    except (UsageError, ConfigError, ValueError, FileNotFoundError) as exc:
        # bad arguments, config, checkpoint, split, env options or missing AppWorld data: one line
        exit_with(PROG, str(exc))
    try:
        reports = [evaluate(request, prep)] if pair is None else evaluate_pair(request, prep, *pair)
    except UsageError as exc:  # server_url problems
        exit_with(PROG, str(exc))
    lost = sum(len(tasks) for report in reports for tasks in report["missing"].values())
    if lost:  # the evaluation is incomplete: not a result to use as is
        total = sum(report["num_tasks"] * report["runs"] for report in reports)
        runs = sorted({r for report in reports for r in report["missing"]})
        print(
            f"{PROG}: error: {lost} of {total} (task, run) pairs have no episode "
            f"(runs {runs}; lost after retries); rerun the same command to play them",
            file=sys.stderr,
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()
