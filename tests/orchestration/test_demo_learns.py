"""The CPU demo learns (issue 18): `experiment=demo` shortened to 6 RL iterations, the real warm start, vLLM,
Ray and the evaluator; held-out dev success (100 tasks, sampled at temperature 1) must rise by the margin every
measured seed and thread count reached at iteration 6 (benchmarks/results/demo_seeds.json), so a change that
breaks learning fails. Takes 10-15 minutes on an idle 2-core machine, most of it the warm start.

Opt-in (`LOOP_AGENTS_LEARNING_TESTS=1`) until the margin is measured over the 5 seeds x 2 thread counts of
issue 18: the runs so far (README "Robustness runs") are too few to set a threshold CI can rely on, and the test
would take a sixth of CI's 90 minutes. CI's summary line lists it as skipped with this reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("LOOP_AGENTS_LEARNING_TESTS") != "1",
        reason="learning test: opt-in with LOOP_AGENTS_LEARNING_TESTS=1 until its margin is measured (issue 18)",
    ),
]

ITERATIONS = 6
# Dev success points at iteration 6 over iteration 0; provisional (issue 18): runs so far gained more by iteration 3.
MIN_GAIN = 0.15


def test_shortened_demo_raises_held_out_success(tmp_path) -> None:
    run_dir = tmp_path / "demo"
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}",
        f"run.iterations={ITERATIONS}", "eval.every_n_iterations=3", "logging.wandb_mode=disabled",
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1"}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    success = {int(r["eval/iteration"]): r["eval/success_rate"] for r in rows if "eval/success_rate" in r}
    assert sorted(success) == [0, 3, 6], success
    assert success[ITERATIONS] - success[0] >= MIN_GAIN, success
