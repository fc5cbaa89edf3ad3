"""A rerun of a run that already finished: one line and exit 0, before anything starts or is rewritten.

A run is finished when its `summary.json` exists (written last, after the held-out evaluation) and its newest
complete checkpoint is at `run.iterations` or beyond. Raising `run.iterations` continues it instead. Reads only
directory names and one file: no torch, no Ray.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from loop_agents.supervisor import last_checkpoint_iteration


def finished_line(cfg: DictConfig) -> str | None:
    """'run <dir> already finished ...' if this command has nothing left to do in its run.dir, else None."""
    run_dir = Path(str(cfg.run.dir)).expanduser()
    if not (run_dir / "summary.json").is_file():
        return None
    last = last_checkpoint_iteration(run_dir)
    iterations = int(cfg.run.iterations)
    if last is None or last < iterations:
        return None
    return (
        f"run {run_dir} already finished (checkpoint-{last}, run.iterations={iterations}; results in "
        f"{run_dir / 'summary.json'}); nothing was changed. Set run.iterations above {last} to continue it"
    )
