"""The host factory: one warmed-up parent that forks the pool's episode hosts on request.

Every episode host used to import AppWorld and open three warm-up worlds itself (~6.4 CPU-s a host, 51 CPU-s
for a pool of 8 on the 2-core EPYC). The factory does that once; each host it forks starts with the warm heap
in ~10 ms. The factory never runs policy code, never loads ground truth and serves no HTTP: it reads one JSON
request a line on stdin (`{"port": P, "log": "/path"}`), forks, and answers on stdout with one
`@@FACTORY@@ {"port": P, "pid": N}` line. The forked host is then exactly what a spawned host is after its
warm-up: its own session (the pool SIGKILLs its process group), stdin from /dev/null, stdout and stderr to its
own log, the HTTP server of `service.py` on 127.0.0.1:P. EOF on stdin (the pool is gone) ends the factory; a
host dies with the factory (parent-death signal), the factory with the trainer.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable

from loop_agents.envs.appworld.host import zygote
from loop_agents.sandbox import layers

REPLY_PREFIX = "@@FACTORY@@ "


def _announce(payload: dict) -> None:
    sys.stdout.write(REPLY_PREFIX + json.dumps(payload) + "\n")
    sys.stdout.flush()


def _become_host(request: dict, serve: Callable[[int, socket.socket], None], client: socket.socket) -> None:
    """In the forked child: detach from the factory's pipes and session, then serve until killed."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the host waits for its own episode forks
        os.setsid()
        layers.die_with_parent()
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the factory's request pipe: a host must not read the pool's requests
        os.dup2(log, 1)  # the factory's reply pipe: a host must not write into the protocol
        os.dup2(log, 2)
        os.close(log)
        os.close(devnull)
        print(f"[episode_host] forked by the host factory for port {request['port']}", flush=True)
        serve(int(request["port"]), client)
    except BaseException:  # noqa: BLE001 - the log says why; the pool sees the host not answering
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(1)


def serve_factory(serve: Callable[[int, socket.socket], None], registrar: socket.socket) -> None:
    """Forks one host per request line until stdin closes. Single-threaded, so every fork is safe."""
    signal.signal(
        signal.SIGCHLD, signal.SIG_IGN
    )  # hosts are not our children to wait for: the kernel reaps them
    _announce({"ready": True, "pid": os.getpid()})
    while line := sys.stdin.readline():
        try:
            request = json.loads(line)
            port = int(request["port"])
        except (ValueError, KeyError, TypeError) as error:
            _announce({"error": f"bad request {line[:200]!r}: {error}"})
            continue
        sys.stdout.flush()  # a child must not inherit (and write out again) buffered replies
        client = zygote.connect(registrar)  # the new host's own line to the zygote
        pid = os.fork()
        if pid == 0:
            registrar.close()  # a host must not register clients of its own
            _become_host(request, serve, client)
        client.close()
        _announce({"port": port, "pid": pid})
