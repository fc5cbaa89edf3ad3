"""The offline data builder writes a valid, deterministic AppWorld data root."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON, REPO_ROOT
from loop_agents.envs.appworld.splits import available_splits, split_task_ids, task_difficulty
from tests.envs.appworld.conftest import SMALL_SIZES, build_root

pytestmark = pytest.mark.slow  # builds AppWorld data and runs its engine in the AppWorld venv


def test_layout_splits_and_tests(appworld_root):
    data = appworld_root / "data"
    assert available_splits(appworld_root) == ["dev", "test_challenge", "test_normal", "train"]
    assert sorted(p.stem for p in (data / "base_dbs").glob("*.db")) == sorted(
        "admin api_docs supervisor amazon phone file_system spotify venmo gmail splitwise simple_note todoist".split()
    )
    assert len(list((data / "api_docs" / "standard").glob("*.json"))) == 11
    train = split_task_ids(appworld_root, "train")
    assert len(train) == 24 and all(t.rsplit("_", 1)[1] in "123" for t in train)
    all_ids = [t for s in available_splits(appworld_root) for t in split_task_ids(appworld_root, s)]
    assert len(all_ids) == len(set(all_ids)) == 36
    assert {task_difficulty(appworld_root, t) for t in all_ids} == {1, 2, 3}
    manifest = json.loads((data / "loop_agents_manifest.json").read_text())
    apps = set()
    for scenario in manifest["scenarios"]:
        apps.update(scenario["template"].split("_")[:1])
    assert {"note", "todoist", "venmo", "spotify", "notes"} <= apps  # 4 apps + cross-app family
    for task_id in all_ids:
        truth = data / "tasks" / task_id / "ground_truth"
        tests = json.loads((truth / "test_data.json").read_text())
        assert len(tests) >= 2
        source = (truth / "evaluation.py").read_text()
        assert all(f'with test("""{t["requirement"]}"""' in source for t in tests)
        specs = json.loads((data / "tasks" / task_id / "specs.json").read_text())
        assert specs["db_version"] == "0.1.0" and set(specs["supervisor"]) == {
            "first_name", "last_name", "email", "phone_number"
        }  # fmt: skip


def test_deterministic_for_a_seed(appworld_root, tmp_path):
    """A second build (fewer scenarios) writes byte-identical files for the shared tasks."""
    other = tmp_path / "again"
    build_root(other, seed=0, sizes="train=2")
    shared = split_task_ids(other, "train")
    assert shared == split_task_ids(appworld_root, "train")[:6]
    for task_id in shared:
        for path in sorted((other / "data" / "tasks" / task_id).rglob("*")):
            if path.is_file():
                twin = (
                    appworld_root
                    / "data"
                    / "tasks"
                    / task_id
                    / path.relative_to(other / "data" / "tasks" / task_id)
                )
                assert path.read_bytes() == twin.read_bytes(), path
    assert (other / "data/base_dbs/todoist.db").read_bytes() == (
        appworld_root / "data/base_dbs/todoist.db"
    ).read_bytes()


def test_every_solution_passes_and_noop_fails_in_the_engine(appworld_root):
    """Runs each challenge/dev/test task's ground-truth solution and a no-op in the real engine."""
    ids = [t for s in ("dev", "test_normal", "test_challenge") for t in split_task_ids(appworld_root, s)]
    ids += split_task_ids(appworld_root, "train")[::3]  # one variant of every train scenario
    _assert_solutions_pass(appworld_root, ids)


def _assert_solutions_pass(root: Path, ids: list[str]) -> None:
    """Each task's ground-truth solution passes all its tests in the real engine and a no-op does not."""
    code = (
        "import sys, json; from pathlib import Path\n"
        "from loop_agents.envs.appworld.data_builder.verify import check_tasks\n"
        "root = Path(sys.argv[1]); ids = json.loads(sys.argv[2])\n"
        "print(json.dumps([[c.task_id, c.ok, c.solution_passes, c.solution_tests, c.noop_passes] "
        "for c in check_tasks(root, ids)]))\n"
    )
    done = subprocess.run(
        [str(DEFAULT_PYTHON), "-c", code, str(root), json.dumps(ids)],
        capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    bad = [r for r in results if not r[1]]
    assert not bad, bad


# The extra parts of issue 39 on top of the fixture's classic sizes: dev's held-out scenario, the hard tier.
EXTRA_SIZES = SMALL_SIZES + ",dev_held_out=1,train_hard=1,dev_hard=7,dev_hard_held_out=1"


@pytest.fixture(scope="module")
def extended_root(tmp_path_factory, appworld_root) -> Path:
    root = tmp_path_factory.mktemp("appworld_extended")
    build_root(root, seed=0, sizes=EXTRA_SIZES)
    return root


def test_extra_parts_leave_the_classic_tasks_unchanged(appworld_root, extended_root):
    """The held-out and hard parts are planned after the classic splits: every classic task keeps its id and
    bytes, and the held-out dev ids sort after the classic ones (the evaluator's selection stays the same)."""
    for split in ("train", "test_normal", "test_challenge"):
        assert split_task_ids(extended_root, split) == split_task_ids(appworld_root, split)
    classic_dev = split_task_ids(appworld_root, "dev")
    dev = split_task_ids(extended_root, "dev")
    assert dev[: len(classic_dev)] == classic_dev and len(dev) == len(classic_dev) + 3
    assert sorted(dev)[: len(classic_dev)] == sorted(classic_dev)
    for task_id in [*split_task_ids(appworld_root, "train"), *classic_dev]:
        for path in sorted((appworld_root / "data" / "tasks" / task_id).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:  # the engine's import of evaluation.py
                twin = extended_root / path.relative_to(appworld_root)
                assert path.read_bytes() == twin.read_bytes(), path
    hard_dev = split_task_ids(extended_root, "dev_hard")
    assert len(hard_dev) == 24 and all(t.startswith("x") for t in sorted(hard_dev)[21:])
    assert not any(t.startswith("x") for t in sorted(hard_dev)[:21])


def test_hard_tier_has_every_hard_family_and_no_demonstration(extended_root):
    from loop_agents.envs.appworld.data_builder.templates.hard import HARD_TEMPLATE_NAMES
    from loop_agents.envs.appworld.demos.episodes import plan_episodes, scenario_families
    from loop_agents.envs.appworld.demos.scripted import SCRIPTS
    from loop_agents.envs.appworld.splits import scenario_of

    families = scenario_families(extended_root)
    hard_dev = {families[scenario_of(t)] for t in split_task_ids(extended_root, "dev_hard")}
    assert hard_dev == HARD_TEMPLATE_NAMES and not HARD_TEMPLATE_NAMES & set(SCRIPTS)
    # the hard preset's train split plays the same scripted episodes as `train`: the same warm start
    assert plan_episodes(extended_root, "train_and_train_hard", 0, read=True) == plan_episodes(
        extended_root, "train", 0, read=True
    )


def test_extra_solutions_pass_and_noops_fail_in_the_engine(appworld_root, extended_root):
    classic = set(split_task_ids(appworld_root, "dev"))
    ids = [
        t
        for s in ("dev", "train_hard", "dev_hard")
        for t in split_task_ids(extended_root, s)
        if t not in classic
    ]
    _assert_solutions_pass(extended_root, ids)
