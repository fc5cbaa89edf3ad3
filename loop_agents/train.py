"""Train an LLM agent with LOOP (or GRPO, RLOO, REINFORCE++, PPO-GAE, GSPO) in a multi-turn environment.

Launch (any key is a Hydra override; `--cfg job` prints the composed config and exits):
    accelerate launch --config_file conf/accelerate/fsdp2_4gpu.yaml loop_agents/train.py \
        llm=qwen2_5_32b gpu_allocation=four_learn_four_infer env=appworld algorithm=loop
    (conf/accelerate/: cpu.yaml, fsdp2_1gpu.yaml, fsdp2_4gpu.yaml, fsdp2_8gpu.yaml; num_processes must equal
    len(gpu_allocation.learner_gpus))
    accelerate launch --cpu --num_processes 1 loop_agents/train.py experiment=demo
    torchrun --nproc-per-node 2 loop_agents/train.py experiment=demo      # 2 gloo ranks on CPU
    python -m loop_agents.train experiment=demo

Rank 0 is the driver (Ray, inference, rollouts, evaluator); every rank is a learner rank (FSDP2).
Rerunning the same command with the same `run.dir` resumes from the newest complete checkpoint. A single-process
run does that by itself when its training process dies (`run.auto_resume_attempts`, loop_agents/supervisor.py);
under torchrun / accelerate launch, pass the launcher's `--max_restarts N`: it restarts every rank, which resume
from the same checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from loop_agents.config.launch import ACCELERATE_SIMPLE_LAUNCH, check_world_size, launched_rank
from loop_agents.config.load import compose_or_exit, print_notes
from loop_agents.config.validate import ConfigError
from loop_agents.envs.selected import check_environment
from loop_agents.errors import CachedModelMismatch, CheckpointError, LostWorkError
from loop_agents.failures import PERMANENT, exit_code_for
from loop_agents.finished_run import finished_line
from loop_agents.jsonl import JsonlError
from loop_agents.orchestration.placement import plan
from loop_agents.orchestration.ray_session import exit_cleanly_on_sigterm, sigterm_exit_code
from loop_agents.preflight import check_or_exit
from loop_agents.progress_lines import plain_output_off_a_terminal
from loop_agents.redaction import redacted_yaml
from loop_agents.supervisor import SUPERVISED_ENV, resume_point, should_supervise, supervise, train_command


def parse_cli(argv: list[str]) -> tuple[list[str], str | None]:
    """Split argv into Hydra overrides and an optional `--cfg job|all` request."""
    overrides, show = [], None
    it = iter(argv)
    for arg in it:
        if arg == "--cfg":
            show = next(it, "job")
        elif arg.startswith("--cfg="):
            show = arg.split("=", 1)[1]
        elif arg in ("-h", "--help"):
            print(__doc__)
            raise SystemExit(0)
        else:
            overrides.append(arg)
    return overrides, show


def _with_stop_line(run_dir):
    """An excepthook that prints the traceback, then the run's exit line: what a person does next."""

    def hook(kind, err, trace) -> None:
        sys.__excepthook__(kind, err, trace)
        print(
            f"run stopped by {kind.__name__}; nothing before it is lost: the same command resumes from "
            f"{resume_point(run_dir)}",
            file=sys.stderr,
            flush=True,
        )

    return hook


def main(argv: list[str] | None = None) -> None:
    plain_output_off_a_terminal()  # a log file gets plain lines: no bars' '\r' redraws, no colour codes
    overrides, show = parse_cli(sys.argv[1:] if argv is None else argv)
    cfg = compose_or_exit(overrides)
    if show is not None:
        print(redacted_yaml(cfg))
        return
    print_notes()  # e.g. a preset's env.options left to the family it was written for
    launched = "WORLD_SIZE" in os.environ or ACCELERATE_SIMPLE_LAUNCH in os.environ
    if not cfg.run.dry_run or launched:  # a plain dry run shows any preset's plan
        try:
            check_world_size(cfg)  # e.g. accelerate's num_processes against gpu_allocation.learner_gpus
        except ConfigError as err:  # every rank says it: a launcher may kill the others before rank 0 prints
            sys.stderr.write(f"config error: {err}\n")  # one write: ranks sharing a pipe do not interleave
            sys.stderr.flush()
            raise SystemExit(2) from None
    if cfg.run.dry_run:
        if launched_rank() == 0:  # under a launcher every rank builds the plan; rank 0 prints it
            print(json.dumps(plan(cfg), indent=2))
        return

    finished = finished_line(cfg)
    if finished is not None:  # before anything starts or is rewritten
        if launched_rank() == 0:
            print(finished, flush=True)
        return
    if os.environ.get(SUPERVISED_ENV) != "1":  # the supervisor's parent checked already
        check_or_exit(cfg)  # run.dir, model, servers: one line and exit 2, before Ray or vLLM
        try:
            check_environment(cfg)  # e.g. a missing AppWorld data root: one line before anything starts
        except ConfigError as err:
            print(f"config error: {err}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
    if should_supervise(cfg.run.auto_resume_attempts):
        raise SystemExit(supervise(train_command(overrides), Path(cfg.run.dir), cfg.run.auto_resume_attempts))
    sys.excepthook = _with_stop_line(Path(cfg.run.dir))
    from loop_agents.orchestration.driver import (
        run,
    )  # torch, the learner, Ray: lazy (loop_agents/lazy_imports.py)

    exit_cleanly_on_sigterm()  # armed again once Ray has started (it installs its own handlers)
    try:
        with sigterm_exit_code():
            run(cfg)
    except CheckpointError as err:  # full disk, unwritable run dir, corrupted or foreign checkpoint
        print(f"checkpoint error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None  # the same command would meet it again
    except (CachedModelMismatch, JsonlError) as err:  # another preset's model in run.dir, a damaged log
        print(f"run directory error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except LostWorkError as err:  # the retries waited for the servers already: a restart would lose it again
        print(f"run stopped, work lost: {err}. Fix the cause and run the same command: it resumes from "
              f"{resume_point(Path(cfg.run.dir))}", file=sys.stderr, flush=True)  # fmt: skip
        raise SystemExit(PERMANENT) from None
    except Exception as err:  # its traceback and stop line; the code tells the supervisor whether to rerun
        sys.excepthook(type(err), err, err.__traceback__)
        raise SystemExit(exit_code_for(err)) from None


if __name__ == "__main__":
    main()
