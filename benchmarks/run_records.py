"""What a recorded training run is made of: the rows and summary its run directory holds, the provenance stamped on
its record, one timed `python -m loop_agents.train`, and the `{"runs": [...]}` results file the records go to.

Shared by the scripts that run or read learning runs and record them (`scripts/demo_seeds.py`,
`benchmarks/{ablation,appworld_demo_runs,async_staleness,demo_tools_runs}.py`); what each keeps of a run is its own.
Dates are written in one format, `2026-11-29 10:33 UTC` (DATE_FORMAT); older records in ISO 8601
(`2026-11-28T13:16:32+00:00`) are read as they are, and both begin with the day.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.runner import ROOT, git_info, machine_info, write_atomically

DATE_FORMAT = "%Y-%m-%d %H:%M UTC"


# ---------------------------------------------------------------------------------------------- a run directory


def metrics_rows(run_dir: Path) -> list[dict]:
    """The rows of `run_dir/metrics.jsonl` in order; a line that is not JSON (a killed run's torn last line) is
    skipped, and a run without the file has no rows."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def dev_curve(rows: list[dict], metric: str = "success_rate") -> dict[int, float]:
    """`eval/<metric>` by `eval/iteration`, sorted by iteration; of two rows of one iteration the last one wins."""
    curve: dict[int, float] = {}
    for row in rows:
        if f"eval/{metric}" in row and "eval/iteration" in row:
            curve[int(row["eval/iteration"])] = float(row[f"eval/{metric}"])
    return dict(sorted(curve.items()))


def run_summary(run_dir: Path) -> dict:
    """`run_dir/summary.json` (phase times, best, held-out scores), or {} where the run did not get to write it."""
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def selection_metric(run_dir: Path) -> str:
    """The metric that picks `best` (the preset's dev score): summary.json's, else config.yaml's eval.best_metric."""
    best = run_summary(run_dir).get("best") or {}
    if best.get("metric"):
        return str(best["metric"])
    config = run_dir / "config.yaml"
    if config.is_file():
        found = re.search(r"^  best_metric: (\S+)$", config.read_text(), re.MULTILINE)
        if found:
            return found.group(1)
    return "success_rate"


# ---------------------------------------------------------------------------------------------- a record's stamp


def utc_date() -> str:
    """Now, as records write it (DATE_FORMAT)."""
    return _dt.datetime.now(_dt.UTC).strftime(DATE_FORMAT)


def provenance() -> dict:
    """What a record was made with: the commit (`+dirty` with uncommitted changes to loop_agents/ or benchmarks/
    outside its results), the UTC date (DATE_FORMAT), the CPU model and the core count."""
    git, machine = git_info(), machine_info()
    return {
        "commit": git["commit"] + ("+dirty" if git["dirty"] else ""),
        "date": utc_date(),
        "cpu": machine["cpu"],
        "cores": machine["cores"],
    }


# ---------------------------------------------------------------------------------------------- one training run


@dataclass(frozen=True)
class TrainRun:
    """How one `python -m loop_agents.train` ended: its exit code, its wall time, and the 1-minute load average
    before and after it (the machine is shared)."""

    exit_code: int
    wall_s: float
    load_before: float
    load_after: float


def train_command(overrides: list[str]) -> list[str]:
    """`python -m loop_agents.train *overrides` with this interpreter."""
    return [sys.executable, "-m", "loop_agents.train", *overrides]


def train(overrides: list[str], log_path: Path, append: bool = False) -> TrainRun:
    """Run `train_command(overrides)` in the repository root and wait for it, its stdout and stderr into `log_path`
    (added to the end with `append`, e.g. a resumed run's log); W&B offline unless WANDB_MODE says otherwise, Ray's
    usage stats off."""
    env = {
        **os.environ,
        "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    log_path.parent.mkdir(parents=True, exist_ok=True)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    with open(log_path, "a" if append else "w") as log:
        done = subprocess.run(
            train_command(overrides), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    return TrainRun(done.returncode, time.perf_counter() - started, load_before, os.getloadavg()[0])


# ---------------------------------------------------------------------------------------------- the results file


def load_runs(path: Path) -> list[dict]:
    """The records of a `{"runs": [...]}` results file, [] where there is no file yet."""
    return json.loads(path.read_text())["runs"] if path.exists() else []


def save_runs(path: Path, runs: list[dict]) -> None:
    """Write `{"runs": runs}` to `path` atomically (a temporary file beside it, then os.replace): a reader, or a
    writer stopped half-way, sees the old file or the new one, never part of one."""
    write_atomically(path, json.dumps({"runs": runs}, indent=1) + "\n")


def append_run(path: Path, record: dict) -> None:
    """Add one record to the end of a results file, the earlier ones kept as they are."""
    save_runs(path, [*load_runs(path), record])
