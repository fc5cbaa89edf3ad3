"""One training run against a real OpenEnv URL server (strict_app.py, OpenEnv's own server code) that fails twice:

- killed for 45 s after iteration 1: the episodes that meet the dead server wait for it (doubling backoff, bounded
  by rollout.server_recovery_timeout_s) and the run goes on; iterations 2 and 3 finish every episode, and the agent
  reads the schema's rejections of its too-long actions as observations while it trains;
- replaced after iteration 3 by a server whose every step hangs: each step ends at rollout.env_timeout_s, the
  episodes are lost as env_timeout, and the run stops at iteration 4 with one line naming the cause (exit 3)
  instead of hanging, and with no iteration line for the iteration that lost its work.
The run is the smallest that shows it (2 tasks x 2 rollouts, no evaluator); most of its minutes are vLLM's start on
CPU and the 45 s outage.
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


def train_command(url: str, run_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "loop_agents.train", "env=openenv", f"env.options.url={url}", "env.options.tasks=seeds",
        "env.options.action_field=guess", f"run.dir={run_dir}", "run.iterations=5", "algorithm.tasks_per_iteration=2",
        "algorithm.rollouts_per_task=2", "algorithm.minibatch_size=4", "llm.max_new_tokens=6", "env.concurrency=4",
        "env.turn_schedule.max_turns=3", "eval.enabled=false", "rollout.env_timeout_s=3", "rollout.episode_retries=1",
        "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false", "learner.stress_test=false",
    ]  # fmt: skip


def read_until(run: subprocess.Popen, prefix: str, lines: list[str]) -> None:
    for line in run.stdout:
        lines.append(line.rstrip())
        if line.startswith(prefix):
            return
    raise AssertionError(f"the run ended before {prefix!r}:\n" + "\n".join(lines[-60:]))


def test_a_server_gone_for_45_s_is_waited_for_and_a_hung_step_stops_the_run_in_one_line(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    run_dir = tmp_path / "run"
    server = start_strict_server(port)
    environ = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    run = subprocess.Popen(train_command(url, run_dir), cwd=ROOT, env=environ, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    lines: list[str] = []
    try:
        read_until(run, "[iter 1/5]", lines)
        server.kill()  # iteration 2's episodes meet no server
        server.wait()
        time.sleep(45)
        server = start_strict_server(port)
        read_until(run, "[iter 3/5]", lines)
        server.kill()
        server.wait()
        server = start_strict_server(
            port, STRICT_HANG_STEP="1", STRICT_MAX_LENGTH="10000"
        )  # every action stepped
        out, _ = run.communicate(timeout=600)
        lines += out.splitlines()
    finally:
        run.kill()
        server.kill()
    text = "\n".join(lines)
    assert run.returncode == PERMANENT, text[-4000:]
    assert f"[openenv] server {url} does not answer; waiting up to 300 s" in text
    assert f"[openenv] server {url} answers again after" in text
    iteration_lines = [line for line in lines if line.startswith("[iter ")]
    assert [line[:10] for line in iteration_lines] == ["[iter 1/5]", "[iter 2/5]", "[iter 3/5]"], (
        iteration_lines
    )
    assert all(line.endswith("| lost 0") for line in iteration_lines), iteration_lines
    stopped = [line for line in lines if line.startswith("run stopped, work lost:")]
    assert len(stopped) == 1 and stopped[0].startswith(
        "run stopped, work lost: iteration 4 lost 4 (4 env_timeout) of 4 episodes: no episode finished; "
        "last env_timeout: step timed out after 3.0 s. Fix the cause and run the same command: it resumes from "
        "checkpoint-3 (iteration 4)"
    ), stopped

    rows = [json.loads(r) for r in (run_dir / "metrics.jsonl").read_text().splitlines() if r.strip()]
    collected = [r for r in rows if "collect/finished" in r]
    assert [(r["iteration"], r["collect/finished"], r["collect/lost"]) for r in collected] == [
        (1, 4, 0), (2, 4, 0), (3, 4, 0)
    ]  # fmt: skip
    assert (
        collected[1]["collect/retried"] >= 1 and collected[1]["collect/backoff_s"] > 30
    )  # it waited, then went on
    assert any(r.get("learn/loss") is not None for r in collected)  # it trained
    turns = [
        turn["observation_text"]
        for path in sorted((run_dir / "rollouts").glob("iter_*.jsonl"))
        for episode in map(json.loads, path.read_text().splitlines())
        for turn in episode["turns"]
    ]
    rejections = [
        t for t in turns if t.startswith("Invalid action, rejected by the environment: guess: String")
    ]
    assert rejections and len(rejections) < len(turns), (len(rejections), len(turns))
