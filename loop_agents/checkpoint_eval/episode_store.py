"""Finished evaluation episodes on disk, one JSONL per run, appended and fsynced as they finish."""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

from loop_agents.checkpoint_eval.eval_target import PROG
from loop_agents.rollout.trajectory import FinishReason, Trajectory

FAILED = (FinishReason.ENV_ERROR, FinishReason.INFERENCE_ERROR)  # lost episodes: played again on a rerun


# ---------------------------------------------------------------------------------------- episodes
class EpisodeStore:
    """`out/trajectories/run_<r>.jsonl`: one finished episode per line, appended as it finishes."""

    def __init__(self, out: Path) -> None:
        self.dir = out / "trajectories"

    def path(self, run: int) -> Path:
        return self.dir / f"run_{run}.jsonl"

    def load(self) -> dict[int, dict[str, Trajectory]]:
        """run -> task id -> trajectory. A torn last line (a crash mid-write) is dropped from the file."""
        runs: dict[int, dict[str, Trajectory]] = defaultdict(dict)
        for path in sorted(self.dir.glob("run_*.jsonl")):
            match = re.fullmatch(r"run_(\d+)\.jsonl", path.name)
            if match is None:
                continue
            good, torn = [], False
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                try:
                    traj = Trajectory.from_dict(json.loads(line))
                except (json.JSONDecodeError, TypeError, ValueError):
                    torn = True
                    continue
                good.append(line)
                runs[int(match[1])][traj.task_id] = traj
            if torn:
                print(
                    f"[{PROG}] dropped unreadable lines of {path}; those episodes are played again",
                    flush=True,
                )
                tmp = path.with_suffix(".jsonl.tmp")
                tmp.write_text("".join(line + "\n" for line in good))
                tmp.replace(path)
        return runs

    def append(self, traj: Trajectory, run: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.path(run).open("a") as f:
            f.write(json.dumps(traj.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())
