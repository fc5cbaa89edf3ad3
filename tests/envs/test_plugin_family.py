"""A family a third-party package adds by entry point works everywhere, with no edit under `loop_agents/`.

The test writes a throwaway copy of `examples/guess_number_env` under a fresh name to a temporary folder, installs
it into the venv with pip, trains two iterations with `env=<its name>`, evaluates the checkpoint with
`scripts/evaluate.py`, renders the run in the viewer, and uninstalls it. `git grep` finds the name nowhere under
`loop_agents/`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _throwaway_package(tmp_path: Path, name: str) -> Path:
    """`examples/guess_number_env` with its package, distribution and family renamed to `name`."""
    package = tmp_path / f"{name}_src"
    shutil.copytree(
        ROOT / "examples" / "guess_number_env", package, ignore=shutil.ignore_patterns("*.egg-info")
    )
    (package / "guess_number_env").rename(package / f"{name}_env")
    for path in [package / "pyproject.toml", *(package / f"{name}_env").glob("*.py")]:
        text = path.read_text().replace("guess_number_env", f"{name}_env").replace("guess_number", name)
        path.write_text(text.replace("loop-agents-guess-number", f"loop-agents-{name}"))
    return package


def _run(*command: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{command[:4]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def test_an_installed_family_trains_evaluates_and_renders(tmp_path):
    name = f"throwaway_{uuid.uuid4().hex[:8]}"
    package = _throwaway_package(tmp_path, name)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(package)]
    _run(*pip, timeout=300)
    try:
        run_dir = tmp_path / "run"
        _run(
            sys.executable, "-m", "loop_agents.train", f"env={name}", f"run.dir={run_dir}", "run.iterations=2",
            "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=2", "algorithm.minibatch_size=4",
            "llm.max_new_tokens=8", "env.options.max_guesses=3", "env.turn_schedule.max_turns=3",
            "eval.max_tasks=3", "eval.every_n_iterations=2", "eval.held_out_tasks=0",
            "logging.wandb_mode=disabled", "learner.stress_test=false",
            timeout=900,
        )  # fmt: skip
        rows = [
            json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()
        ]
        assert [r["iteration"] for r in rows if "rollout/reward_mean" in r] == [1, 2]
        assert any("eval/success_rate" in r for r in rows)

        out = tmp_path / "evaluation"
        _run(
            sys.executable, "scripts/evaluate.py", f"checkpoint={run_dir}", "max_tasks=3", f"out={out}",
            timeout=900,
        )  # fmt: skip
        report = json.loads((out / "metrics.json").read_text())
        assert report["env"] == name and report["num_tasks"] == 3 and not any(report["missing"].values())

        _run(sys.executable, "-m", "loop_agents.view", str(run_dir), timeout=300)
        index = (run_dir / "viewer" / "index.html").read_text()
        assert "guess the number" in index  # the family's label, asked of the registry by the viewer
    finally:
        subprocess.run(
            [sys.executable, "-m", "pip", "uninstall", "-q", "-y", f"loop-agents-{name}"], check=False
        )
    mentions = subprocess.run(
        ["git", "grep", "-l", name, "--", "loop_agents/"], cwd=ROOT, capture_output=True
    )
    assert mentions.stdout == b""
