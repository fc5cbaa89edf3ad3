"""Failures the same command cannot fix stop before Ray or vLLM start (loop_agents/preflight.py, finished_run.py):
real `python -m loop_agents.train` processes, each asserted to exit 2 within 10 s with exactly one line naming the
key and the fix, and never to be restarted by the supervisor (no `[supervisor]` line, nothing else printed). A
finished run's rerun says so in one line, exits 0 and leaves every file as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from loop_agents.ports import free_port
from tests.train_command import with_own_run_dir

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 10.0


def _train(
    *overrides: str, env: dict[str, str] | None = None, preset: str = "experiment=demo"
) -> tuple[subprocess.CompletedProcess, float]:
    overrides = with_own_run_dir(overrides)
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", preset, *overrides],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, time.monotonic() - began


def _one_line_exit_2(done: subprocess.CompletedProcess, seconds: float) -> str:
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines  # one line; no traceback, no supervisor restart
    assert seconds < LIMIT_S, f"took {seconds:.1f} s"
    return lines[0]


def test_run_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    line = _one_line_exit_2(*_train(f"run.dir={target}"))
    assert line == (
        f"run directory error: run.dir={target} is a file, not a directory; choose another run.dir or move the "
        "file away"
    )
    assert target.read_text() == "mine\n"


def test_run_dir_inside_a_file(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    line = _one_line_exit_2(*_train(f"run.dir={target / 'run'}"))
    assert line.startswith(
        f"run directory error: run.dir={target / 'run'} is inside {target}, which is a file"
    )


@contextmanager
def _read_only(directory: Path):
    """Root ignores permission bits: as root the directory is made immutable (chattr +i)."""
    if os.geteuid() != 0:
        directory.chmod(0o500)
        try:
            yield
        finally:
            directory.chmod(0o700)
        return
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: cannot make a directory read-only")
    if subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode != 0:
        pytest.skip("this file system does not support chattr +i")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_read_only_run_dir_with_a_run_in_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"iteration": 0}\n')
    with _read_only(run):
        line = _one_line_exit_2(*_train(f"run.dir={run}"))
    assert line.startswith(f"run directory error: run.dir={run} is not writable (")
    assert line.endswith("; choose another run.dir or make it writable")
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]
    assert (run / "metrics.jsonl").read_text() == '{"iteration": 0}\n'


def test_hub_model_not_in_the_cache_offline(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    line = _one_line_exit_2(
        *_train("llm.model_path=Qwen/NoSuchModel-0.5B", f"run.dir={tmp_path / 'run'}", env=env)
    )
    assert line == (
        "config error: llm.model_path=Qwen/NoSuchModel-0.5B is not a local directory and not in the Hugging Face "
        "cache, and HF_HUB_OFFLINE is set; download it where there is network (huggingface-cli download "
        "Qwen/NoSuchModel-0.5B) or set llm.model_path to a local model directory"
    )
    assert not (tmp_path / "run").exists()


def test_hub_model_not_in_the_cache_asks_the_hub_once(tmp_path: Path) -> None:
    """Without HF_HUB_OFFLINE: one lookup (no network here: it fails at once; with one, the hub has no such
    model), never the 5 retries and traceback of a download."""
    env = {"HF_HOME": str(tmp_path / "hf")}
    line = _one_line_exit_2(
        *_train("llm.model_path=Qwen/NoSuchModel-0.5B", f"run.dir={tmp_path / 'run'}", env=env)
    )
    assert line.startswith(
        "config error: llm.model_path=Qwen/NoSuchModel-0.5B is not a local directory and not in the Hugging Face "
        "cache, and the hub "
    )


def test_hub_model_in_the_cache_passes(tmp_path: Path) -> None:
    from loop_agents.preflight import model_problem

    snapshot = tmp_path / "hub" / "models--Org--Cached" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--Org--Cached" / "refs").mkdir()
    (tmp_path / "hub" / "models--Org--Cached" / "refs" / "main").write_text("0" * 40)
    code = (
        "import sys; from loop_agents.preflight import model_problem; "
        "print(model_problem('Org/Cached')); print(model_problem('Org/Missing'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.splitlines()
    assert out[0] == "None" and out[1].startswith("config error: llm.model_path=Org/Missing is not")
    assert model_problem("tiny") is None


def test_local_model_dir_without_config(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    line = _one_line_exit_2(*_train(f"llm.model_path={tmp_path / 'model'}", f"run.dir={tmp_path / 'run'}"))
    assert line == (
        f"config error: llm.model_path={tmp_path / 'model'} is not a model directory (no config.json); point it "
        "at a Hugging Face model folder"
    )


def test_agentgym_server_that_refuses_connections(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = _train(f"env.options.url={url}", f"run.dir={tmp_path / 'run'}", preset="env=agentgym_http")
    line = _one_line_exit_2(*done)
    assert line == (
        f"env error: env.options.url={url} is not reachable (Connection refused); start the environment's server "
        "there or fix env.options.url"
    )


def test_ray_cluster_that_is_not_there(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    line = _one_line_exit_2(*_train(f"ray.address={address}", f"run.dir={tmp_path / 'run'}"))
    assert line == (
        f"ray error: ray.address={address} is not reachable (Connection refused); start the Ray head there "
        "(ray start --head) or set ray.address='' to start a local one"
    )


@pytest.mark.parametrize("rank", ["0", "1"])
def test_launch_world_size_unlike_the_plan_is_said_by_every_rank(rank: str, tmp_path: Path) -> None:
    """A rank other than 0 prints the line too: a launcher kills the others when the first one exits, so the
    line must not wait for rank 0 (issue 40: it appeared in 1 of 2 tries)."""
    env = {"WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank}
    line = _one_line_exit_2(
        *_train("gpu_allocation=one_learn_one_infer", f"run.dir={tmp_path / 'run'}", env=env)
    )
    assert line == (
        "config error: launched with WORLD_SIZE=2 processes but gpu_allocation=one_learn_one_infer has 1 learner "
        "GPUs [0]; launch 1 processes (conf/accelerate/fsdp2_1gpu.yaml) or pick another gpu_allocation preset"
    )


@pytest.mark.slow  # launches two ranks
def test_launch_world_size_unlike_the_plan_under_torchrun() -> None:
    """torchrun with 2 processes for a 1-learner GPU plan: the line comes from the rank that got there first
    (torchrun may stop the other before it prints), each rank exits 2; torchrun's own exit status is 1 for
    any failed worker, its report names the exitcode."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
         "loop_agents/train.py", "experiment=demo", "gpu_allocation=one_learn_one_infer"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert time.monotonic() - began < LIMIT_S + 10  # torchrun's own start-up included
    line = (
        "config error: launched with WORLD_SIZE=2 processes but gpu_allocation=one_learn_one_infer has 1 learner "
        "GPUs [0]; launch 1 processes (conf/accelerate/fsdp2_1gpu.yaml) or pick another gpu_allocation preset"
    )
    ours = [x for x in done.stderr.splitlines() if x.startswith("config error:")]
    assert ours and set(ours) == {line}
    assert done.returncode != 0 and "(exitcode: 2)" in done.stderr


def _finished_run(run: Path, iterations: int) -> dict[str, bytes]:
    """A run directory as a finished run leaves it (the files this test checks are left alone)."""
    for i in (iterations - 1, iterations):
        (run / "checkpoints" / f"checkpoint-{i}").mkdir(parents=True)
        (run / "checkpoints" / f"checkpoint-{i}" / "done").write_text("ok\n")
    rows = [{"iteration": i, "rollout/count": 4} for i in range(iterations + 1)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "summary.json").write_text(json.dumps({"lines": ["held-out: 0.5"], "held_out": {"x": 1}}))
    return {str(p): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_rerunning_a_finished_run_says_so_and_changes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    before = _finished_run(run, 3)
    mtimes = {p: Path(p).stat().st_mtime_ns for p in before}
    done, seconds = _train(f"run.dir={run}", "run.iterations=3")
    assert done.returncode == 0 and seconds < LIMIT_S, done.stderr[-3000:]
    assert done.stdout.strip().splitlines() == [
        f"run {run} already finished (checkpoint-3, run.iterations=3; results in {run / 'summary.json'}); nothing "
        "was changed. Set run.iterations above 3 to continue it"
    ]
    assert done.stderr == ""
    after = {str(p): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    assert after == before and {p: Path(p).stat().st_mtime_ns for p in after} == mtimes


def test_more_iterations_continue_a_finished_run(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from loop_agents.finished_run import finished_line

    run = tmp_path / "run"
    _finished_run(run, 3)
    assert finished_line(OmegaConf.create({"run": {"dir": str(run), "iterations": 3}})) is not None
    assert finished_line(OmegaConf.create({"run": {"dir": str(run), "iterations": 4}})) is None
    (run / "summary.json").unlink()  # killed during the held-out evaluation: not finished
    assert finished_line(OmegaConf.create({"run": {"dir": str(run), "iterations": 3}})) is None


def _compose(*overrides: str):
    from loop_agents.config.load import compose_or_exit

    return compose_or_exit(["experiment=demo", *overrides])


@pytest.mark.parametrize(
    ("argv", "count"),
    [
        (["/v/bin/python", "/v/bin/accelerate", "launch", "--cpu", "--num_processes", "2", "-m", "x"], 2),
        (["/v/bin/python", "/v/bin/accelerate", "launch", "--cpu", "--num-processes=3", "x.py"], 3),
        (["python", "-m", "accelerate.commands.launch", "--num_processes", "4", "x.py"], 4),
        (["/v/bin/python", "/v/bin/accelerate", "launch", "--cpu", "x.py", "a=1"], 1),
        (["accelerate", "launch", "--config_file", "conf/accelerate/fsdp2_4gpu.yaml", "x"], 4),
        (["/v/bin/python", "-m", "loop_agents.train", "experiment=demo"], None),  # the supervisor's child
        ([], None),
    ],
)
def test_accelerate_requested_processes(argv: list[str], count: int | None) -> None:
    from loop_agents.config.launch import accelerate_requested_processes

    assert accelerate_requested_processes(argv) == count


def test_accelerate_one_process_launch_unlike_the_request() -> None:
    """accelerate's simple launcher (--cpu, or no GPU) starts one process whatever --num_processes says."""
    from loop_agents.config.launch import check_world_size
    from loop_agents.config.validate import ConfigError

    argv = ["/v/bin/python", "/v/bin/accelerate", "launch", "--cpu", "--num_processes", "2", "-m", "x"]
    simple = {"ACCELERATE_USE_CPU": "True"}
    with pytest.raises(ConfigError, match=r"accelerate started 1 process .*torchrun --nproc-per-node 2"):
        check_world_size(_compose(), simple, argv)
    with pytest.raises(ConfigError, match=r"single_gpu has 1 learner GPUs \[0\]: launch 1 processes"):
        check_world_size(_compose("gpu_allocation=single_gpu"), simple, argv)
    check_world_size(_compose(), simple, [*argv[:4], "--num_processes", "1", "x"])  # what the README runs
    check_world_size(_compose(), {}, argv)  # not accelerate's simple launcher: torchrun's checks apply
    check_world_size(_compose(), {**simple, "WORLD_SIZE": "2"}, argv)  # several processes (multi-GPU path)


@pytest.mark.slow  # starts accelerate (its start-up imports torch) and the training process
def test_accelerate_cpu_two_processes_for_one_learner_is_one_line_exit_2(tmp_path: Path) -> None:
    """`accelerate launch --cpu --num_processes 2` starts one process (issue 40: it trained on one rank without
    a word). The training process prints one line and exits 2, before Ray or vLLM; accelerate's own exit status
    is 1 for any failed child (its CalledProcessError names the child's status 2)."""
    began = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "accelerate"), "launch", "--cpu", "--num_processes", "2",
         "-m", "loop_agents.train", "experiment=demo", f"run.dir={tmp_path / 'run'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    ours = [x for x in done.stderr.splitlines() if x.startswith("config error:")]
    assert ours == [
        "config error: launched with accelerate launch --cpu --num_processes 2, but accelerate started 1 process (on "
        "CPU it starts one and sets no WORLD_SIZE); for 2 CPU learner ranks use torchrun --nproc-per-node 2 "
        "loop_agents/train.py ..., or launch with --num_processes 1"
    ], done.stderr[-3000:]
    assert done.returncode != 0 and "returned non-zero exit status 2." in done.stderr
    assert not (tmp_path / "run").exists()  # nothing started, nothing written
    assert time.monotonic() - began < 120  # accelerate's and the child's imports on a loaded machine
