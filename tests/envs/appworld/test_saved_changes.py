"""The tamper check parses (issue 48): honest gmail, amazon and splitwise episodes, whose saved statements name
`has_attachments` and whose values say "see attached", "vacuum", "pragma", "detach", score exactly as AppWorld's
own evaluator scores them, in the episode and through `parse_and_log`; forged statements are still refused."""

from __future__ import annotations

import json
import os
import re
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


# one forged record per kind the earlier attacks did not play through an entry point, one per task (app): a copy,
# a write to a full-text index's shadow table, two statements that are each an allowed row change alone
FORGED_IN_OUTPUTS = {
    "gmail_send_attached": ("gmail", "VACUUM INTO '/tmp/gmail_copy.db'"),
    "amazon_cart_vacuum": ("amazon", "INSERT INTO products_fts_data VALUES (99, x'00')"),
    "splitwise_expense_attached": ("splitwise", "DELETE FROM expenses WHERE id = 1; DELETE FROM payments WHERE id = 1"),
}  # fmt: skip


def appworld_own_evaluation(root, experiment: str, task_ids: list[str]) -> dict:
    """AppWorld's `evaluate_tasks` run directly in its venv on the outputs, with none of our code: no sandbox, no
    signature, no saved-state check."""
    code = (
        "import json, sys\nfrom appworld.evaluator import evaluate_tasks\n"
        f"r = evaluate_tasks(task_ids={task_ids!r}, experiment_name={experiment!r}, save_reports=False)\n"
        "print('@@' + json.dumps(r, default=str))"
    )
    env = dict(os.environ, APPWORLD_ROOT=str(root))
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(DEFAULT_PYTHON), "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("@@"))[2:])


def test_parse_and_log_scores_honest_episodes_as_appworld_and_refuses_forged_records(
    task_source, run, attachment_tasks, appworld_root, tmp_path
):
    """Two solved episodes and a partially solved one (gmail: the email sent with a wrong subject, 1 of 2 tests),
    through the `parse_and_log` entry point: per task the same success and tests passed as AppWorld's own
    evaluation, the same TGC and SGC, nothing refused as tampered. Then the same outputs with one forged record
    each (trust_unsigned=true, as for another agent's outputs): every task refused as tampered, none replayed."""
    from loop_agents.eval.parse_and_log import parse_and_log

    gmail = attachment_tasks["gmail_send_attached"]
    wrong = re.sub(r"subject='[^']*'", "subject='Re: see attached'", solution(task_source, gmail))
    assert wrong != solution(task_source, gmail)
    cells = {task: [solution(task_source, task)] for task in attachment_tasks.values()} | {gmail: [wrong]}
    episodes = {}  # task -> (success, tests passed, tests) in the episode
    for task_id, task_cells in cells.items():
        _, _, evaluation = run(play(task_source, task_id, task_cells, experiment_name="attachments_mixed"))
        tests = evaluation.details["tests"]
        episodes[task_id] = (evaluation.success, sum(t["passed"] for t in tests), len(tests))
        assert "episode_ended" not in evaluation.details, evaluation.details
    assert episodes[gmail] == (False, 1, 2) and sorted(episodes.values())[1:] == [(True, 2, 2)] * 2, episodes
    (appworld_root / "data" / "datasets" / "attachments_mixed.txt").write_text(
        "".join(f"{t}\n" for t in cells)
    )

    def logged(experiment: str, trust_unsigned: str) -> tuple[dict, dict]:
        """(parse_and_log's record, the per-task scores it wrote beside the outputs)."""
        done = parse_and_log({"experiment": experiment, "split": "attachments_mixed", "wandb": "disabled",
                              "appworld_root": str(appworld_root), "trust_unsigned": trust_unsigned,
                              "results_file": str(tmp_path / "results.jsonl")})  # fmt: skip
        outputs = appworld_root / "experiments" / "outputs" / experiment
        written = json.loads((outputs / "evaluations" / "attachments_mixed.loop_agents.json").read_text())
        assert done["scores"][0].extra["per_task_success"] == {
            t: s["success"] for t, s in written["per_task"].items()
        }
        return done["records"][0], written["per_task"]

    record, per_task = logged("attachments_mixed", "false")
    appworld = appworld_own_evaluation(appworld_root, "attachments_mixed", list(cells))
    for task_id, (success, passed, total) in episodes.items():
        own = appworld["individual"][task_id]
        assert (own["success"], len(own["passes"]), own["num_tests"]) == (success, passed, total), own
        scored = per_task[task_id]
        assert (scored["success"], scored["num_passed"], scored["num_tests"]) == (success, passed, total), (
            scored
        )
        assert "tampered" not in scored
    aggregate = appworld["aggregate"]
    assert round(100 * record["TGC"], 1) == aggregate["task_goal_completion"] == 66.7, (record, aggregate)
    assert round(100 * record["SGC"], 1) == aggregate["scenario_goal_completion"] == 66.7

    outputs = appworld_root / "experiments" / "outputs"
    shutil.copytree(outputs / "attachments_mixed", outputs / "attachments_forged", ignore=shutil.ignore_patterns("evaluations"))  # fmt: skip
    for template, (app, statement) in FORGED_IN_OUTPUTS.items():
        dbs = outputs / "attachments_forged" / "tasks" / attachment_tasks[template] / "dbs"
        with (dbs / f"{app}.jsonl").open("a") as changes:
            changes.write(json.dumps([statement, [], False]) + "\n")
    record, per_task = logged("attachments_forged", "true")
    assert record["TGC"] == record["SGC"] == 0.0, record
    for template, (app, statement) in FORGED_IN_OUTPUTS.items():
        scored = per_task[attachment_tasks[template]]
        assert not scored["success"] and scored["num_passed"] == 0, scored
        assert (
            scored["tampered"].startswith(f"{app}.jsonl:")
            and statement.split("'")[0].strip() in scored["tampered"]
        ), scored
