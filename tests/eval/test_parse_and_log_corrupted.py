"""parse_and_log on corrupted inputs: one line naming the file (and task), exit code 2, nothing appended.

Real files: an AppWorld data root built by scripts/build_appworld_data.py (no server is started; each file is
read before AppWorld's evaluator would run) and a trajectories .jsonl cut in the middle of a line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loop_agents.eval.parse_and_log import main
from loop_agents.rollout.trajectory import Trajectory, save_trajectories
from tests.envs.appworld.conftest import build_root

EXPERIMENT = "corrupted_outputs"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _run(args: list[str], tmp_path: Path, capsys) -> str:
    results = tmp_path / "results.jsonl"
    with pytest.raises(SystemExit) as exit_info:
        main([*args, f"results_file={results}", "wandb=disabled"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("parse_and_log: error: ") and err.count("\n") == 1, err
    assert not results.exists()
    return err


def test_truncated_trajectory_line_names_the_file_and_line(tmp_path, capsys):
    path = tmp_path / "iter_000003.jsonl"
    trajectories = [
        Trajectory(task_id=f"t{i}", group_id=f"eval/t{i}", reward=1.0, success=True) for i in range(3)
    ]
    save_trajectories(path, trajectories)
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:40])  # a writer killed mid-line
    err = _run([f"experiment={path}"], tmp_path, capsys)
    assert f"{path}:3: not a trajectory (JSONDecodeError" in err


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    from loop_agents.envs.appworld.config import DEFAULT_PYTHON

    if not DEFAULT_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    root = tmp_path_factory.mktemp("corrupt_root")
    build_root(root, seed=0, sizes="train=1,dev=1,test_normal=0,test_challenge=0")
    return root


@pytest.mark.parametrize(
    ("relative", "remedy"),
    [
        ("data/tasks/{task}/specs.json", "restore the AppWorld data"),
        ("data/tasks/{task}/ground_truth/answer.json", "restore the AppWorld data"),
        ("data/tasks/{task}/ground_truth/metadata.json", "restore the AppWorld data"),
        ("experiments/outputs/{experiment}/tasks/{task}/dbs/admin.jsonl", "delete the task's outputs"),
    ],
)
@pytest.mark.slow  # builds an AppWorld data root in the AppWorld venv
def test_corrupted_task_file_names_the_task_and_the_file(data_root, relative, remedy, tmp_path, capsys):
    from loop_agents.envs.appworld.splits import split_task_ids

    root = tmp_path / "root"
    shutil.copytree(data_root, root, symlinks=True)
    task = split_task_ids(root, "dev")[1]
    outputs = root / "experiments" / "outputs" / EXPERIMENT / "tasks" / task / "dbs"
    outputs.mkdir(parents=True)
    shutil.copy(root / "data" / "tasks" / task / "dbs" / "admin.jsonl", outputs / "admin.jsonl")
    broken = root / relative.format(task=task, experiment=EXPERIMENT)
    _truncate(broken)
    err = _run([f"experiment={EXPERIMENT}", "split=dev", f"appworld_root={root}"], tmp_path, capsys)
    assert f"task {task}: {broken} is corrupted (line " in err and remedy in err
