"""The tamper check parses (issue 48): honest gmail, amazon and splitwise episodes, whose saved statements name
`has_attachments` and whose values say "see attached", "vacuum", "pragma", "detach", score exactly as AppWorld's
own evaluator scores them, in the episode and through `parse_and_log`; forged statements are still refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON, REPO_ROOT
from loop_agents.envs.appworld.host.saved_changes import SavedChangesCheck
from loop_agents.envs.appworld.official_eval import run_official_evaluation
from tests.envs.appworld.test_environment import play, solution

pytestmark = pytest.mark.slow

FORGED = [
    "ATTACH DATABASE '/tmp/attached.db' AS x",  # the earlier attack's line (test_sandbox_attacks)
    "VACUUM INTO '/tmp/copy.db'",
    "PRAGMA writable_schema = 1",
    "DETACH DATABASE x",
    "DELETE FROM notes WHERE id = 1; ATTACH DATABASE '/tmp/attached.db' AS x",
    "INSERT INTO sqlite_master VALUES ('table', 't', 't', 0, '')",
    "DROP TABLE notes",
    "INSERT INTO notes_fts_data VALUES (1, x'00')",
    "UPDATE notes SET title = load_extension('/tmp/x.so') WHERE id = 1",
    "SELECT * FROM notes",
    "BEGIN",
]


@pytest.fixture(scope="module")
def attachment_tasks(appworld_root) -> dict[str, str]:
    """One gmail, one amazon and one splitwise task, written into the package's data root by the data builder."""
    code = (
        "import json, pathlib\nfrom loop_agents.envs.appworld.data_builder.templates.attachments import add_tasks\n"
        f"print(json.dumps(add_tasks(pathlib.Path({str(appworld_root)!r}))))"
    )
    env = dict(os.environ, APPWORLD_ROOT=str(appworld_root), PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(
        [str(DEFAULT_PYTHON), "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_honest_attachment_episodes_score_as_appworld(task_source, run, attachment_tasks, appworld_root):
    task_ids = list(attachment_tasks.values())
    passed = {}  # per task: (tests passed, tests) in the episode
    for task_id in task_ids:
        _, steps, evaluation = run(
            play(task_source, task_id, [solution(task_source, task_id)], experiment_name="attachments_run")
        )
        assert "Execution successful" in steps[0].observation, steps[0].observation
        assert evaluation.success and evaluation.reward == 1.0, (task_id, evaluation.details)
        assert "episode_ended" not in evaluation.details
        tests = evaluation.details["tests"]
        passed[task_id] = (sum(t["passed"] for t in tests), len(tests))
    outputs = appworld_root / "experiments" / "outputs" / "attachments_run" / "tasks"
    gmail = (outputs / attachment_tasks["gmail_send_attached"] / "dbs" / "gmail.jsonl").read_text()
    statements = [json.loads(line)[0] for line in gmail.splitlines()]
    assert any("ATTACH" in s.upper() for s in statements)  # what the word search refused as tampering
    (appworld_root / "data" / "datasets" / "attachments_probe.txt").write_text(
        "".join(f"{t}\n" for t in task_ids)
    )
    official = run_official_evaluation("attachments_run", "attachments_probe", task_source.config)
    # parse_and_log's scoring (family.official): AppWorld's evaluate_tasks, the episode's counts
    for task_id in task_ids:
        scored = official.per_task[task_id]
        assert scored["success"] and "tampered" not in scored, scored
        assert (scored["num_passed"], scored["num_tests"]) == passed[task_id], (scored, passed[task_id])


def test_forged_statements_are_refused_and_honest_ones_accepted(task_source, run, appworld_root, tmp_path):
    task_id = json.loads((appworld_root / "data/loop_agents_manifest.json").read_text())["scenarios"][0]
    task_id = f"{task_id['scenario_id']}_1"
    run(play(task_source, task_id, [solution(task_source, task_id)], experiment_name="forged_base"))
    saved = appworld_root / "experiments" / "outputs" / "forged_base" / "tasks" / task_id / "dbs"
    check = SavedChangesCheck(appworld_root, task_id)
    assert check.problem(saved) == ""
    note = [
        "UPDATE notes SET title = ? WHERE id = ?",
        ["see attached: ATTACH, PRAGMA, VACUUM, DETACH", 1],
        False,
    ]
    for statement, expected in [(note, ""), *(([s, [], False], "refused") for s in FORGED)]:
        dbs = tmp_path / "dbs"
        shutil.rmtree(dbs, ignore_errors=True)
        shutil.copytree(saved, dbs)
        with (dbs / "simple_note.jsonl").open("a") as changes:
            changes.write(json.dumps(statement) + "\n")
        problem = check.problem(dbs)
        assert (problem == "") == (expected == ""), (statement, problem)
    check.close()
