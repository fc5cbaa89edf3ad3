"""The demo's bad inputs (issue 18): one line naming the key or the directory, exit 2, nothing overwritten."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.tiny_model import TinyModelSpec, build_tiny_model
from tests.train_command import with_own_run_dir

ROOT = Path(__file__).resolve().parents[2]


def _train(*overrides: str) -> subprocess.CompletedProcess:
    overrides = with_own_run_dir(overrides)
    return subprocess.run(
        [sys.executable, "-m", "loop_agents.train", "experiment=demo", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("run.seed=abc", "config error: run.seed='abc' has the wrong type; expected Integer"),
        ("run.seed=1.5", "config error: run.seed='1.5' has the wrong type; expected Integer"),
        ("run.iterations=0", "config error: run.iterations=0 is out of range; it must be >= 1"),
        ("run.iterations=-3", "config error: run.iterations=-3 is out of range; it must be >= 1"),
    ],
)
def test_bad_run_keys_print_one_line_and_exit_2(override: str, line: str, tmp_path) -> None:
    proc = _train(override, f"run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "run").exists()


def test_a_run_directory_built_by_another_preset_is_refused(tmp_path) -> None:
    """A run dir whose tiny model has other sizes (here the 0.25 M default, the demo asks for 0.6 M)."""
    run_dir = tmp_path / "run"
    build_tiny_model(run_dir / "tiny_model", TinyModelSpec())
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (run_dir / "tiny_model").iterdir())
    proc = _train(f"run.dir={run_dir}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"run directory error: {run_dir}/tiny_model has hidden_size=64 but llm.tiny.hidden_size=128 "
        f"(built by another preset?); delete {run_dir} or choose another run.dir"
    ]
    assert sorted(p.name for p in run_dir.iterdir()) == ["tiny_model"]  # no warm model, no checkpoint
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (run_dir / "tiny_model").iterdir()) == before
