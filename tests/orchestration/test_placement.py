"""Every experiment's resource plan builds without GPUs (the dry run), with the right placement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.config.load import CONF_DIR, compose
from loop_agents.orchestration.placement import plan

EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_plans(experiment: str) -> None:
    p = plan(compose([f"experiment={experiment}"]))
    assert p["learner_ranks"] and p["inference_servers"]


def test_paper_setup_places_four_learners_and_one_tp4_server() -> None:
    p = plan(compose(["experiment=appworld_loop_32b"]))
    assert [r["device"] for r in p["learner_ranks"]] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert p["fsdp2"] and p["activation_checkpointing"]
    assert p["inference_servers"] == [
        {
            "gpus": [4, 5, 6, 7],
            "tensor_parallel": 4,
            "gpu_memory_utilization": 0.9,
            "sleeps_while_learning": False,
        }
    ]
    assert p["rollouts_per_iteration"] == 240


def test_single_gpu_time_shares_and_colocated_splits_memory() -> None:
    single = plan(compose(["experiment=appworld_loop_7b_single_gpu"]))
    assert single["mode"] == "exclusive" and single["inference_servers"][0]["sleeps_while_learning"]
    colocated = plan(compose(["gpu_allocation=colocated_single_gpu"]))
    assert colocated["inference_servers"][0]["gpu_memory_utilization"] == pytest.approx(35 / 80, abs=1e-3)


def test_dry_run_cli_prints_the_plan_without_gpus() -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", "experiment=appworld_loop_32b", "run.dry_run=true"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["inference_servers"][0]["tensor_parallel"] == 4
