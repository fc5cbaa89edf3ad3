"""Finds the files of a run directory (the layout is documented in `loop_agents.view`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROLLOUT_FILE = re.compile(r"^iter_(\d+)\.jsonl$")
_EVAL_FLAT_FILE = re.compile(r"^(.+)_iter_(\d+)\.jsonl$")


@dataclass(frozen=True)
class EpisodeFile:
    """One JSONL file of trajectories: a training iteration's rollouts or an evaluation."""

    path: Path
    iteration: int
    split: str | None  # None for training rollouts

    @property
    def page_name(self) -> str:
        """Folder of its pages inside the site, e.g. `iter_000003` or `eval_dev_iter_000005`."""
        if self.split is None:
            return f"iter_{self.iteration:06d}"
        safe_split = re.sub(r"[^A-Za-z0-9_.-]", "_", self.split)
        return f"eval_{safe_split}_iter_{self.iteration:06d}"

    @property
    def title(self) -> str:
        if self.split is None:
            return f"iteration {self.iteration}"
        return f"eval {self.split} @ iteration {self.iteration}"


@dataclass(frozen=True)
class RunFiles:
    """Everything the viewer reads from one run directory."""

    run_dir: Path
    rollouts: list[EpisodeFile]
    evals: list[EpisodeFile]
    metrics: list[dict[str, Any]]
    config_text: str | None


def find_run_files(run_dir: str | Path) -> RunFiles:
    """Lists rollout and eval files (sorted by iteration) and reads metrics.jsonl and config.yaml."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    rollouts = []
    for path in sorted((run_dir / "rollouts").glob("iter_*.jsonl")):
        match = _ROLLOUT_FILE.match(path.name)
        if match:
            rollouts.append(EpisodeFile(path, int(match.group(1)), None))
    evals = []
    eval_dir = run_dir / "eval"
    for path in sorted(eval_dir.glob("*_iter_*.jsonl")):  # eval/<split>_iter_000005.jsonl
        match = _EVAL_FLAT_FILE.match(path.name)
        if match:
            evals.append(EpisodeFile(path, int(match.group(2)), match.group(1)))
    for path in sorted(eval_dir.glob("*/iter_*.jsonl")):  # eval/<split>/iter_000005.jsonl
        match = _ROLLOUT_FILE.match(path.name)
        if match:
            evals.append(EpisodeFile(path, int(match.group(1)), path.parent.name))
    if not rollouts and not evals:
        raise FileNotFoundError(
            f"{run_dir} has no rollouts/iter_*.jsonl and no eval/<split>_iter_*.jsonl files; is it a run directory?"
        )
    config = run_dir / "config.yaml"
    return RunFiles(
        run_dir=run_dir,
        rollouts=sorted(rollouts, key=lambda f: f.iteration),
        evals=sorted(evals, key=lambda f: (f.split or "", f.iteration)),
        metrics=read_metrics(run_dir / "metrics.jsonl"),
        config_text=config.read_text() if config.exists() else None,
    )


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Rows of metrics.jsonl; a torn last line (a run still writing) is skipped, any other bad line named."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number} is not a JSON line: {err}") from err
    return rows
