"""Training runs against a real OpenEnv URL server (strict_app.py, OpenEnv's own server code) that fails mid-run:

- killed for 45 s after the first iteration: the episodes that meet the dead server wait for it (doubling backoff,
  bounded by rollout.server_recovery_timeout_s) and the run goes on; every iteration finishes its episodes, and the
  agent read the schema's rejections of its too-long actions as observations while it trained;
- every step hangs: each step ends at rollout.env_timeout_s, the episodes are lost as env_timeout, and the run stops
  at the first iteration with one line naming the cause (exit 3), instead of hanging.
Each run is the smallest that shows it (2 tasks x 2 rollouts, no evaluator); most of each one's minutes are vLLM's
start on CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop_agents.failures import PERMANENT
from loop_agents.ports import free_port
from tests.envs.openenv.test_openenv_faults import start_strict_server

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


def train_command(url: str, run_dir: Path, iterations: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "loop_agents.train", "env=openenv", f"env.options.url={url}", "env.options.tasks=seeds",
        "env.options.action_field=guess", f"run.dir={run_dir}", f"run.iterations={iterations}",
        "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=2", "algorithm.minibatch_size=4",
        "llm.max_new_tokens=6", "env.concurrency=4", "env.turn_schedule.max_turns=3", "eval.enabled=false",
        "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false", "learner.stress_test=false",
        *extra,
    ]  # fmt: skip


def environ() -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}


def test_a_url_server_down_for_45_s_is_waited_for_and_the_run_goes_on(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_strict_server(port)
    run = subprocess.Popen(train_command(url, tmp_path / "run", 4), cwd=ROOT, env=environ(), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    lines: list[str] = []
    try:
        for line in run.stdout:
            lines.append(line.rstrip())
            if line.startswith("[iter 1/4]"):
                break
        server.kill()  # mid-run: iteration 2's episodes meet no server
        server.wait()
        down_at = time.monotonic()
        time.sleep(45)
        server = start_strict_server(port)
        back_at = time.monotonic()
        out, _ = run.communicate(timeout=900)
        lines += out.splitlines()
    finally:
        run.kill()
        server.kill()
    text = "\n".join(lines)
    assert run.returncode == 0, text[-4000:]
    assert back_at - down_at >= 45
    assert f"[openenv] server {url} does not answer; waiting up to 300 s" in text
    assert f"[openenv] server {url} answers again after" in text
    iteration_lines = [line for line in lines if line.startswith("[iter ")]
    assert len(iteration_lines) == 4 and all(line.endswith("| lost 0") for line in iteration_lines), (
        iteration_lines
    )
    rows = [json.loads(r) for r in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if r.strip()]
    collected = [r for r in rows if "collect/finished" in r]
    assert [r["collect/finished"] for r in collected] == [4, 4, 4, 4]
    assert (
        sum(r["collect/retried"] for r in collected) >= 1
        and max(r["collect/backoff_s"] for r in collected) > 30
    )
    assert any(r.get("learn/loss") is not None for r in collected)  # it trained
    turns = [
        turn["observation_text"]
        for path in sorted((tmp_path / "run" / "rollouts").glob("iter_*.jsonl"))
        for episode in map(json.loads, path.read_text().splitlines())
        for turn in episode["turns"]
    ]
    rejections = [
        t for t in turns if t.startswith("Invalid action, rejected by the environment: guess: String")
    ]
    assert rejections and len(rejections) < len(turns), (len(rejections), len(turns))


def test_a_step_that_hangs_is_a_counted_episode_and_stops_the_run_in_one_line(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_strict_server(
        port, STRICT_HANG_STEP="1", STRICT_MAX_LENGTH="10000"
    )  # every action is stepped
    try:
        run = subprocess.run(
            train_command(url, tmp_path / "run", 2, "rollout.env_timeout_s=3", "rollout.episode_retries=1"),
            cwd=ROOT, env=environ(), capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    finally:
        server.kill()
    stopped = [line for line in run.stderr.splitlines() if line.startswith("run stopped, work lost:")]
    assert run.returncode == PERMANENT and len(stopped) == 1, (run.stdout + run.stderr)[-4000:]
    assert stopped[0].startswith(
        "run stopped, work lost: iteration 1 lost 4 (4 env_timeout) of 4 episodes: no episode finished; "
        "last env_timeout: step timed out after 3.0 s. Fix the cause and run the same command: it resumes from "
        "checkpoint-0 (iteration 1)"
    ), stopped[0]
    assert "[iter 1/2]" not in run.stdout  # no empty iteration was reported as done
