"""Fault injection at the writer layer: a training process that checkpoints and logs like the driver is
SIGKILLed at 22 random points of its checkpoint and metrics writes (a torn metrics row among them), and every
killed state, resumed to the end, holds exactly the reference run's metrics rows (each iteration once, the
same values) and its final weights: nothing lost, nothing duplicated (tests/learner/resume_fault_worker.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from loop_agents.learner import latest_complete_checkpoint

REPO = Path(__file__).resolve().parents[2]
ITERATIONS, KILLS, MAX_AT = 6, 22, 24  # ~16 writes an iteration: a kill lands within 1.5 iterations


def _final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    latest = latest_complete_checkpoint(run_dir / "checkpoints")
    assert latest is not None and latest.name == f"checkpoint-{ITERATIONS}", latest
    return load_file(latest / "trainable.safetensors")


@pytest.mark.slow  # one worker process forking ~50 attempts: ~30 s of CPU
@pytest.mark.parametrize("seed", [0])
def test_kills_during_checkpoint_and_metrics_writes_lose_and_repeat_nothing(tiny_model_dir, tmp_path, seed):
    done = subprocess.run(
        [sys.executable, "-m", "tests.learner.resume_fault_worker", tiny_model_dir, str(tmp_path),
         str(ITERATIONS), str(KILLS), str(seed), str(MAX_AT)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    attempts = [json.loads(line) for line in done.stdout.splitlines()]
    reference = tmp_path / "reference"
    expected = (reference / "metrics.jsonl").read_text()
    assert [json.loads(r)["iteration"] for r in expected.splitlines()] == list(range(1, ITERATIONS + 1))
    weights = _final_weights(reference)

    kills = [a for a in attempts if a["kill_at"] is not None and a["ended"] == "signal 9"]
    assert len(kills) >= 20 and all(a["said"] for a in kills)
    points = [a["said"] for a in kills]
    assert any("checkpoints/" in p for p in points) and any("metrics.jsonl" in p for p in points), points
    assert any(p.endswith("(torn row)") for p in points), points  # a kill in the middle of a row
    assert len({p.split(" ", 1)[1] for p in points}) >= 10, points  # spread over many different writes
    branches = [a for a in attempts if Path(a["run_dir"]).name.startswith("branch")]
    assert len(branches) == len(kills)
    for branch in branches:
        run_dir = Path(branch["run_dir"])
        assert branch["ended"] == "exit 0", branch
        assert (run_dir / "metrics.jsonl").read_text() == expected, branch  # every row once, same values
        final = _final_weights(run_dir)
        assert final.keys() == weights.keys() and all(torch.equal(final[k], weights[k]) for k in final), (
            branch
        )
    unexpected = [a for a in attempts if a["ended"] not in ("exit 0", "signal 9")]
    assert not unexpected, unexpected
