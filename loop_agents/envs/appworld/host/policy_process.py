"""The policy process: the only process that runs the model's code, and it holds nothing worth taking.

Forked by the zygote (zygote.py, an image that only ever imported code), so it starts with no other episode's
data, no grader output and no truth in memory. Child A reads the host's setup message, enters new namespaces
and forks B, pid 1 there. B confines itself (sandbox/confine.py: a tmpfs root with read-only binds of the
interpreter, its libraries and the task's public specs and API docs; no capabilities; rlimits; Landlock; the
seccomp allow list), then opens the world in AppWorld's remote-API mode over the channel to the API process
(remote_apis.py) and runs cells. Its fds are 0-2 on /dev/null and the two channels; nothing else is open.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from loop_agents.envs.appworld.host import remote_apis
from loop_agents.sandbox import confine, framing, layers

SETUP_LIMIT = 1024 * 1024
CELL_LIMIT = 64 * 1024 * 1024
_INIT_KEYS = (
    "max_interactions",
    "max_api_calls_per_interaction",
    "timeout_seconds",
    "raise_on_unsafe_syntax",
)


def _clock() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # the world's freezegun does not stop this clock


def _isolate_descriptors(keep: set[int]) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _confinement(setup: dict[str, Any]) -> confine.Confinement:
    root = Path(setup["root"])
    task_dir = root / "data" / "tasks" / setup["task_id"]
    out_dir = root / "experiments" / "outputs" / setup["experiment_name"] / "tasks" / setup["task_id"]
    read_only = [Path(p) for p in setup["system_paths"]] + [
        task_dir / "specs.json",
        root / "data" / "api_docs",
    ]
    limits = setup["limits"]
    return confine.Confinement(
        new_root=Path(setup["new_root"]),
        read_only=read_only,
        scratch=[Path("/tmp"), out_dir],
        scratch_mb=limits["scratch_mb"],
        scratch_inodes=limits["scratch_inodes"],
        memory_mb=limits["memory_mb"],
        file_size_mb=limits["file_size_mb"],
        cpu_s=limits["cpu_s"],
        open_files=limits["open_files"],
        landlock_abi=int(setup["landlock_abi"]),
    )


def _run_world(cells: socket.socket, apis: socket.socket, setup: dict[str, Any], confine_s: float) -> None:
    began = _clock()
    remote_apis.install(apis)
    from appworld.environment import AppWorld

    kwargs = {key: setup["init"][key] for key in _INIT_KEYS if key in setup["init"]}
    world = AppWorld(
        task_id=setup["task_id"],
        experiment_name=setup["experiment_name"],
        load_ground_truth=False,
        remote_apis_url=remote_apis.URL,
        **kwargs,
    )
    os.chdir(world.output_directory)
    framing.send(
        cells, {"output": {"timing": {"policy_confine_s": confine_s, "policy_init_s": _clock() - began}}}
    )
    while True:
        message = framing.receive(cells, CELL_LIMIT)
        if message.get("op") == "execute":
            framing.send(cells, {"output": world.execute(str(message["code"]))})


def _inner(cells: socket.socket, apis: socket.socket, setup: dict[str, Any]) -> None:
    """B: pid 1 of the new namespaces."""
    layers.die_with_parent()
    os.setsid()
    began = _clock()
    if setup["confine"]:
        try:
            confine.confine(_confinement(setup))
        except confine.NotSingleThreaded as error:
            framing.send(cells, {"error": f"[sandbox] {error}"})
            os._exit(3)
    os.environ.clear()
    os.environ.update(
        HOME="/tmp", IPYTHONDIR="/tmp/.ipython", PATH="/usr/bin:/bin", APPWORLD_ROOT=setup["root"]
    )
    _run_world(cells, apis, setup, _clock() - began)


def spawn_main(cells: socket.socket, apis: socket.socket, pid_pipe: int) -> None:
    """A, in the zygote's fresh fork: read the setup, enter the namespaces, fork B, report its pid, wait."""
    layers.die_with_parent()
    os.setsid()
    _isolate_descriptors({cells.fileno(), apis.fileno(), pid_pipe})
    try:
        setup = framing.receive(cells, SETUP_LIMIT, _clock() + 60)
        if setup["confine"]:
            confine.enter_namespaces()
    except BaseException:  # noqa: BLE001 - reported to the host, which fails the episode's start
        os.write(pid_pipe, b"0")
        try:
            framing.send(cells, {"error": traceback.format_exc()[-3000:]})
        finally:
            os._exit(1)
    inner = os.fork()
    if inner == 0:
        os.close(pid_pipe)
        try:
            _inner(cells, apis, setup)
        except BaseException:  # noqa: BLE001
            try:
                framing.send(cells, {"error": traceback.format_exc()[-3000:]})
            except OSError:
                pass
        os._exit(1)
    os.write(pid_pipe, str(inner).encode())
    os.close(pid_pipe)
    cells.close()
    apis.close()
    os.waitpid(inner, 0)
    sys.stdout.flush()
    os._exit(0)
