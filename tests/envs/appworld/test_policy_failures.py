"""The policy cannot veto its own episode or spend outside its budgets (issue 48), on a real episode host.

Each route is the model's code, sent through `env.step` and scored by `env.evaluate` as training does. Property:
whatever a cell does to its channel to the apps, the trusted processes keep answering, so the episode is kept
and scored on the state the API process holds (equal to an honest control that stops at the same point), never
an EnvironmentFailure; every budget holds; the next episode on the same host is unaffected; the trainer's event
loop does not stall. Conversely, a trusted process that fails (killed here from outside) is an EnvironmentFailure.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import psutil
import pytest

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.task_source import AppWorldTaskSource
from loop_agents.rollout.environment import EnvironmentFailure
from tests.envs.appworld.test_environment import play, solution, template_tasks

pytestmark = pytest.mark.slow

CALLS_PER_CELL = 30
STATE_MB = 2  # file_size_limit_mb: the saved state's cap is min(scratch, file size)
CPU_S = 2  # cpu_limit_s of the CPU budget's host: its API processes serve the policy for 0.9 * 2 CPU-s
CHANNEL = "__import__('appworld.requester', fromlist=['x']).requests.channel"
FRAMING = "__import__('loop_agents.sandbox.framing', fromlist=['x'])"


@pytest.fixture(scope="module")
def host(appworld_root, event_loop_session):
    """One host, so that the next episode surely runs on the one the attack used."""
    config = AppWorldConfig(
        root=str(appworld_root), pool_size=1, execute_timeout_s=3, grace_s=4.0,
        max_api_calls_per_interaction=CALLS_PER_CELL, file_size_limit_mb=STATE_MB,
    )  # fmt: skip
    source = AppWorldTaskSource(config)
    event_loop_session.run_until_complete(source.start())
    yield source
    event_loop_session.run_until_complete(source.close())


@pytest.fixture(scope="module")
def cpu_host(appworld_root, event_loop_session):
    """One host whose episodes get CPU_S CPU-seconds and AppWorld's own per-cell call cap (1,000), so that a few
    cells of legal calls spend the API process's budget."""
    config = AppWorldConfig(
        root=str(appworld_root), pool_size=1, execute_timeout_s=3, grace_s=4.0, cpu_limit_s=CPU_S
    )
    source = AppWorldTaskSource(config)
    event_loop_session.run_until_complete(source.start())
    yield source
    event_loop_session.run_until_complete(source.close())


def unfinished(source, task_id: str) -> str:
    """The honest solution's changes, without completing the task: a state worth part of the reward."""
    return solution(source, task_id).replace("apis.supervisor.complete_task()", "")


def api_process(env) -> psutil.Process:
    """The episode's API process: the host's first child (its evaluator fork starts after it)."""
    return sorted(psutil.Process(env._server.process.pid).children(), key=lambda p: p.create_time())[0]


def ticking(run, coroutine):
    """(the coroutine's result, the longest gap of a 10 ms ticker on the same loop meanwhile)."""

    async def measured():
        gaps, stop = [], asyncio.Event()

        async def ticker():
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        tick = asyncio.create_task(ticker())
        try:
            return await coroutine, max(gaps, default=0.0)
        finally:
            stop.set()
            await tick

    return run(measured())


def assert_kept(source, run, task_id: str, attacked, honest_cells: list[str], cause: str | None) -> None:
    """Scored like the honest control, named by cause, and the same host then serves an honest episode."""
    _, _, honest = run(play(source, task_id, honest_cells))
    assert attacked.reward == honest.reward > 0.0, (attacked, honest)
    assert attacked.details.get("episode_ended") == cause
    assert [t["passed"] for t in attacked.details["tests"]] == [t["passed"] for t in honest.details["tests"]]
    _, _, next_one = run(play(source, task_id, [solution(source, task_id)]))
    assert next_one.success and source.pool.stats.recycled == 0


def test_closing_the_channel_ends_the_episode_as_the_policys_failure(host, run):
    task_id = template_tasks(host, "note_delete_tagged")[0]
    attack = f"{CHANNEL}.shutdown(0)\napis.supervisor.show_profile()"  # SHUT_RD: the reply's send breaks
    (_, steps, attacked), gap = ticking(run, play(host, task_id, [unfinished(host, task_id), attack]))
    assert steps[-1].done and steps[-1].info["error"] == "api_channel_closed", steps[-1]
    assert "closed its connection to the apps" in steps[-1].observation and gap < 0.5
    assert_kept(host, run, task_id, attacked, [unfinished(host, task_id)], "api_channel_closed")


def test_the_policy_process_dying_ends_the_episode_as_the_policys_failure(host, run):
    task_id = template_tasks(host, "note_delete_tagged")[2]
    exit_now = "getattr(__import__('po' + 'six'), '_ex' + 'it')(3)"  # os._exit past AppWorld's name guard
    cells = [unfinished(host, task_id), exit_now]
    (_, steps, attacked), gap = ticking(run, play(host, task_id, cells))
    assert steps[-1].done and steps[-1].info["error"] == "env_killed" and gap < 0.5, (steps[-1], gap)
    assert steps[-1].observation == "Execution failed. The execution process died; the episode is over."
    assert_kept(host, run, task_id, attacked, [unfinished(host, task_id)], "env_killed")


def test_unread_pipelined_replies_and_queued_work_stop_with_the_cell(host, run):
    """5,000 requests sent and no reply read: the API process stops reading (its reply waits for a reader), the
    cell times out in its own process, and what it left is dropped at the cell's end, not worked on later."""
    task_id = template_tasks(host, "note_delete_tagged")[1]
    request = {"method": "GET", "path": "/supervisor/profile", "payload": {}, "headers": {}}
    flood = f"for _ in range(5000):\n    {FRAMING}.send({CHANNEL}, {request!r})\nprint('SENT ALL')"

    async def scenario():
        env = await host.make_env()
        try:
            await env.reset(task_id)
            flooded = await env.step(flood)
            api = api_process(env)
            cpu = sum(api.cpu_times()[:2])
            await asyncio.sleep(1.0)  # the policy process is stopped: nothing of its cell may run now
            idle_cpu = sum(api.cpu_times()[:2]) - cpu
            later = await env.step(unfinished(host, task_id))
            return flooded, idle_cpu, later, await env.evaluate()
        finally:
            await env.close()

    (flooded, idle_cpu, later, attacked), gap = ticking(run, scenario())
    assert not flooded.done and "SENT ALL" not in flooded.observation and "timed out" in flooded.observation
    assert idle_cpu < 0.05 and gap < 0.5, (idle_cpu, gap)
    assert "Execution successful" in later.observation, later.observation  # stale replies skipped
    assert_kept(host, run, task_id, attacked, [unfinished(host, task_id)], None)


def test_a_state_over_the_cap_ends_the_episode_scored_before_the_write(host, run, appworld_root):
    task_id = template_tasks(host, "note_delete_tagged")[2]
    note = "apis.simple_note.create_note(access_token=simple_note_token, title=f'big {n}', content='x' * 200_000)"
    flood = f"for n in range(40):\n    {note}"
    cells = [unfinished(host, task_id), flood]
    (_, steps, attacked), gap = ticking(run, play(host, task_id, cells, experiment_name="state_cap_attack"))
    dbs = appworld_root / "experiments" / "outputs" / "state_cap_attack" / "tasks" / task_id / "dbs"
    saved = sum(p.stat().st_size for p in dbs.glob("*.jsonl"))
    kept = sum(
        line.startswith('["INSERT INTO notes ')
        for line in (dbs / "simple_note.jsonl").read_text().splitlines()
    )
    start = sum(
        line.startswith('["INSERT INTO notes ')
        for line in (appworld_root / "data" / "tasks" / task_id / "dbs" / "simple_note.jsonl")
        .read_text()
        .splitlines()
    )
    assert steps[-1].done and steps[-1].info["error"] == "state_too_large" and gap < 0.5
    assert steps[-1].observation == (
        f"Execution failed. The apps' saved state would exceed its {float(STATE_MB)} MB cap; the last API call "
        "was undone and the episode is over."
    )
    assert 0 < kept - start < 40 and saved <= STATE_MB * 2**20, (kept, start, saved)
    control = [unfinished(host, task_id), f"for n in range({kept - start}):\n    {note}"]
    assert_kept(host, run, task_id, attacked, control, "state_too_large")


def test_more_calls_than_the_cell_cap_are_refused_by_the_api_process(host, run):
    task_id = template_tasks(host, "note_delete_tagged")[0]
    attack = (
        "requester.request_tracker.max_num_requests = None\n"  # the policy's own counter, switched off
        "served = 0\ntry:\n    for _ in range(40):\n        apis.supervisor.show_profile()\n        served += 1\n"
        "except Exception as error:\n    print('REFUSED', served, error)"
    )
    (_, steps, attacked), gap = ticking(run, play(host, task_id, [attack, unfinished(host, task_id)]))
    out = steps[0].observation
    assert f"REFUSED {CALLS_PER_CELL} " in out and f"exceeded the limit of {CALLS_PER_CELL}" in out, out
    assert gap < 0.5, gap
    assert "Execution successful" in steps[1].observation  # the cap is per cell
    assert_kept(host, run, task_id, attacked, [unfinished(host, task_id)], None)


# 300 searches cost the API process ~0.8 CPU-s here (FastAPI, SQLite's full-text search, the reply) and the
# policy's process a fraction of that; 300 frames of ~0.9 MB that are no app call (a JSON list: "Malformed
# request") cost it as much in reading and parsing, and the policy only a send of bytes it built once
SEARCHES = (
    "for _ in range(300):\n"
    "    apis.simple_note.search_notes(access_token=simple_note_token, query='work notes', page_limit=20)"
)
NOT_CALLS = (
    f"ch = {CHANNEL}\nbody = __import__('json').dumps(['x' * 100] * 9000).encode()\n"
    "frame = len(body).to_bytes(4, 'big') + body\n"
    f"for _ in range(300):\n    ch.sendall(frame)\n    {FRAMING}.receive(ch, 2**20)"
)


@pytest.mark.parametrize("cell", [SEARCHES, NOT_CALLS], ids=["legal_calls", "frames_that_are_no_calls"])
def test_the_api_processs_cpu_budget_ends_the_episode_as_the_policys_failure(cpu_host, run, cell):
    """The API process stops serving at 90 % of its RLIMIT_CPU, whatever the work was (before, frames that were
    no app call were never charged: it died of SIGXCPU and the episode was dropped as an EnvironmentFailure)."""
    task_id = template_tasks(cpu_host, "note_delete_tagged")[0]
    cells = [unfinished(cpu_host, task_id)] + [cell] * 8
    (_, steps, attacked), gap = ticking(run, play(cpu_host, task_id, cells))
    last = steps[-1]
    assert last.done and last.info["error"] == "api_cpu_budget" and len(steps) < len(cells), last
    assert last.observation == "Execution failed. The apps used the episode's CPU time; the episode is over."
    api_cpu_s = attacked.details["evaluator_timing"]["api_cpu_s"]  # measured after the save
    assert 0.9 * CPU_S <= api_cpu_s < CPU_S and gap < 0.5, (api_cpu_s, gap)
    assert_kept(cpu_host, run, task_id, attacked, [unfinished(cpu_host, task_id)], "api_cpu_budget")


def test_malformed_frames_get_error_replies(host, run):
    task_id = template_tasks(host, "note_delete_tagged")[1]
    attack = (
        f"ch = {CHANNEL}\n"
        "for frame in [b'\\x00\\x00\\x00\\x05nojso', b'\\x00\\x00\\x00\\x02[]', b'\\x7f\\xff\\xff\\xff']:\n"
        f"    ch.sendall(frame)\n    print('REPLY', {FRAMING}.receive(ch, 2**20)['status'])"
    )
    (_, steps, attacked), gap = ticking(run, play(host, task_id, [attack, unfinished(host, task_id)]))
    replies = steps[0].observation.split()
    assert replies == ["REPLY", "400", "REPLY", "400", "REPLY", "413"] and gap < 0.5, (replies, gap)
    assert "Execution successful" in steps[1].observation
    assert_kept(host, run, task_id, attacked, [unfinished(host, task_id)], None)


def test_a_trusted_process_that_fails_is_an_environment_failure(host, run):
    """The converse: the API process killed from outside (nothing the policy can do) is the environment's."""
    task_id = template_tasks(host, "note_count_tag")[0]

    async def scenario():
        env = await host.make_env()
        try:
            await env.reset(task_id)
            os.kill(api_process(env).pid, signal.SIGKILL)
            with pytest.raises(EnvironmentFailure):
                await env.step("print(1)")
        finally:
            await env.close()

    run(scenario())
    assert host.pool.stats.recycled == 1
