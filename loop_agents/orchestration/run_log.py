"""Run-directory logging: metrics JSONL, rollouts JSONL, wandb (offline by default), PNG curves.

Layout of `<run_dir>` (read by the viewer and the eval scripts):
    config.yaml                      composed config of the first launch
    metrics.jsonl                    one JSON object per iteration (and per evaluation)
    rollouts/iter_000001.jsonl       every trajectory of an iteration (Trajectory.to_dict per line)
    eval/<split>_iter_000005.jsonl   evaluation episodes
    checkpoints/iter_000001/         learner checkpoints (adapter/, optimizer, RNG, driver_state.json, done)
    plots/*.png                      curves over iterations
The wandb API key is never read, printed or written here; wandb reads it from its own login.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from loop_agents.jsonl import read_rows, rewrite_rows
from loop_agents.orchestration.plots import write_plots
from loop_agents.orchestration.run_report import best_record
from loop_agents.rollout.trajectory import Trajectory, save_trajectories


class RunLog:
    """Appends metrics and rollouts for one run; mirrors metrics to wandb when enabled."""

    def __init__(
        self,
        run_dir: str | Path,
        wandb_mode: str = "disabled",
        project: str = "loop_agents",
        entity: str | None = None,
        config: dict | None = None,
        run_id: str | None = None,
    ):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.dir / "metrics.jsonl"
        self._wandb = None
        if wandb_mode != "disabled":
            import wandb

            # quiet: wandb's ~35 lines at init and finish would bury the run's own lines and its closing result
            # block; console="off" keeps it from copying the terminal (its run files still hold the metrics)
            self._wandb = wandb.init(
                settings=wandb.Settings(silent=True, console="off"),
                project=project,
                entity=entity,
                mode=wandb_mode,
                dir=str(self.dir),
                config=config,
                id=run_id,
                resume="allow",
                name=self.dir.name,
            )
            # Every row is logged at wandb's own next step, and charts use our step metrics: a row whose iteration
            # is behind the newest (a background evaluation finishing after later training rows) is kept, where
            # `log(step=iteration)` would have dropped it ("Tried to log to step N that is less than the current").
            self._wandb.define_metric("iteration")
            self._wandb.define_metric("*", step_metric="iteration")
            self._wandb.define_metric("eval/iteration")
            self._wandb.define_metric("eval/*", step_metric="eval/iteration")

    @property
    def wandb_run_id(self) -> str | None:
        return self._wandb.id if self._wandb is not None else None

    def log(self, metrics: dict[str, Any], iteration: int) -> None:
        row = {"iteration": iteration, **{k: _jsonable(v) for k, v in metrics.items()}}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if isinstance(v, int | float)})

    def truncate_after(self, iteration: int) -> None:
        """Drop metric rows newer than `iteration` (a resumed run rewrites them)."""
        if not self.metrics_path.exists():
            return
        kept = [r for r in self.rows() if r["iteration"] <= iteration]
        rewrite_rows(self.metrics_path, kept)  # atomic: a kill here leaves every row of before or after

    def has_training_row(self, iteration: int) -> bool:
        """Whether metrics.jsonl holds the training row (rollout metrics) of `iteration`."""
        return any(r["iteration"] == iteration and "rollout/count" in r for r in self.rows())

    def save_rollouts(self, trajectories: list[Trajectory], iteration: int, name: str = "rollouts") -> Path:
        path = self.dir / name / f"iter_{iteration:06d}.jsonl"
        save_trajectories(path, trajectories)
        return path

    def rows(self) -> list[dict[str, Any]]:
        """metrics.jsonl's rows; a torn last row (a crash mid-append) is left out with a one-line note."""
        return read_rows(self.metrics_path)

    def plot(self) -> list[Path]:
        """Write the run's curves into plots/ (orchestration/plots.py); returns the paths written."""
        return write_plots(self.dir, self.rows(), best_record(self.dir))

    def finish(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
