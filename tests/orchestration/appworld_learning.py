"""Shared by the opt-in AppWorld learning tests: their marks and one `loop_agents.train` run in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON

ROOT = Path(__file__).resolve().parents[2]
# The first run on a machine builds the data, plays the demonstrations and trains the shared warm model (~12 min on
# 2 idle cores, far longer on busy ones) before the run itself: opt-in like test_demo_learns, since it would take
# a large part of CI's 90 minutes (issue 19).
LEARNING_TEST_MARKS = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(
        os.environ.get("LOOP_AGENTS_LEARNING_TESTS") != "1",
        reason="learning test: opt-in with LOOP_AGENTS_LEARNING_TESTS=1 (~20-30 min on a fresh machine, issue 19)",
    ),
]


def train_and_read_metrics(run_dir: Path, *overrides: str) -> list[dict]:
    """Run `python -m loop_agents.train <overrides>` into `run_dir` (no wandb, plots or progress bar); its
    metrics.jsonl rows. Skips where the AppWorld venv is missing."""
    if not DEFAULT_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    proc = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", *overrides, f"run.dir={run_dir}",
         "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
