"""parse_and_log on real AppWorld outputs (episodes played on real env servers, scored by AppWorld's own
evaluator), on saved trajectories, and its errors. Expected TGC/SGC are worked out by hand below."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.eval.parse_and_log import main
from loop_agents.eval.results_file import read_results
from loop_agents.rollout.trajectory import Trajectory, save_trajectories
from tests.envs.appworld.conftest import build_root

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = "h3_parse_mix"
SPLIT = "h3mix"


def _scenario(root: Path, template: str) -> str:
    manifest = json.loads((root / "data" / "loop_agents_manifest.json").read_text())
    return next(s["scenario_id"] for s in manifest["scenarios"] if s["template"] == template)


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> dict:
    """Split h3mix = scenario A (note_count_tag, difficulty 1) + scenario B (note_delete_tagged, difficulty 2).

    Played on real servers under experiment h3_parse_mix: A_1..A_3 solved, B_1 and B_2 solved, B_3 a no-op.
    By hand: TGC = 5/6; SGC = 1/2 (B has a failing task); difficulty 1: TGC 3/3, SGC 1/1;
    difficulty 2: TGC 2/3, SGC 0/1 (2 of 3 tasks pass -> the scenario does not count).
    """
    from loop_agents.envs.appworld.config import DEFAULT_PYTHON, AppWorldConfig
    from loop_agents.envs.appworld.task_source import AppWorldTaskSource

    if not DEFAULT_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    root = tmp_path_factory.mktemp("h3_appworld_root")
    build_root(root, seed=0, sizes="train=8,dev=1,test_normal=0,test_challenge=0")
    a, b = _scenario(root, "note_count_tag"), _scenario(root, "note_delete_tagged")
    tasks = [f"{a}_1", f"{a}_2", f"{a}_3", f"{b}_1", f"{b}_2", f"{b}_3"]
    (root / "data" / "datasets" / f"{SPLIT}.txt").write_text("\n".join(tasks) + "\n")

    def solution(task_id: str) -> str:
        return (root / "data" / "tasks" / task_id / "ground_truth" / "solution.py").read_text()

    cells = {t: solution(t) for t in tasks[:5]} | {tasks[5]: "apis.supervisor.complete_task()"}

    async def play_all() -> dict[str, bool]:
        source = AppWorldTaskSource(AppWorldConfig(root=str(root), pool_size=2, max_interactions=4))
        await source.start()
        try:

            async def one(task_id: str) -> bool:
                env = await source.make_env(EXPERIMENT)
                try:
                    await env.reset(task_id)
                    await env.step(cells[task_id])
                    return (await env.evaluate()).success
                finally:
                    await env.close()

            return dict(zip(tasks, await asyncio.gather(*map(one, tasks)), strict=True))
        finally:
            await source.close()

    successes = asyncio.run(play_all())
    assert successes == {t: t != tasks[5] for t in tasks}  # the in-episode scores agree with the plan
    return {"root": root, "tasks": tasks, "a": a, "b": b}


def _check_hand_values(record: dict) -> None:
    assert record["TGC"] == pytest.approx(5 / 6) and record["SGC"] == pytest.approx(1 / 2)
    assert record["TGC_1"] == 1.0 and record["SGC_1"] == 1.0
    assert record["TGC_2"] == pytest.approx(2 / 3) and record["SGC_2"] == 0.0
    assert record["num_tasks"] == 6 and record["num_scenarios"] == 2
    assert record["num_tasks_1"] == 3 and record["num_tasks_2"] == 3


@pytest.mark.slow
def test_official_scores_of_a_named_experiment(played, tmp_path, capsys):
    results = tmp_path / "all_results.jsonl"
    main([f"experiment={EXPERIMENT}", f"split={SPLIT}", f"appworld_root={played['root']}",
          f"results_file={results}", "model=scripted"])  # fmt: skip
    out = capsys.readouterr().out
    (record,) = read_results(results)
    _check_hand_values(record)
    assert record["source"] == "appworld_official" and record["model"] == "scripted"
    assert record["experiment"] == EXPERIMENT and record["split"] == SPLIT and record["run"] == 0
    # AppWorld's own aggregate (percent, rounded by AppWorld) agrees with ours
    assert record["appworld_task_goal_completion"] == pytest.approx(83.3, abs=0.05)
    assert record["appworld_scenario_goal_completion"] == pytest.approx(50.0)
    table = out[out.index("TGC") :]
    assert "aggregate" in table and "83.3" in table and "50.0" in table and "66.7" in table
    assert "difficulty_1" in table and "difficulty_2" in table
    assert list((tmp_path / "wandb").rglob("*.wandb")), "offline wandb run files"
    official = (
        played["root"] / "experiments/outputs" / EXPERIMENT / "evaluations" / f"{SPLIT}.loop_agents.json"
    )
    per_task = json.loads(official.read_text())["per_task"]
    assert {t: r["success"] for t, r in per_task.items()} == {
        t: t != played["tasks"][5] for t in played["tasks"]
    }


@pytest.mark.slow
def test_experiment_dir_from_elsewhere_is_scored_against_the_data_root(played, tmp_path, capsys):
    """Another agent's outputs (copied outside APPWORLD_ROOT) score the same; the copy is left intact."""
    copy = tmp_path / "other_agent" / "their_experiment"
    shutil.copytree(played["root"] / "experiments/outputs" / EXPERIMENT, copy, symlinks=True)
    shutil.rmtree(copy / "evaluations", ignore_errors=True)
    results = tmp_path / "results.jsonl"
    main([f"experiment={copy}", f"split={SPLIT}", f"appworld_root={played['root']}",
          f"results_file={results}", "wandb=disabled"])  # fmt: skip
    (record,) = read_results(results)
    _check_hand_values(record)
    assert record["experiment"] == "their_experiment"
    assert sorted(p.name for p in (copy / "tasks").iterdir()) == sorted(played["tasks"])
    assert (copy / "evaluations" / f"{SPLIT}.loop_agents.json").is_file()
    assert not (played["root"] / "experiments/outputs/their_experiment").exists()
    assert not (tmp_path / "wandb").exists()


def _traj(task_id: str, run: int, success: bool, difficulty: int) -> Trajectory:
    return Trajectory(
        task_id=task_id, group_id=f"eval/{task_id}", sample_index=run, reward=float(success), success=success,
        reward_details={"difficulty": difficulty, "experiment_name": f"exp_run{run}"},
    )  # fmt: skip


def test_trajectories_give_one_line_per_run(tmp_path, capsys):
    """Run 0: a_1 a_2 b_1 pass, b_2 fails -> TGC 3/4, SGC 1/2. Run 1: all pass -> 1, 1. Mean 7/8, 3/4."""
    path = tmp_path / "iter_000004.jsonl"
    run0 = [
        _traj("a_1", 0, True, 1),
        _traj("a_2", 0, True, 1),
        _traj("b_1", 0, True, 2),
        _traj("b_2", 0, False, 2),
    ]
    run1 = [_traj(t.task_id, 1, True, t.reward_details["difficulty"]) for t in run0]
    save_trajectories(path, run0 + run1)
    results = tmp_path / "r.jsonl"
    main([f"experiment={path}", "split=dev", f"results_file={results}", "wandb=disabled"])
    first, second = read_results(results)
    assert (first["run"], first["TGC"], first["SGC"]) == (0, 0.75, 0.5)
    assert (first["TGC_2"], first["SGC_2"], first["TGC_1"]) == (0.5, 0.0, 1.0)
    assert (second["run"], second["TGC"], second["SGC"]) == (1, 1.0, 1.0)
    assert first["source"] == "trajectories" and first["behaviour/num_trajectories"] == 4.0
    out = capsys.readouterr().out
    assert "mean over 2 runs" in out and "87.5 ± 17.7" in out  # std of (75, 100)
    assert out.splitlines()[-1].startswith(
        f"[parse_and_log] {first['experiment']} on dev: TGC 0.875 SGC 0.750 (± "
    )
    # without AppWorld's evaluation details each task is its own scenario (SGC == TGC)
    for traj in run0:
        traj.reward_details = {"difficulty": traj.reward_details["difficulty"]}
    save_trajectories(path, run0)
    main([f"experiment={path}", f"results_file={results}", "wandb=disabled"])
    third = read_results(results)[2]
    assert third["TGC"] == third["SGC"] == 0.75 and third["split"] == "unknown"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "experiment= is required"),
        (["experiment=no_such_experiment", "split=dev"], "no AppWorld experiment"),
        (["experiment=/no/such/dir", "split=dev"], "no such file or directory"),
        (["experiment=x", "wandb=loud"], "wandb='loud'"),
        (["experiment=x", "scenarios=some"], "scenarios='some'"),
        (["experiment=x", "stray"], "unexpected argument 'stray'"),
        (["experiment=x", "env=appworld"], "unexpected argument 'env=appworld'"),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*args, f"appworld_root={tmp_path}", f"results_file={tmp_path / 'r.jsonl'}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("parse_and_log: error: ") and message in err and err.count("\n") == 1


@pytest.mark.slow
def test_bad_appworld_inputs(played, tmp_path, capsys):
    root = played["root"]
    outputs = root / "experiments/outputs" / EXPERIMENT
    cases = [
        ([f"experiment={EXPERIMENT}"], "split= is required"),
        ([f"experiment={EXPERIMENT}", "split=nope"], "unknown AppWorld split 'nope'"),
        ([f"experiment={EXPERIMENT}", "split=train"], "has no outputs for"),  # never played on train
        ([f"experiment={outputs}", "split=nope"], "unknown AppWorld split 'nope'"),
        ([f"experiment={tmp_path}", "split=dev"], "neither AppWorld experiment outputs"),
    ]
    for args, message in cases:
        with pytest.raises(SystemExit):
            main([*args, f"appworld_root={root}", f"results_file={tmp_path / 'r.jsonl'}", "wandb=disabled"])
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (args, err)
    assert not (tmp_path / "r.jsonl").exists()


def test_console_script_entry(tmp_path):
    """`python scripts/parse_and_log.py` runs the same main (help text and exit code 2 on bad input)."""
    script = REPO / "scripts" / "parse_and_log.py"
    helped = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert helped.returncode == 0 and "experiment=" in helped.stdout
    bad = subprocess.run([sys.executable, str(script), "experiment=/no/such"], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("parse_and_log: error: experiment=/no/such")
