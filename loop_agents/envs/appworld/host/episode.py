"""One episode's processes and the host's handle on them.

    API process   forked from the host (api_process.py): holds the task's databases, answers the policy's app
                  calls on an allow list, and at the end saves the state the grader scores; runs no policy code
    policy        forked by the zygote (policy_process.py): A enters new namespaces, B (pid 1 there) confines
                  itself and runs the cells, reaching the apps only through the API channel

The host opens the three channels before either process exists (cells: host <-> B; apis: B <-> API process;
admin: host <-> API process), so neither process can name anything else. Between cells B is stopped
(SIGSTOP): no CPU, no signal handler, no timer runs while the trainer thinks; and the API process works on B's
requests only between the host's `cell_begin` and `cell_end`, so it stops with B.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from typing import Any

from loop_agents.envs.appworld.host import zygote
from loop_agents.envs.appworld.host.api_process import api_main
from loop_agents.envs.appworld.host.common import MESSAGE_LIMIT, Settings, now
from loop_agents.sandbox import framing


class Episode:
    """The host's handle on one running episode."""

    def __init__(self, request: dict[str, Any], settings: Settings, zygote_client: socket.socket) -> None:
        self.settings = settings
        self.task_id = request["task_id"]
        self.experiment = request["experiment_name"]
        self.cell_timeout_s = float(request.get("timeout_seconds") or 20)
        self.ended: str | None = None
        self.evaluation: dict[str, Any] | None = None
        self.api_pidfd = -1
        self.policy_pidfds: list[int] = []  # A, then B (pid 1 of the policy's namespaces)
        began = now()
        self.cells, cells_policy = socket.socketpair()
        apis_api, apis_policy = socket.socketpair()
        self.admin, admin_api = socket.socketpair()
        settings.output_dir(self.experiment, self.task_id).parent.mkdir(parents=True, exist_ok=True)
        self.api_pid = os.fork()
        if self.api_pid == 0:
            for sock in (self.cells, cells_policy, apis_policy, self.admin, zygote_client):
                sock.close()
            try:
                api_main(apis_api, admin_api, request, settings)
            except BaseException:  # noqa: BLE001 - the host sees the admin channel close
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(1)
        self.api_pidfd = os.pidfd_open(self.api_pid)
        apis_api.close()
        admin_api.close()
        # the setup waits in the channel: A reads it before it can fork B and name B's pid to the zygote,
        # which may still be warming up for the host's first episode
        framing.send(self.cells, {**settings.policy_setup(self.task_id, self.experiment), "init": request})
        reply = zygote.spawn(
            zygote_client, cells_policy.fileno(), apis_policy.fileno(), settings.initialize_timeout_s
        )
        cells_policy.close()
        apis_policy.close()
        if "error" in reply:
            self.kill()
            raise RuntimeError(f"policy process start failed: {reply['error']}")
        for pid in (int(reply["outer"]), int(reply["inner"])):
            try:
                self.policy_pidfds.append(os.pidfd_open(pid))
            except (ProcessLookupError, OSError):
                pass  # not started or already gone: the cell channel says why
        self.fork_s = now() - began

    def start(self, timeout_s: float) -> dict[str, Any]:
        """Both processes' start reports merged: {"output": public task facts + timing} or {"error": why}."""
        deadline = time.monotonic() + timeout_s
        try:
            api = framing.receive(self.admin, MESSAGE_LIMIT, deadline)
            if "output" not in api:
                return {"error": f"API process: {str(api.get('error'))[-2000:]}"}
            policy = framing.receive(self.cells, MESSAGE_LIMIT, deadline)
            if "output" not in policy:
                return {"error": f"policy process: {str(policy.get('error'))[-2000:]}"}
        except (framing.ChannelError, OSError) as error:
            return {"error": f"{type(error).__name__}: {error}"}
        output = api["output"]
        output["timing"].update(policy["output"]["timing"])
        self._signal_policy(signal.SIGSTOP)
        return {"output": output}

    def ask_policy(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """B's reply, or `{"ended": why}` after killing the episode (deadline, death, flood or garbage)."""
        if self.ended:
            return {"ended": self.ended}
        try:
            self._signal_policy(signal.SIGCONT)
            # a B that stops reading its channel cannot hold the host in a send
            self.cells.settimeout(timeout_s)
            try:
                framing.send(self.cells, message)
            finally:
                self.cells.settimeout(None)
            reply = framing.receive(
                self.cells, self.settings.max_output_bytes + 4096, time.monotonic() + timeout_s
            )
            if not isinstance(reply, dict) or "output" not in reply:
                raise framing.ChannelError(f"unexpected reply {str(reply)[:200]!r}")
            self._signal_policy(signal.SIGSTOP)
            return reply
        except framing.ChannelTimeout:
            self.ended = "timeout"
        except framing.ChannelTooLarge as error:
            self.ended = "output_too_large"
            self.kill_policy()
            return {"ended": self.ended, "size": error.size}
        except (framing.ChannelError, OSError):
            self.ended = "env_killed"
        self.kill_policy()
        return {"ended": self.ended}

    def ask_api(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The API process's reply; a dead or silent API process is the host's failure (RuntimeError)."""
        try:
            framing.send(self.admin, message)
            reply = framing.receive(self.admin, MESSAGE_LIMIT, time.monotonic() + timeout_s)
        except (framing.ChannelError, OSError) as error:
            raise RuntimeError(f"the API process failed: {error}") from error
        if "output" not in reply:
            raise RuntimeError(f"the API process failed: {reply.get('error')}")
        return reply

    def _signal_policy(self, signum: int) -> None:
        """Signals B, if A named it and it was still there."""
        if len(self.policy_pidfds) == 2:
            try:
                signal.pidfd_send_signal(self.policy_pidfds[1], signum)
            except ProcessLookupError:
                pass

    def kill_policy(self) -> None:
        """SIGKILL A and B (B's pid namespace dies with it)."""
        for fd in self.policy_pidfds:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.cells.close()

    def kill(self) -> None:
        """SIGKILL every process of the episode and reap the API process."""
        self.kill_policy()
        if self.api_pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.api_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.api_pid, 0)
        for fd in [self.api_pidfd, *self.policy_pidfds]:
            if fd >= 0:
                os.close(fd)
        self.api_pidfd, self.policy_pidfds = -1, []
        self.admin.close()
