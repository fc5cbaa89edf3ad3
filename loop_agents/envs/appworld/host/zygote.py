"""The zygote: a clean, warm image whose only job is to fork policy processes.

Forked from the factory (or a spawned host) right after AppWorld's code is imported and before anything else
happens there: no world opened, no task read, no ground truth, no grader output, no episode, no key. It then
pre-builds AppWorld's public API docs (code, not data) so that a policy process starts warm, and serves:

    registrar   (from its parent) one message per new host, carrying that host's client socket
    client      (from a host) `spawn` with two fds (the episode's cell channel, its channel to the API process):
                the zygote forks A (policy_process.spawn_main) and answers {"outer": A, "inner": B}

It reads no episode data (the setup goes from the host to A directly over the cell channel), stays
single-threaded (checked before every fork) and kills a host's policy processes when that host goes away.
It dies with its parent (parent-death signal).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
from datetime import datetime
from typing import Any

from loop_agents.envs.appworld.host import policy_process
from loop_agents.sandbox import confine, layers

MESSAGE_LIMIT = 64 * 1024
# modules a world imports on its first initialisation (measured: sys.modules before and after one); imported
# here, each policy process starts with them (0.5 s of the 0.8 s a first remote world took)
_LAZY_MODULES = (
    "appworld.apps.admin.apis", "appworld.apps.admin.models", "appworld.apps.admin.responses",
    "IPython.core.completerlib", "dateutil.rrule", "dateutil.zoneinfo", "shelve", "fileinput", "gzip",
    "multiprocessing.connection", "concurrent.futures.process", "unittest.async_case", "anyio.streams.memory",
    "anyio.abc._testing",
)  # fmt: skip


def _warm() -> None:
    import pyseccomp  # noqa: F401 - it finds libseccomp through ldconfig at import, which the view lacks
    from appworld.apps import get_all_apps
    from appworld.environment import AppWorld  # noqa: F401 - the policy process imports nothing after its fork
    from appworld.requester import _get_api_name_to_doc, _get_app_api_name_to_argument_names
    from IPython.terminal.embed import InteractiveShellEmbed  # noqa: F401

    for name in _LAZY_MODULES:
        importlib.import_module(name)
    # freezegun scans every loaded module on a process's first freeze (0.16 s); its cache is code, not data
    from appworld.apps.api_lib import set_local_date_and_time, unset_local_date_and_time

    unset_local_date_and_time(set_local_date_and_time(datetime(2000, 1, 1)))
    for app_name in get_all_apps(skip_admin=True):
        _get_api_name_to_doc(app_name, include_private_apis=True)  # keyed on how the requester calls them
        _get_app_api_name_to_argument_names(app_name, include_private_apis=False)


def _pidfd(pid: int) -> int:
    try:
        return os.pidfd_open(pid) if pid > 0 else -1
    except OSError:
        return -1  # already gone


class Zygote:
    def __init__(self, registrar: socket.socket) -> None:
        self.registrar = registrar
        self.clients: dict[socket.socket, list[int]] = {}  # client -> pidfds of its latest policy process

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.registrar, *self.clients], [], [])
            for sock in ready:
                if sock is self.registrar:
                    self._register()
                else:
                    self._handle(sock)

    def _register(self) -> None:
        _, fds, _, _ = socket.recv_fds(self.registrar, 16, 1)
        if not fds:
            os._exit(0)  # the parent closed the registrar: it is gone
        self.clients[socket.socket(fileno=fds[0])] = []

    def _handle(self, client: socket.socket) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(client, MESSAGE_LIMIT, 2)
        except OSError:
            data, fds = b"", []
        if not data:
            self._drop(client)
            return
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            client.sendall(json.dumps({"error": "spawn needs two descriptors"}).encode() + b"\n")
            return
        client.sendall(json.dumps(self._spawn(client, fds)).encode() + b"\n")

    def _spawn(self, client: socket.socket, fds: list[int]) -> dict[str, Any]:
        threads = confine.thread_count()
        if threads != 1:
            for fd in fds:
                os.close(fd)
            return {"error": f"[sandbox] the zygote has {threads} threads; it cannot fork a confined process"}
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            cells, apis = socket.socket(fileno=fds[0]), socket.socket(fileno=fds[1])
            policy_process.spawn_main(cells, apis, write_end)
            os._exit(1)
        os.close(write_end)
        for fd in fds:
            os.close(fd)
        with os.fdopen(read_end, "rb") as pipe:
            inner = int(pipe.read().decode() or "0")
        # a host runs one episode at a time: its earlier episode's processes are the host's to have killed
        for fd in self.clients[client]:
            os.close(fd)
        self.clients[client] = [fd for fd in map(_pidfd, (pid, inner)) if fd >= 0]
        return {"outer": pid, "inner": inner}

    def _drop(self, client: socket.socket) -> None:
        """A host went away: its policy processes go too."""
        for fd in self.clients.pop(client, []):
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)  # a pidfd never names a recycled pid
            except ProcessLookupError:
                pass
            os.close(fd)
        client.close()


def start() -> socket.socket:
    """Forks the zygote from the calling (clean, single-threaded) process; returns the registrar socket."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        layers.die_with_parent()
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # A exits after B; the kernel reaps both
        for fd in (0, 1):
            os.dup2(os.open(os.devnull, os.O_RDWR), fd)
        try:
            _warm()
            Zygote(theirs).serve()
        finally:
            os._exit(1)
    theirs.close()
    return ours


def connect(registrar: socket.socket) -> socket.socket:
    """A new client connection to the zygote (for one host)."""
    ours, theirs = socket.socketpair()
    socket.send_fds(registrar, [b"c"], [theirs.fileno()])
    theirs.close()
    return ours


def spawn(client: socket.socket, cells_fd: int, apis_fd: int, timeout_s: float) -> dict[str, Any]:
    """Asks the zygote for a policy process on these two fds: {"outer", "inner"} or {"error"}."""
    socket.send_fds(client, [b"spawn"], [cells_fd, apis_fd])
    client.settimeout(timeout_s)
    try:
        line = b""
        while not line.endswith(b"\n"):
            chunk = client.recv(4096)
            if not chunk:
                return {"error": "the zygote closed the connection"}
            line += chunk
    except TimeoutError:
        return {"error": "the zygote did not answer"}
    finally:
        client.settimeout(None)
    return json.loads(line)
