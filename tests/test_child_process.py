"""Leftover server processes of a SIGKILLed run are reaped from their record, and only they."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil

from loop_agents.child_process import reap_recorded_tree, record_process_tree, recorded_processes, start_time


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_reaper_kills_the_orphans_of_a_killed_leader(tmp_path):
    leader = subprocess.Popen(["bash", "-c", "sleep 300 & sleep 300 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(psutil.Process(leader.pid).children()) < 2:
        assert time.monotonic() < deadline, "the test tree did not start"
        time.sleep(0.05)
    record = tmp_path / "server.pids"
    record_process_tree(leader.pid, record)
    children = [p.pid for p in psutil.Process(leader.pid).children()]
    os.kill(leader.pid, signal.SIGKILL)  # what a SIGKILL of the server leaves: orphans reparented to init
    leader.wait()
    assert all(_alive(pid) for pid in children)
    assert reap_recorded_tree(record) == 2
    assert not any(_alive(pid) for pid in children)
    assert not record.exists()


def test_reaper_spares_a_reused_pid_and_tolerates_no_or_bad_record(tmp_path):
    record = tmp_path / "server.pids"
    me = psutil.Process()
    record.write_text(f"[[{me.pid}, {start_time(me) - 100.0}]]")  # same pid, another process's start time
    assert reap_recorded_tree(record) == 0 and _alive(me.pid)
    assert reap_recorded_tree(tmp_path / "none.pids") == 0
    record.write_text("{not json")
    assert reap_recorded_tree(record) == 0 and not record.exists()


def test_a_record_still_names_its_processes_after_the_wall_clock_steps(tmp_path, monkeypatch):
    """psutil's create_time() adds the wall-clock boot time (/proc/stat's btime), which a clock step or an NTP
    correction moves; CI once waited 300 s for a recorded vLLM tree that was running all along. The record keeps
    the start time since boot instead, which no clock change moves."""
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        record = tmp_path / "server.pids"
        record_process_tree(sleeper.pid, record)
        before = psutil.Process(sleeper.pid).create_time()
        booted = psutil.boot_time()
        monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: booted + 1.0)  # the clock stepped 1 s
        assert psutil.Process(sleeper.pid).create_time() == before + 1.0  # what the old record compared
        assert [proc.pid for proc in recorded_processes(record)] == [sleeper.pid]
        assert reap_recorded_tree(record) == 1 and not _alive(sleeper.pid)
    finally:
        sleeper.kill()
