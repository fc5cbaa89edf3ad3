"""Checkpoints record what they hold (manifest.json: size and sha256 of each file, written last) and a damaged
one is named by its file: a checkpoint written by the real Learner, then truncated, edited, emptied or
stripped of a file (loop_agents/learner/manifest.py). `verify_adapter` is what scripts/evaluate.py calls
before it starts a server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from loop_agents.learner.manifest import MANIFEST, verify_adapter, verify_directory
from tests.learner.batch import learner_config, loop_algorithm, make_batch


@pytest.fixture(scope="module")
def written(tiny_model_dir, tmp_path_factory) -> Path:
    learner = Learner(learner_config(tiny_model_dir, epochs=1), loop_algorithm())
    batch = make_batch(seed=0)
    compute_advantages(batch, loop_algorithm())
    learner.train_iteration(batch)
    return learner.save_checkpoint(tmp_path_factory.mktemp("run") / "checkpoint-1", {"iteration": 1})


@pytest.fixture
def checkpoint(written, tmp_path) -> Path:
    copy = tmp_path / "checkpoint-1"
    shutil.copytree(written, copy)
    return copy


def test_the_manifest_lists_every_file_and_is_written_before_done(checkpoint: Path) -> None:
    recorded = json.loads((checkpoint / MANIFEST).read_text())["files"]
    on_disk = {p.relative_to(checkpoint).as_posix() for p in checkpoint.rglob("*") if p.is_file()}
    assert set(recorded) == on_disk - {MANIFEST, "done"}
    assert {"adapter/adapter_model.safetensors", "trainable.safetensors", "optimizer.pt"} <= set(recorded)
    assert recorded["optimizer.pt"]["size"] == (checkpoint / "optimizer.pt").stat().st_size
    assert verify_directory(checkpoint) is None
    assert verify_adapter(checkpoint / "adapter") is None


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("name", "damage", "says"),
    [
        ("adapter/adapter_model.safetensors", _truncate, "bytes, {size} when written"),
        ("trainable.safetensors", _truncate, "bytes, {size} when written"),
        ("optimizer.pt", _flip_last_byte, "differs from what was written (sha256 mismatch)"),
        ("extra_state.pt", Path.unlink, "is missing"),
        ("learner_state.json", lambda p: p.write_text(""), "has 0 bytes, {size} when written"),
    ],
)
def test_a_damaged_file_is_named(checkpoint: Path, name: str, damage, says: str) -> None:
    size = (checkpoint / name).stat().st_size
    damage(checkpoint / name)
    problem = verify_directory(checkpoint)
    assert problem is not None and problem.startswith(str(checkpoint / name))
    assert problem.endswith(says.format(size=size))


def test_adapter_check_names_the_bad_file(checkpoint: Path) -> None:
    """In its checkpoint (the checkpoint's manifest) and copied elsewhere without one (its structure)."""
    adapter = checkpoint / "adapter"
    loose = shutil.copytree(adapter, checkpoint.parent / "start_adapter")
    for directory in (adapter, loose):
        _truncate(directory / "adapter_model.safetensors")
        with pytest.raises(ValueError) as info:
            verify_adapter(directory)
        message = str(info.value)
        assert message.startswith(
            f"adapter {directory} is damaged: {directory / 'adapter_model.safetensors'}"
        )
        assert "\n" not in message
    (loose / "adapter_config.json").unlink()
    with pytest.raises(ValueError, match=f"{loose / 'adapter_config.json'} is missing"):
        verify_adapter(loose)


def test_a_checkpoint_from_before_manifests_is_checked_by_structure(checkpoint: Path) -> None:
    (checkpoint / MANIFEST).unlink()
    assert verify_directory(checkpoint) is None
    _truncate(checkpoint / "trainable.safetensors")
    problem = verify_directory(checkpoint)
    assert problem.startswith(f"{checkpoint / 'trainable.safetensors'} is truncated")
