"""Episodes on real AppWorld servers: rewards, error observations, crashes, loopback-only sockets."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time

import psutil
import pytest

from loop_agents.envs.appworld.official_eval import run_official_evaluation
from loop_agents.rollout.environment import EnvironmentFailure
from tests.envs.appworld.conftest import TIMINGS

pytestmark = pytest.mark.slow  # a pool of AppWorld servers


def solution(source, task_id: str) -> str:
    return (source.config.root_path / "data/tasks" / task_id / "ground_truth/solution.py").read_text()


def template_tasks(source, template: str) -> list[str]:
    import json

    manifest = json.loads((source.config.root_path / "data/loop_agents_manifest.json").read_text())
    scenarios = [s["scenario_id"] for s in manifest["scenarios"] if s["template"] == template]
    return [f"{scenarios[0]}_{n}" for n in (1, 2, 3)]


async def play(source, task_id: str, cells: list[str], experiment_name: str | None = None):
    env = await source.make_env(experiment_name)
    try:
        reset = await env.reset(task_id)
        steps = []
        for cell in cells:
            began = time.monotonic()
            steps.append(await env.step(cell))
            TIMINGS.setdefault("step_s", []).append(round(time.monotonic() - began, 3))
            if steps[-1].done:
                break
        return reset, steps, await env.evaluate()
    finally:
        await env.close()


def test_reset_info_and_correct_solution_scores_one(task_source, run):
    task_id = template_tasks(task_source, "note_delete_tagged")[0]
    reset, steps, evaluation = run(play(task_source, task_id, [solution(task_source, task_id)]))
    info = reset.info
    assert (
        reset.observation == info["instruction"] and "Delete all my Simple Note notes" in info["instruction"]
    )
    assert set(info["supervisor"]) == {"first_name", "last_name", "email", "phone_number"}
    assert info["difficulty"] == 2 and info["scenario_id"] == task_id.split("_")[0]
    assert "simple_note" in info["app_descriptions"] and info["datetime"].startswith("2023-")
    assert steps[-1].done and steps[-1].info["task_completed"]
    assert evaluation.reward == 1.0 and evaluation.success
    assert evaluation.details["num_tests"] == 4 and all(t["passed"] for t in evaluation.details["tests"])


def test_wrong_answer_wrong_state_and_noop_get_partial_credit(task_source, run):
    count_task = template_tasks(task_source, "note_count_tag")[0]
    *_, wrong_answer = run(play(task_source, count_task, ["apis.supervisor.complete_task(answer=999)"]))
    assert wrong_answer.reward == 0.5 and not wrong_answer.success  # 1 of 2: no changes passes
    failed = [t["requirement"] for t in wrong_answer.details["tests"] if not t["passed"]]
    assert failed == ["assert answers match."]

    delete_task = template_tasks(task_source, "note_delete_tagged")[1]
    wrong_state = (
        solution(task_source, delete_task).replace("apis.supervisor.complete_task()", "")
        + "\nfor n in notes[:1]:\n"
        "    apis.simple_note.update_note(note_id=n['note_id'], access_token=simple_note_token, title='Changed')\n"
        "apis.supervisor.complete_task()"
    )
    *_, state = run(play(task_source, delete_task, [wrong_state]))
    failed = {t["requirement"] for t in state.details["tests"] if not t["passed"]}
    assert failed == {"assert no notes were added or updated."} and state.reward == 0.75

    *_, noop = run(play(task_source, delete_task, ["apis.supervisor.complete_task()"]))
    failed = {t["requirement"] for t in noop.details["tests"] if not t["passed"]}
    assert failed == {"assert exactly the notes with the tag created before the date were removed."}
    assert 0 < noop.reward < 1 and not noop.success


def test_bad_code_gives_error_observations_and_the_server_stays_usable(task_source, run):
    task_id = template_tasks(task_source, "note_count_tag")[1]
    marker = "/tmp/loop_agents_appworld_escape_marker"
    cells = [
        "def broken(:\n    pass",
        "raise ValueError('boom')",
        f"import os\nos.system('touch {marker}')",
        f"__import__('os').system('touch {marker}')",
        "import socket",
        "while True:\n    pass",
        solution(task_source, task_id),
    ]
    began = time.monotonic()
    _, steps, evaluation = run(play(task_source, task_id, cells))
    outputs = [s.observation for s in steps]
    assert outputs[0].startswith("Execution failed") and "Syntax error" in outputs[0]
    assert "ValueError: boom" in outputs[1]
    assert "not allowed: os.system" in outputs[2]
    assert "not allowed" in outputs[4]
    assert "timed out after 3 seconds" in outputs[5]
    assert not os.path.exists(marker)
    assert evaluation.success and time.monotonic() - began < 60


def test_megabyte_print_ends_the_episode_as_a_failed_attempt_and_the_host_stays(task_source, run):
    """The host's channel cap ends the episode (output_too_large), scored on the state its calls left (none: the
    no-op's 1 of 2); the host itself is not recycled."""
    recycled = task_source.pool.stats.recycled
    task_id = template_tasks(task_source, "note_count_tag")[2]
    env = run(task_source.make_env())
    run(env.reset(task_id))
    step = run(env.step("print('x' * 6_000_000)"))
    assert step.done and step.info["error"] == "output_too_large"
    evaluation = run(env.evaluate())
    assert evaluation.reward == 0.5 and evaluation.details["episode_ended"] == "output_too_large"
    run(env.close())
    assert task_source.pool.stats.recycled == recycled
    _, _, evaluation = run(play(task_source, task_id, [solution(task_source, task_id)]))  # pool still serves
    assert evaluation.success


def test_killed_server_mid_episode_is_recycled_and_the_episode_retried(task_source, run):
    """4 concurrent episodes on 4 servers; SIGKILL one server between reset and step."""
    tasks = (
        template_tasks(task_source, "todoist_complete_due")
        + template_tasks(task_source, "venmo_pay_friend")[:1]
    )

    async def episode(task_id: str, victim: bool):
        env = await task_source.make_env()
        try:
            await env.reset(task_id)
            if victim:
                os.killpg(env._server.process.pid, signal.SIGKILL)
                await asyncio.sleep(0.2)
            await env.step(solution(task_source, task_id))
            return await env.evaluate()
        finally:
            await env.close()

    async def scenario():
        return await asyncio.wait_for(
            asyncio.gather(*(episode(t, i == 0) for i, t in enumerate(tasks)), return_exceptions=True),
            timeout=120,
        )

    results = run(scenario())
    assert isinstance(results[0], EnvironmentFailure)
    assert all(r.success for r in results[1:])
    retried = run(asyncio.wait_for(episode(tasks[0], False), timeout=120))  # on a fresh server
    assert retried.success and retried.reward == 1.0


def test_servers_listen_on_loopback_only(task_source, run):
    run(task_source.pool.settle())  # replacements of recycled servers are up
    pids = {s.process.pid for s in task_source.pool.servers if s.alive()}
    assert len(pids) == 4
    listening = []
    for pid in pids:
        proc = psutil.Process(pid)
        for child in [proc, *proc.children(recursive=True)]:
            listening += [
                c.laddr for c in child.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
            ]
    assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening
    assert sorted(addr.port for addr in listening) == task_source.pool.ports


def test_split_errors(task_source):
    with pytest.raises(ValueError, match="unknown AppWorld split 'nope'"):
        task_source.task_ids("nope")
    train = task_source.task_ids("train")
    with pytest.raises(ValueError, match="not in split 'dev'"):
        task_source.check_in_split(train[0], "dev")
    d1 = task_source.task_ids("train_difficulty_1")
    assert d1 and all(task_source.difficulty(t) == 1 for t in d1)
    assert task_source.task_ids("dev_and_test_normal") == task_source.task_ids("dev") + task_source.task_ids(
        "test_normal"
    )
    empty = task_source.config.root_path / "data/datasets/empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="has no tasks"):
        task_source.task_ids("empty")
    empty.unlink()


def test_official_evaluation_over_saved_outputs(task_source, run):
    """Named experiment: dev solved, scored by AppWorld's evaluator in a fresh process."""
    experiment = "loop_agents_test_official"
    dev = task_source.task_ids("dev")
    for n, task_id in enumerate(dev):
        cells = [solution(task_source, task_id)] if n < 2 else ["apis.supervisor.complete_task()"]
        run(play(task_source, task_id, cells, experiment_name=experiment))
    result = run_official_evaluation(experiment, "dev", task_source.config)
    assert result.metrics["aggregate"]["tgc"] == pytest.approx(200 / 3)
    assert result.metrics["aggregate"]["sgc"] == 0.0
    assert result.appworld_aggregate["task_goal_completion"] == pytest.approx(66.7)
    assert [result.per_task[t]["success"] for t in dev] == [True, True, False]
    subprocess.run(["true"], check=True)
