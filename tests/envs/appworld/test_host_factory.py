"""Episode hosts forked from one warmed-up factory (the default): what each host is, a dead factory, and what the
warm-up leaves warm for every episode."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time

import psutil
import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON, REPO_ROOT, AppWorldConfig
from loop_agents.envs.appworld.task_source import AppWorldTaskSource
from tests.envs.appworld.test_environment import play, solution

pytestmark = pytest.mark.slow  # real AppWorld hosts


def _pipes(pid: int, fds: list[int] | None = None) -> set[str]:
    folder = f"/proc/{pid}/fd"
    names = [str(fd) for fd in fds] if fds is not None else os.listdir(folder)
    links = set()
    for name in names:
        try:
            links.add(os.readlink(f"{folder}/{name}"))
        except OSError:
            pass
    return {link for link in links if link.startswith("pipe:")}


def test_hosts_are_forked_by_one_factory_in_their_own_sessions_without_its_pipes(task_source, run):
    pool = task_source.pool
    run(pool.settle())
    factory = pool.factory
    assert factory is not None and factory.alive()
    factory_pid = factory.process.pid
    protocol_pipes = _pipes(factory_pid, [0, 1])  # its request and reply pipes
    assert len(protocol_pipes) == 2
    hosts = [server.process.pid for server in pool.servers if server.alive()]
    assert len(hosts) == task_source.config.pool_size
    for pid in hosts:
        assert psutil.Process(pid).ppid() == factory_pid
        assert os.getsid(pid) == pid  # the pool's killpg of a host reaches that host and nothing else
        assert not _pipes(pid) & protocol_pipes  # a host can neither read requests nor forge replies
    for server in pool.servers:
        assert f"forked by the host factory for port {server.port}" in server.log_tail(100_000)


def _episode_scores_one(source: AppWorldTaskSource, run) -> None:
    task_id = source.task_ids("train")[0]
    _, _, evaluation = run(asyncio.wait_for(play(source, task_id, [solution(source, task_id)]), timeout=120))
    assert evaluation.success and evaluation.reward == 1.0


def test_a_dead_factory_takes_its_hosts_and_the_pool_starts_a_new_one(appworld_root, run):
    source = AppWorldTaskSource(AppWorldConfig(root=str(appworld_root), pool_size=2))
    run(source.start())
    try:
        pool = source.pool
        hosts = list(pool.servers)
        os.kill(pool.factory.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(host.alive() for host in hosts) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(host.alive() for host in hosts)  # parent-death signal: no orphan hosts
        _episode_scores_one(source, run)  # acquire finds its host dead and forks a new one from a new factory
        assert pool.factory.starts == 2 and pool.stats.recycled >= 1
    finally:
        run(source.close())
    assert pool.factory.process is None


def test_spawned_hosts_still_work_with_fork_hosts_off(appworld_root, run):
    source = AppWorldTaskSource(AppWorldConfig(root=str(appworld_root), pool_size=1, fork_hosts=False))
    run(source.start())
    try:
        assert source.pool.factory is None
        assert psutil.Process(source.pool.servers[0].process.pid).ppid() == os.getpid()
        _episode_scores_one(source, run)
    finally:
        run(source.close())


_DOCS_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from appworld import requester
from appworld.environment import AppWorld
from loop_agents.envs.appworld.host.service import _warm_api_docs

_warm_api_docs()
caches = (requester._get_api_name_to_doc, requester._get_app_api_name_to_argument_names)
before = [cache.cache_info().misses for cache in caches]
world = AppWorld(task_id=sys.argv[2], experiment_name="docs_check", load_ground_truth=False)
world.execute(open(sys.argv[3]).read())
print(json.dumps({"before": before, "after": [cache.cache_info().misses for cache in caches]}))
"""


def test_warm_up_fills_the_api_doc_caches_every_episode_reads(appworld_root):
    """The solution of a train task calls several apps; none of its calls rebuilds an app's API docs."""
    task_id = AppWorldTaskSource(AppWorldConfig(root=str(appworld_root))).task_ids("train")[0]
    solution_path = appworld_root / "data/tasks" / task_id / "ground_truth/solution.py"
    done = subprocess.run(
        [str(DEFAULT_PYTHON), "-c", _DOCS_CHECK, str(REPO_ROOT), task_id, str(solution_path)],
        env={**os.environ, "APPWORLD_ROOT": str(appworld_root)},
        cwd=appworld_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    misses = json.loads(done.stdout.strip().splitlines()[-1])
    assert misses["before"][0] > 1  # every app was built, not only the one the warm-up cell used
    assert misses["after"] == misses["before"]
