"""Every command of the README's Training section is run by a test: here, or (where it trains) by the test
named in COMMANDS. Commands that need GPUs run as dry runs (`run.dry_run=true`): the launcher starts its
processes, the config composes and the resource plan is built and printed once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACCELERATE = str(Path(sys.executable).parent / "accelerate")

# README command -> the test that runs it (shortened to a few iterations where it trains)
COMMANDS = {
    "accelerate launch --config_file conf/accelerate/fsdp2_4gpu.yaml loop_agents/train.py experiment=appworld_loop_32b": "tests/test_readme_commands.py::test_accelerate_presets_launch_and_build_the_plan[fsdp2_4gpu]",
    "python -m loop_agents.train experiment=demo algorithm=grpo env.concurrency=8 --cfg job": "tests/test_readme_commands.py::test_cfg_job_command",
    "python -m loop_agents.train experiment=demo": "tests/orchestration/test_train_loop.py::test_train_is_killed_after_iteration_2_and_resumes_at_3",
    "torchrun --nproc-per-node 2 loop_agents/train.py experiment=demo": "tests/orchestration/test_launchers.py::test_torchrun_two_ranks_killed_after_iteration_2_resumes_to_the_replayed_weights",
    "accelerate launch --cpu --num_processes 1 loop_agents/train.py experiment=demo": "tests/orchestration/test_launchers.py::test_accelerate_launch_cpu_one_process",
    "python -m loop_agents.train experiment=demo algorithm.max_staleness=2": "tests/orchestration/test_async_staleness.py::test_staleness_bound_is_never_exceeded_with_a_slow_learner",
    "python -m loop_agents.train experiment=demo agent.program=tests.gateway.programs:openai_tool_loop": "tests/gateway/test_program_training.py::test_openai_docs_programs_train_token_exact_through_the_gateway",
}  # fmt: skip


def _training_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Training") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_every_training_command_has_a_test():
    commands = _training_commands()
    assert commands and [c for c in commands if c not in COMMANDS] == []
    for test in COMMANDS.values():
        path, name = test.split("::")
        assert f"def {name.split('[')[0]}(" in (ROOT / path).read_text(), test


def test_every_named_config_file_exists():
    readme = (ROOT / "README.md").read_text()
    for name in re.findall(r"conf/[\w/]+\.yaml", readme):
        assert (ROOT / name).is_file(), f"README names {name}, which does not exist"


def _run(command: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_cfg_job_command():
    done = _run([sys.executable, "-m", "loop_agents.train", "experiment=demo", "algorithm=grpo",
                 "env.concurrency=8", "--cfg", "job"])  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    composed = yaml.safe_load(done.stdout)
    assert composed["algorithm"]["name"] == "grpo" and composed["env"]["concurrency"] == 8
    assert composed["run"]["name"] == "demo"


def test_gpu_preset_plan_prints_without_gpus():
    """`python -m loop_agents.train experiment=appworld_loop_32b run.dry_run=true` (README, Training)."""
    done = _run(
        [sys.executable, "-m", "loop_agents.train", "experiment=appworld_loop_32b", "run.dry_run=true"]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads(done.stdout)
    assert [r["device"] for r in plan["learner_ranks"]] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert plan["inference_servers"][0]["gpus"] == [4, 5, 6, 7] and plan["fsdp2"]


# conf/accelerate preset -> (overrides it is for, learner ranks)
PRESETS = {
    "cpu": (["experiment=demo"], 1),
    "fsdp2_1gpu": (["experiment=appworld_loop_7b_single_gpu"], 1),
    "fsdp2_4gpu": (["experiment=appworld_loop_32b"], 4),
    "fsdp2_8gpu": (["experiment=appworld_loop_32b", "gpu_allocation=eight_gpu_colocated"], 8),
}


def test_every_accelerate_preset_is_tested():
    assert sorted(p.stem for p in (ROOT / "conf" / "accelerate").glob("*.yaml")) == sorted(PRESETS)


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_accelerate_presets_launch_and_build_the_plan(preset):
    overrides, ranks = PRESETS[preset]
    config = yaml.safe_load((ROOT / "conf" / "accelerate" / f"{preset}.yaml").read_text())
    assert config["num_processes"] == ranks
    done = _run([ACCELERATE, "launch", "--config_file", f"conf/accelerate/{preset}.yaml", "loop_agents/train.py",
                 *overrides, "run.dry_run=true"], timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads(done.stdout)  # one plan: only rank 0 prints it
    assert len(plan["learner_ranks"]) == ranks


@pytest.mark.slow
def test_accelerate_with_the_wrong_number_of_processes_stops_with_one_line():
    done = _run([ACCELERATE, "launch", "--config_file", "conf/accelerate/fsdp2_4gpu.yaml", "loop_agents/train.py",
                 "experiment=appworld_loop_32b", "gpu_allocation=one_learn_one_infer", "run.dry_run=true"],
                timeout=600)  # fmt: skip
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if line.startswith("config error:")]
    # every rank that gets there before the launcher stops it says the same line
    assert ours and set(ours) == {
        "config error: launched with WORLD_SIZE=4 processes but gpu_allocation=one_learn_one_infer has 1 learner "
        "GPUs [0]; launch 1 processes (conf/accelerate/fsdp2_1gpu.yaml) or pick another gpu_allocation preset"
    }
    assert done.stderr.splitlines()[0] == ours[0]  # before the launcher's own report


@pytest.mark.slow  # builds the tiny model and runs SFT (~1 minute on 2 busy cores)
def test_sft_warm_start_script(tmp_path):
    """`python scripts/sft_warm_start.py experiment=demo run.dir=DIR --eval-tasks N` (docs/getting-started.md, Scripts), shortened:
    16 demonstrations, 1 epoch, 2 sampled dev episodes; the warm model it writes is what a run in DIR reuses."""
    done = _run([sys.executable, "scripts/sft_warm_start.py", "experiment=demo", f"run.dir={tmp_path}",
                 "env.options.demo_count=16", "learner.sft_epochs=1", "--eval-tasks", "2", "--p-optimal", "2"])  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["warm_model"] == str(tmp_path / "warm_model") and report["dev"]["tasks"] == 2
    assert 0.0 <= report["p_optimal_dev_episode"] <= 1.0 and 0.0 <= report["dev"]["success"] <= 1.0
    assert (tmp_path / "warm_model" / "config.json").is_file()
