"""The policy's process holds nothing worth taking: one adversarial test per attack class of issue 43.

Every attack is the model's code, sent through `env.step` and scored by `env.evaluate` as training does, on
real episode hosts. Each test asserts a property, not the failure of one trick: the reward equals the honest
control's, no file outside the process's scratch changed, nothing reached the trainer, the next episode is
unaffected, the trainer's loop did not stall.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import time
from pathlib import Path

import psutil
import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON, AppWorldConfig
from loop_agents.envs.appworld.official_eval import UnverifiedOutputs, run_official_evaluation
from loop_agents.envs.appworld.task_source import AppWorldTaskSource
from tests.envs.appworld.test_environment import play, solution, template_tasks

pytestmark = pytest.mark.slow

P = "__import__('po' + 'six')"  # os's C module: invisible to AppWorld's name guard


def posix(name: str) -> str:
    return f"getattr({P}, {name[:2]!r} + {name[2:]!r})"


def tries(label: str, statement: str) -> str:
    """A cell line that runs `statement` and prints `label OK` or `label DENIED <error>`."""
    return (
        f"try:\n    {statement}\n    print({label!r}, 'OK')\n"
        f"except BaseException as error:\n    print({label!r}, 'DENIED', type(error).__name__)\n"
    )


def control_reward(source, run, task_id: str) -> float:
    _, _, honest = run(play(source, task_id, ["apis.supervisor.complete_task(answer=-1)"]))
    return honest.reward


def policy_processes() -> list[psutil.Process]:
    """Confined policy processes: pid 1 of their own pid namespace (two NSpid values)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            continue
        nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if (
            len(nspid) == 2
            and nspid[1] == "1"
            and str(DEFAULT_PYTHON.name) in " ".join(process.info["cmdline"] or [])
        ):
            found.append(process)
    return found


@pytest.fixture(scope="module")
def lone_host(appworld_root, event_loop_session):
    """One host, so that consecutive episodes surely share it (memory residue, inherited state)."""
    source = AppWorldTaskSource(
        AppWorldConfig(root=str(appworld_root), pool_size=1, execute_timeout_s=3, grace_s=4.0)
    )
    event_loop_session.run_until_complete(source.start())
    yield source
    event_loop_session.run_until_complete(source.close())


# ------------------------------------------------------------------ a thread the sandbox never saw
def test_the_policy_process_is_one_confined_task_and_cannot_start_another(task_source, run):
    task_id = template_tasks(task_source, "note_count_tag")[0]

    async def scenario():
        env = await task_source.make_env()
        try:
            await env.reset(task_id)
            seen = []
            for process in policy_processes():
                for task in Path(f"/proc/{process.pid}/task").iterdir():
                    status = (task / "status").read_text()
                    seen.append(
                        re.search(r"Seccomp:\s+(\d)", status).group(1)
                        + re.search(r"NoNewPrivs:\s+(\d)", status).group(1)
                    )
            step = await env.step(
                tries("thread", "__import__('threading').Thread(target=lambda: None).start()")
                + tries("fork", f"{posix('fork')}()")
                + tries("spawn", f"{posix('posix_spawn')}('/bin/sh', ['sh'], {{}})")
            )
            return seen, step.observation
        finally:
            await env.close()

    seen, out = run(scenario())
    assert seen and set(seen) == {"21"}, (
        seen
    )  # every task of every policy process: seccomp filter, no new privs
    assert "thread DENIED RuntimeError" in out and "fork DENIED" in out and "spawn DENIED" in out, out


def test_a_process_with_a_second_thread_refuses_to_confine(tmp_path):
    """The check runs before any layer: a thread started earlier would escape Landlock's per-thread rules."""
    import subprocess
    import sys

    code = (
        "import threading, time\n"
        "from loop_agents.sandbox import confine\n"
        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
        f"c = confine.Confinement(new_root=__import__('pathlib').Path({str(tmp_path)!r}), read_only=[], scratch=[])\n"
        "try:\n    confine.confine(c)\nexcept confine.NotSingleThreaded as error:\n    print('REFUSED', error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "REFUSED 2 threads before the sandbox" in done.stdout, done.stdout + done.stderr


# ------------------------------------------------------------------ the grader trusts only trusted writers
def test_forged_output_files_change_no_score(task_source, run, tmp_path):
    """A do-nothing episode that writes a forged <app>.db and model_hashes.json where its world keeps outputs."""
    task_id = template_tasks(task_source, "note_delete_tagged")[0]
    forge = (
        "import json\n"
        "for name in ['simple_note.db', 'model_hashes.json', 'simple_note.jsonl']:\n"
        + "\n".join(
            "    " + line
            for line in tries(
                "forge", f"{posix('open')}('dbs/' + name, {os.O_WRONLY | os.O_CREAT | os.O_TRUNC})"
            ).splitlines()
        )
        + "\napis.supervisor.complete_task()"
    )
    _, steps, attacked = run(play(task_source, task_id, [forge], experiment_name="forge_attack"))
    _, _, honest = run(
        play(task_source, task_id, ["apis.supervisor.complete_task()"], experiment_name="forge_control")
    )
    assert "forge OK" in steps[0].observation  # written, into the process's own tmpfs
    assert attacked.reward == honest.reward < 1.0
    (task_source.config.root_path / "data" / "datasets" / "forge_probe.txt").write_text(task_id + "\n")
    offline = [run_official_evaluation(name, "forge_probe", task_source.config).per_task[task_id]
               for name in ("forge_attack", "forge_control")]  # fmt: skip
    assert offline[0]["num_passed"] == offline[1]["num_passed"] and not offline[0]["success"]


def test_parse_and_log_scores_only_signed_outputs(task_source, run, tmp_path, capsys):
    root = task_source.config.root_path
    task_id = template_tasks(task_source, "note_delete_tagged")[1]
    run(play(task_source, task_id, [solution(task_source, task_id)], experiment_name="signed_run"))
    datasets = root / "data" / "datasets"
    (datasets / "provenance_probe.txt").write_text(task_id + "\n")
    good = run_official_evaluation("signed_run", "provenance_probe", task_source.config)
    assert good.per_task[task_id]["success"]
    changes = (
        root / "experiments" / "outputs" / "signed_run" / "tasks" / task_id / "dbs" / "simple_note.jsonl"
    )
    changes.write_text(
        ""
    )  # the deletions undone after the episode: the saved state no longer matches its signature
    with pytest.raises(UnverifiedOutputs, match="provenance.json does not match"):
        run_official_evaluation("signed_run", "provenance_probe", task_source.config)
    from loop_agents.eval.parse_and_log import main

    with pytest.raises(
        SystemExit
    ) as exit_info:  # the command: one line naming the file, exit 2, never a score
        main(["experiment=signed_run", "split=provenance_probe", f"appworld_root={root}", "wandb=disabled",
              f"results_file={tmp_path / 'results.jsonl'}"])  # fmt: skip
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "provenance.json does not match" in err, err
    assert not (tmp_path / "results.jsonl").exists()
    (changes.parent.parent / "provenance.json").unlink()
    with pytest.raises(UnverifiedOutputs, match="provenance.json is missing"):
        run_official_evaluation("signed_run", "provenance_probe", task_source.config)


# ------------------------------------------------------------------ state only in the API process; admin routes
ADMIN_REQUESTS = [
    ("get", "/dbs", None), ("post", "/dbs", {"to_db_home_path": "/tmp/x", "from_db_home_path": "/tmp/y"}),
    ("post", "/dbs/save", {"to_db_home_path": "/tmp/x"}), ("delete", "/dbs/cache", {}),
    ("post", "/date_time", {"date_and_time": "2030-01-01T00:00:00"}), ("delete", "/date_time", {"time_freezer_id": "x"}),
    ("post", "/seed", {"seed": 1}), ("post", "/show_api_response_schemas", {"show_api_response_schemas": False}),
    ("get", "/", None), ("get", "/admin/payment_cards/1", None), ("post", "/admin/payment_cards", {}),
    ("get", "/simple_note/docs", None), ("get", "/simple_note/openapi.json", None),
    ("get", "/simple_note/notes/../../dbs", None),
]  # fmt: skip


def test_every_administrative_route_is_refused_to_the_policy(task_source, run):
    task_id = template_tasks(task_source, "note_delete_tagged")[2]
    transport = "__import__('appworld.requester', fromlist=['x']).requests"
    cell = "".join(
        f"r = {transport}.{method}('http://appworld-apis' + {path!r}, json={body!r}) if {method!r} != 'get' "
        f"else {transport}.get('http://appworld-apis' + {path!r})\nprint('ROUTE', {path!r}, r.status_code)\n"
        for method, path, body in ADMIN_REQUESTS
    )
    _, steps, attacked = run(play(task_source, task_id, [cell, "apis.supervisor.complete_task()"]))
    out = steps[0].observation
    statuses = re.findall(r"ROUTE (\S+) (\d+)", out)
    assert len(statuses) == len(ADMIN_REQUESTS) and {s for _, s in statuses} == {"403"}, out
    assert attacked.reward == control_reward(task_source, run, task_id) or attacked.reward < 1.0


# ------------------------------------------------------------------ nothing inherited
def test_no_truth_and_no_other_episode_in_the_policy_process_memory(lone_host, run):
    """Episode 1 prints a marker and is graded (the grader's failure report quotes the truth: the tagged notes'
    titles); episode 2 of the same task, on the same host, is read byte for byte from outside: neither the marker
    nor any truth value is in its memory."""
    marker = f"RESIDUE-{os.getpid()}-{time.time_ns()}"
    task_id = template_tasks(lone_host, "notes_to_todoist_tasks")[0]
    truth = json.loads(
        (lone_host.config.root_path / "data/tasks" / task_id / "ground_truth/private_data.json").read_text()
    )
    titles = [title.encode() for title in truth["titles"]]
    _, _, first = run(play(lone_host, task_id, [f"print({marker!r})", "apis.supervisor.complete_task()"]))
    assert first.reward < 1.0 and any(
        t.decode() in json.dumps(first.details) for t in titles
    )  # quoted by the grader

    async def second():
        env = await lone_host.make_env()
        try:
            await env.reset(task_id)
            await env.step("x = 1")
            (process,) = policy_processes()
            return _memory_of(process.pid)
        finally:
            await env.close()

    memory = run(second())
    assert len(memory) > 10_000_000  # really read (the interpreter, AppWorld, IPython)
    assert marker.encode() not in memory
    assert not [t for t in titles if t in memory], titles


def _memory_of(pid: int) -> bytes:
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                continue
    return b"".join(chunks)


def test_the_policy_process_sees_no_data_root_no_truth_and_no_host_descriptors(task_source, run):
    root = task_source.config.root_path
    task_id = template_tasks(task_source, "note_count_tag")[1]
    answer = root / "data" / "tasks" / task_id / "ground_truth" / "answer.json"
    cell = (
        tries("stat_truth", f"{posix('stat')}({str(answer)!r})")
        + tries("list_data", f"print({posix('listdir')}({str(root / 'data')!r}))")
        + tries("list_tasks", f"print({posix('listdir')}({str(root / 'data' / 'tasks')!r}))")
        + tries("proc", f"{posix('listdir')}('/proc')")
        + f"print('FDS', sorted(int(n) for n in {posix('listdir')}('/dev/fd')) if {posix('access')}('/dev/fd', 0) else 'none')\n"
        + f"print('STDOUT', {posix('fstat')}(1).st_rdev == {posix('stat')}('/dev/null').st_rdev)\n"
    )
    _, steps, _ = run(play(task_source, task_id, [cell]))
    out = steps[0].observation
    assert "stat_truth DENIED FileNotFoundError" in out and "proc DENIED FileNotFoundError" in out, out
    # data/ holds only the public inputs bound into the view: the task's own folder (specs.json), the API docs
    assert "list_data OK" in out and re.search(r'\[("tasks", "api_docs"|"api_docs", "tasks")\]', out), out
    assert f'["{task_id}"]' in out and "ground_truth" not in out and "STDOUT True" in out, out


# ------------------------------------------------------------------ what Landlock and a deny list do not cover
def test_xattrs_modes_times_inotify_and_sockets_reach_nothing(task_source, run, tmp_path):
    root = task_source.config.root_path
    task_id = template_tasks(task_source, "note_count_tag")[2]
    specs = root / "data" / "tasks" / task_id / "specs.json"
    venv_file = Path(os.path.realpath(DEFAULT_PYTHON))
    mode, mtime = specs.stat().st_mode, specs.stat().st_mtime_ns
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / "host.sock"))
    listener.setblocking(False)
    cell = (
        tries("setxattr", f"{posix('setxattr')}({str(specs)!r}, 'user.leak', b'1')")
        + tries("chmod", f"{posix('chmod')}({str(specs)!r}, 0o777)")
        + tries("chmod_venv", f"{posix('chmod')}({str(venv_file)!r}, 0o777)")
        + tries("utime", f"{posix('utime')}({str(specs)!r}, (0, 0))")
        + tries(
            "inotify",
            "__import__('ctypes').CDLL(None).inotify_init() >= 0 or (_ for _ in ()).throw(OSError())",
        )
        + tries("socketpair", "__import__('_socket').socketpair(1, 2)")
        + tries("socket", "__import__('_socket').socket(1, 2)")
        + tries("stderr", f"{posix('write')}(2, b'WROTE-TO-THE-HOST-LOG')")
    )
    _, steps, attacked = run(play(task_source, task_id, [cell, "apis.supervisor.complete_task(answer=-1)"]))
    out = steps[0].observation
    for label in ("setxattr", "chmod", "chmod_venv", "utime", "inotify", "socketpair", "socket"):
        assert f"{label} DENIED" in out, (label, out)
    assert specs.stat().st_mode == mode and specs.stat().st_mtime_ns == mtime
    assert not os.listxattr(specs)
    with pytest.raises(BlockingIOError):
        listener.recv(100)
    logs = root / "experiments" / "server_logs"
    assert not any(b"WROTE-TO-THE-HOST-LOG" in p.read_bytes() for p in logs.glob("*.log"))
    assert attacked.reward == control_reward(task_source, run, task_id)


# ------------------------------------------------------------------ resources
def test_the_policy_process_is_stopped_between_cells(task_source, run):
    task_id = template_tasks(task_source, "note_count_tag")[0]

    async def scenario():
        env = await task_source.make_env()
        try:
            await env.reset(task_id)
            await env.step("x = sum(range(1000))")
            (process,) = [p for p in policy_processes() if p.status() == psutil.STATUS_STOPPED][:1] or [None]
            states = {p.pid: p.status() for p in policy_processes()}
            return process, states
        finally:
            await env.close()

    process, states = run(scenario())
    assert process is not None and psutil.STATUS_STOPPED in states.values(), states


def test_scratch_is_capped_and_a_full_scratch_does_not_stall_the_loop(task_source, run):
    task_id = template_tasks(task_source, "note_count_tag")[1]
    flood = (
        "n = 0\ntry:\n    for n in range(100000):\n"
        f"        {posix('close')}({posix('open')}('/tmp/f%d' % n, {os.O_WRONLY | os.O_CREAT}))\n"
        "except OSError as error:\n    print('STOPPED', n, type(error).__name__, error.errno)\n"
    )

    async def scenario():
        gaps, stop = [], asyncio.Event()

        async def ticker():
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        tick = asyncio.create_task(ticker())
        env = await task_source.make_env()
        try:
            await env.reset(task_id)
            step = await env.step(flood)
        finally:
            await env.close()
        stop.set()
        await tick
        return step.observation, max(gaps)

    out, worst_gap = run(scenario())
    stopped = re.search(r"STOPPED (\d+) OSError (\d+)", out)
    assert stopped and int(stopped.group(1)) < 5000 and int(stopped.group(2)) == 28, (
        out
    )  # ENOSPC: the inode cap
    assert worst_gap < 0.5, worst_gap


# ------------------------------------------------------------------ degraded kernels fail closed
def test_without_user_namespaces_the_default_refuses_with_one_line(appworld_root):
    """A process whose seccomp filter denies unshare (as container runtimes' default profiles do) stands in for
    a kernel without user namespaces: the host's probe in the default mode exits 2 with one line."""
    import subprocess

    from loop_agents.envs.appworld.server import host_command, host_environment

    config = AppWorldConfig(root=str(appworld_root))
    command = host_command(config, "--probe")
    wrapper = (
        "import os, sys, errno, pyseccomp as sc\n"
        "f = sc.SyscallFilter(sc.ALLOW)\nf.add_rule(sc.ERRNO(errno.EPERM), 'unshare')\nf.load()\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n"
    )
    done = subprocess.run([str(DEFAULT_PYTHON), "-c", wrapper, *command], env=host_environment(config),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert (
        "available mode: layer 'namespaces' is missing" in lines[0] and "user.max_user_namespaces" in lines[0]
    )
    done = subprocess.run([str(DEFAULT_PYTHON), "-c", wrapper, *command[:-1], "--sandbox", "off", "--probe"],
                          env=host_environment(config), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "WARNING off by explicit choice" in done.stdout


def test_landlock_scopes_signals_and_abstract_sockets_to_the_domain():
    """The scoping the policy process requests (ABI >= 6): no signal to, no abstract socket of, the outside."""
    import subprocess

    from loop_agents.sandbox import landlock_rules

    if landlock_rules.abi_version() < landlock_rules.SCOPE_ABI:
        pytest.skip(f"this kernel's Landlock ABI is {landlock_rules.abi_version()} (< 6)")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"\0loop_agents_probe_{os.getpid()}"
    server.bind(name)
    server.listen()
    code = (
        "import os, socket\nfrom pathlib import Path\nfrom loop_agents.sandbox import landlock_rules\n"
        "landlock_rules.restrict_self([Path('/')], [])\n"
        f"try:\n    os.kill({os.getpid()}, 0)\n    print('SIGNAL OK')\nexcept PermissionError:\n    print('SIGNAL DENIED')\n"
        f"s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ntry:\n    s.connect({name!r})\n    print('ABSTRACT OK')\n"
        "except PermissionError:\n    print('ABSTRACT DENIED')\n"
    )
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    server.close()
    assert "SIGNAL DENIED" in done.stdout and "ABSTRACT DENIED" in done.stdout, done.stdout + done.stderr


def test_scores_match_appworld_in_the_episode_and_offline(task_source, run):
    """Control: the honest solution scores exactly as AppWorld's own evaluator, in the episode and offline."""
    task_id = template_tasks(task_source, "note_delete_tagged")[0]
    _, _, evaluation = run(
        play(task_source, task_id, [solution(task_source, task_id)], experiment_name="exact_run")
    )
    datasets = task_source.config.root_path / "data" / "datasets"
    (datasets / "exact_probe.txt").write_text(task_id + "\n")
    official = run_official_evaluation("exact_run", "exact_probe", task_source.config)
    assert evaluation.success and evaluation.reward == 1.0 and official.per_task[task_id]["success"]
    assert official.per_task[task_id]["num_passed"] == evaluation.details["num_passed"]
    json.dumps(official.per_task)
