"""Checkpoint faults: a full disk or an unwritable run directory at save time, a corrupted checkpoint and one
saved from a different base model at load time. Each gives one clear error naming the path; the previous
checkpoint stays intact and loadable, and a failed load changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner, latest_complete_checkpoint
from loop_agents.learner.checkpoint import CheckpointError, is_complete
from loop_agents.tiny_model import TinyModelSpec, build_tiny_model
from tests.learner.batch import learner_config, loop_algorithm, make_batch

REPO = Path(__file__).resolve().parents[2]


def _learner(model_dir: str, steps: int = 1) -> Learner:
    learner = Learner(learner_config(model_dir, epochs=1), loop_algorithm())
    for seed in range(steps):
        batch = make_batch(seed=seed)
        compute_advantages(batch, loop_algorithm())
        learner.train_iteration(batch)
    return learner


@pytest.fixture
def saved(tiny_model_dir, tmp_path):
    """A learner after one step and its run dir holding checkpoint-1."""
    learner = _learner(tiny_model_dir)
    learner.save_checkpoint(tmp_path / "checkpoint-1", {"iteration": 1})
    return learner, tmp_path


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@contextmanager
def _unwritable(directory: Path):
    """Make `directory` unwritable for this process. Root ignores permission bits, so as root the
    directory is made immutable (chattr +i, which stops root too)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a directory unwritable")
        if subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode != 0:
            pytest.skip("this file system does not support chattr +i")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
    else:
        mode = directory.stat().st_mode
        directory.chmod(0o500)
        try:
            yield
        finally:
            directory.chmod(mode)


@pytest.mark.slow  # worker processes
def test_full_disk_at_checkpoint_time(tiny_model_dir, tmp_path):
    """A real failed write (RLIMIT_FSIZE: EFBIG from the kernel, as ENOSPC on a full disk) in a subprocess."""
    run_dir, out = tmp_path / "run", tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.learner.full_disk_worker", tiny_model_dir, str(run_dir), str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    error = result["error"]
    assert error is not None, "checkpoint-2 was written although its largest file could not be"
    assert error.startswith(f"could not write checkpoint {run_dir / 'checkpoint-2'}: File too large")
    assert "nothing was committed" in error
    assert f"the previous checkpoint {run_dir / 'checkpoint-1'} is intact" in error
    assert "\n" not in error
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint-1"]  # no checkpoint-2, no temp dir
    assert latest_complete_checkpoint(run_dir) == run_dir / "checkpoint-1"
    assert result["extra"] == {"iteration": 1} and result["same"]


@pytest.mark.slow  # worker processes
def test_full_disk_on_one_of_two_ranks_fails_every_rank_without_a_hang(tiny_model_dir, tmp_path):
    """Rank 0 cannot write (RLIMIT_FSIZE), rank 1 can: both raise at the same step instead of rank 1 waiting
    forever in a barrier for rank 0 (2 gloo ranks under torchrun; a hang fails the subprocess timeout)."""
    run_dir, out = tmp_path / "run", tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone"]
    proc = subprocess.run(
        [*cmd, "-m", "tests.learner.full_disk_worker", tiny_model_dir, str(run_dir), str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rank0, rank1 = (json.loads((tmp_path / f"result.rank{r}.json").read_text()) for r in (0, 1))
    prefix = f"could not write checkpoint {run_dir / 'checkpoint-2'}: "
    assert rank0["error"].startswith(prefix + "File too large")
    assert rank1["error"].startswith(prefix + "the write failed on rank(s) [0]")
    for result in (rank0, rank1):
        assert f"the previous checkpoint {run_dir / 'checkpoint-1'} is intact" in result["error"]
        assert result["extra"] == {"iteration": 1} and result["same"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint-1"]


def _checkpoint_loop(model_dir: str, run_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.learner.checkpoint_loop_worker", model_dir, str(run_dir)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow  # worker processes
def test_sigkill_in_the_middle_of_a_checkpoint_write_resumes_from_the_last_complete_one(
    tiny_model_dir, tmp_path
):
    """A process saving checkpoints back to back is SIGKILLed the moment a temp dir exists (a write in progress),
    up to 5 times: each restart resumes from the newest complete checkpoint, whose extra state says which one it
    is; the half-written directory is never picked and is cleaned by the next save."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    mid_write = 0
    for _ in range(5):
        worker = _checkpoint_loop(tiny_model_dir, run_dir)
        assert worker.stdout.readline(), "the worker died before its first checkpoint"
        while not any(p.name.endswith(".tmp") for p in run_dir.iterdir()):
            assert worker.poll() is None
        worker.kill()
        worker.wait()
        worker.stdout.close()
        mid_write += any(p.name.endswith(".tmp") for p in run_dir.iterdir())
        latest = latest_complete_checkpoint(run_dir)
        index = int(latest.name.removeprefix("checkpoint-"))
        assert Learner(learner_config(tiny_model_dir, epochs=1), loop_algorithm()).load_checkpoint(
            latest
        ) == {"index": index}
        if mid_write:
            break
    assert mid_write, "no kill landed inside a checkpoint write in 5 tries"
    # the next run rewrites the half-written checkpoint's name over its stale temp dir
    worker = _checkpoint_loop(tiny_model_dir, run_dir)
    first = worker.stdout.readline()
    worker.kill()
    worker.wait()
    worker.stdout.close()
    assert int(first) == index + 1 and is_complete(run_dir / f"checkpoint-{index + 1}")


def test_unwritable_run_directory_at_checkpoint_time(saved):
    learner, run_dir = saved
    before = learner.trainable_state()
    with _unwritable(run_dir):
        with pytest.raises(CheckpointError) as info:
            learner.save_checkpoint(run_dir / "checkpoint-2", {"iteration": 2})
    message = str(info.value)
    reason = "Operation not permitted" if os.geteuid() == 0 else "Permission denied"
    assert message.startswith(f"could not write checkpoint {run_dir / 'checkpoint-2'}: {reason}")
    assert str(run_dir / ".checkpoint-2.tmp") in message  # the path the OS refused
    assert f"the previous checkpoint {run_dir / 'checkpoint-1'} is intact" in message
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint-1"]
    assert learner.load_checkpoint(run_dir / "checkpoint-1") == {"iteration": 1}
    learner.save_checkpoint(run_dir / "checkpoint-2", {"iteration": 2})  # writable again: saving works
    assert is_complete(run_dir / "checkpoint-2") and _same(learner.trainable_state(), before)


@pytest.mark.parametrize(
    "name,damage",
    [
        ("trainable.safetensors", lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])),
        ("optimizer.pt", lambda p: p.write_bytes(b"not a torch file")),
        ("learner_state.json", lambda p: p.write_text('{"iteration": ')),
        ("extra_state.pt", lambda p: p.unlink()),
    ],
)
def test_corrupted_checkpoint_names_the_file_and_changes_nothing(saved, tiny_model_dir, name, damage):
    learner, run_dir = saved
    checkpoint = run_dir / "checkpoint-1"
    damage(checkpoint / name)
    fresh = _learner(tiny_model_dir, steps=0)
    before = fresh.trainable_state()
    with pytest.raises(CheckpointError) as info:
        fresh.load_checkpoint(checkpoint)
    message = str(info.value)
    assert message.startswith(f"checkpoint {checkpoint} is corrupted: {name} cannot be read (")
    assert message.endswith(f"delete {checkpoint} to resume from the checkpoint before it")
    assert _same(fresh.trainable_state(), before) and fresh.iteration == 0


def test_checkpoint_from_a_different_base_model_is_refused(saved, tmp_path_factory):
    learner, run_dir = saved
    other = str(build_tiny_model(tmp_path_factory.mktemp("tiny_h32"), TinyModelSpec(hidden_size=32)))
    fresh = _learner(other, steps=0)
    before = fresh.trainable_state()
    with pytest.raises(CheckpointError) as info:
        fresh.load_checkpoint(run_dir / "checkpoint-1")
    message = str(info.value)
    assert message.startswith(f"checkpoint {run_dir / 'checkpoint-1'} does not fit the model: ")
    assert "has shape (4, 64) in the checkpoint but (4, 32) in the model" in message
    assert f"(saved from base model {learner.cfg.model_path}: a different base model" in message
    assert _same(fresh.trainable_state(), before)
