"""The fork server of a callable agent program: `python -m loop_agents.gateway.fork_server module:function [module ...]`.

Starting a Python process per episode costs what the program imports (the `openai` package alone: ~1 CPU-s), more
than a short episode's whole sampling on a CPU. This process imports the program (and the modules named after it;
one that is not installed is skipped) once, then forks one process per episode, which starts with everything
imported. Each episode's process is as the spawned one would be (run_callable.py): a session of its own (the whole
group is killed when it is stopped or exits; its leader when this server dies), the episode's environment in
`os.environ`, stdin from /dev/null, stdout and stderr into a pipe this server reads into a bounded tail, exit 1
with the traceback when the function raises.

The protocol (JSON lines; requests on stdin, replies on the original stdout; the server's own prints go to stderr):

    -> {"ready": true} | {"error": "..."}               once, after the imports
    <- {"id": N, "env": {...}}                          start an episode's process
    -> {"id": N, "pid": P}                              it started
    <- {"id": N, "kill": true}                          stop its group (the episode ended first, or timed out)
    -> {"id": N, "exit": CODE, "tail": "..."}           it is gone (CODE < 0: killed by signal -CODE)

End of stdin kills every episode's group and exits. The server is single-threaded (nothing imported may start a
thread, or forking would copy a lock held by it): one `select` over stdin and the episodes' output pipes, children
reaped as they exit.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import sys
import traceback
from dataclasses import dataclass, field

from loop_agents.gateway.launch import TAIL_CHARS, kill_group
from loop_agents.gateway.program import load_callable
from loop_agents.gateway.run_callable import play

POLL_S = 0.02  # how often exited children are reaped while any runs
PR_SET_PDEATHSIG = 1


@dataclass
class _Child:
    episode: int
    output: int  # the read end of its stdout/stderr pipe; -1 once at end of file
    tail: bytearray = field(default_factory=bytearray)


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when the fork server dies (Linux's PR_SET_PDEATHSIG): a dead server's episodes must not
    run on unsupervised; the worker then kills the rest of their groups."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


def _exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class ForkServer:
    def __init__(self, function, replies: int) -> None:
        self.function = function
        self.replies = replies
        self.children: dict[int, _Child] = {}  # pid -> child
        self.pid_of: dict[int, int] = {}  # episode id -> pid
        self.pending = b""
        self.server_pid = os.getpid()

    def reply(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.replies, data) :]

    def start(self, episode: int, env: dict[str, str]) -> None:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            self._child(read_end, write_end, env)
        os.close(write_end)
        self.children[pid] = _Child(episode, read_end)
        self.pid_of[episode] = pid
        self.reply({"id": episode, "pid": pid})

    def _child(self, read_end: int, write_end: int, env: dict[str, str]) -> None:
        """The episode's process: never returns."""
        code = 1
        try:
            os.setsid()
            _die_with_parent(self.server_pid)
            os.close(read_end)
            os.close(self.replies)
            for child in self.children.values():
                if child.output >= 0:
                    os.close(child.output)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.close(null)
            os.close(write_end)
            os.environ.clear()
            os.environ.update(env)
            play(self.function)
            code = 0
        except SystemExit as err:  # as the interpreter ends: an int is the status, anything else printed, 1
            code = err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
            if err.code is not None and not isinstance(err.code, int):
                print(err.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)

    def kill(self, episode: int) -> None:
        pid = self.pid_of.get(episode)
        if pid is not None:  # not yet reaped: the pid cannot have been reused
            kill_group(pid)

    def read_output(self, child: _Child) -> None:
        chunk = os.read(child.output, 65536)
        if chunk:
            child.tail += chunk
            del child.tail[:-TAIL_CHARS]
        else:
            os.close(child.output)
            child.output = -1

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            kill_group(pid)  # what the program left behind in its group goes with it
            while child.output >= 0 and select.select([child.output], [], [], 0)[0]:
                self.read_output(child)
            if child.output >= 0:
                os.close(child.output)
            del self.pid_of[child.episode]
            tail = child.tail.decode(errors="replace")[-TAIL_CHARS:]
            self.reply({"id": child.episode, "exit": _exit_code(status), "tail": tail})

    def handle(self, line: bytes) -> None:
        request = json.loads(line)
        if request.get("kill"):
            self.kill(int(request["id"]))
        else:
            self.start(int(request["id"]), {str(k): str(v) for k, v in request["env"].items()})

    def serve(self) -> None:
        while True:
            outputs = {c.output: c for c in self.children.values() if c.output >= 0}
            ready, _, _ = select.select([0, *outputs], [], [], POLL_S if self.children else None)
            for fd in ready:
                if fd in outputs:
                    self.read_output(outputs[fd])
                    continue
                data = os.read(0, 65536)
                if not data:  # the worker is gone: so are the episodes
                    for pid in list(self.children):
                        kill_group(pid)
                    return
                self.pending += data
                *lines, self.pending = self.pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.handle(line)
            self.reap()


def main(argv: list[str]) -> int:
    replies = os.dup(1)
    os.dup2(2, 1)  # whatever the imports print goes to stderr, never into the replies
    server = ForkServer(None, replies)
    try:
        for name in argv[1:]:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as err:
                if err.name != name:  # a preloaded module that is installed but broken is an error
                    raise
        server.function = load_callable(argv[0])
    except Exception as err:
        server.reply({"error": f"{type(err).__name__}: {err}"})
        return 1
    server.reply({"ready": True})
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
