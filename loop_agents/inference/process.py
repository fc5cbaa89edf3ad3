"""One server subprocess in its own process group: spawn, log to a file, wait for readiness, kill the whole tree.

The tree (api_server and vLLM's EngineCore) is recorded next to the log once ready; a new start with the
same log path first reaps what a SIGKILLed predecessor left (see loop_agents/child_process.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psutil

from loop_agents.child_process import (
    descendants_and_self,
    reap_recorded_tree,
    record_process_tree,
    terminate_with_parent,
)
from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.errors import InferenceServerError
from loop_agents.inference.plain_log import plain_log_environment
from loop_agents.inference.startup_stage import log_stage
from loop_agents.progress_lines import Heartbeat, format_duration


def _before_exec(cpu_affinity: list[int] | None):
    """The child's set-up before exec: SIGTERM when its parent dies (vLLM's handler also stops EngineCore), and its
    CPU affinity, which the engine processes it spawns inherit."""

    def setup() -> None:
        terminate_with_parent()
        if cpu_affinity:
            os.sched_setaffinity(0, set(cpu_affinity))

    return setup


class ServerProcess:
    """A subprocess started in a new session, so that one signal to its group reaches vLLM's engine workers too."""

    def __init__(
        self, cmd: list[str], env: dict[str, str], log_path: Path, cpu_affinity: list[int] | None = None
    ) -> None:
        self.cmd = cmd
        self.log_path = log_path
        self.tree_record = log_path.with_suffix(".pids")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = plain_log_environment(env, log_path)  # a file: no bars' redraws, no '\r', no colour codes
        leftovers = reap_recorded_tree(self.tree_record)
        with open(log_path, "ab") as log:
            if leftovers:
                log.write(f"\n=== killed {leftovers} processes left by a previous server\n".encode())
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                cmd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_before_exec(cpu_affinity),
            )

    @property
    def pid(self) -> int:
        """Process id of the API server (also its process-group id)."""
        return self._popen.pid

    def exit_code(self) -> int | None:
        """None while running, else the exit status."""
        return self._popen.poll()

    def log_tail(self, max_chars: int = 3000) -> str:
        """The end of the server log, for error messages."""
        try:
            return self.log_path.read_text(errors="replace")[-max_chars:]
        except OSError:
            return ""

    def wait_ready(self, base_url: str, model_root: str, served_name: str, deadline_s: float) -> None:
        """Poll `GET /v1/models` until the server lists `served_name` for `model_root`; raise if it exits or times out."""
        deadline = time.monotonic() + deadline_s
        last_error = self._last_probe_error = "no answer yet"
        stage = lambda: log_stage(self.log_path)  # noqa: E731 - what the server is doing, for the lines below
        with (
            Heartbeat("vLLM", f"starting (log {self.log_path.name})", stage),
            httpx.Client(trust_env=False, headers=auth_headers()) as http,
        ):
            while time.monotonic() < deadline:
                if self._ready_once(http, base_url, model_root, served_name) is True:
                    self._check_every_route_is_guarded(base_url)
                    record_process_tree(self.pid, self.tree_record)
                    waited = format_duration(time.monotonic() - deadline + deadline_s)
                    print(f"[vLLM] ready after {waited}: {base_url} serves {served_name}", flush=True)
                    return
                last_error = self._last_probe_error
                time.sleep(0.5)
        raise InferenceServerError(
            f"vLLM server not ready after {deadline_s:.0f} s ({last_error}); log {self.log_path}:\n{self.log_tail()}"
        )

    def _check_every_route_is_guarded(self, base_url: str) -> None:
        """A route outside `/v1` refuses a request without the key: the api_key_guard patch applied (a server whose
        vLLM plugin did not load, e.g. left off `VLLM_PLUGINS`, would answer it)."""
        status = httpx.get(f"{base_url}/version", timeout=30.0, trust_env=False).status_code
        if status != 401:
            raise InferenceServerError(
                f"vLLM server answered GET /version without the API key (HTTP {status}): the api_key_guard patch "
                f"(loop_agents/patches) did not apply; log {self.log_path}:\n{self.log_tail()}"
            )

    def _ready_once(self, http: httpx.Client, base_url: str, model_root: str, served_name: str) -> bool:
        """One readiness probe; raises if the process has exited, records why it is not ready yet."""
        code = self.exit_code()
        if code is not None:
            raise InferenceServerError(
                f"vLLM server exited with code {code} during start-up; log {self.log_path}:\n{self.log_tail()}"
            )
        try:
            reply = http.get(f"{base_url}/v1/models", timeout=5.0)
            if reply.status_code == 200:
                models = {m["id"]: m.get("root") for m in reply.json()["data"]}
                if models.get(served_name) == model_root:
                    return True
                self._last_probe_error = f"unexpected models {models}"
        except httpx.HTTPError as exc:
            self._last_probe_error = repr(exc)
        return False

    def kill_tree(self, grace_s: float) -> None:
        """SIGTERM the process group and every descendant, wait `grace_s`, then SIGKILL what is left (even if stopped)."""
        procs = descendants_and_self(self.pid)
        _signal_group(self.pid, signal.SIGTERM)
        _signal_group(self.pid, signal.SIGCONT)  # a SIGSTOPped process only acts on SIGTERM once continued
        for proc in procs:
            _signal_proc(proc, signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=grace_s)
        _signal_group(self.pid, signal.SIGKILL)
        for proc in alive:
            _signal_proc(proc, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5.0)
        try:
            self._popen.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        reap_recorded_tree(self.tree_record)  # members that left the group (none expected) die too


def kill_process_tree(pid: int, grace_s: float) -> None:
    """Terminate a process we did not spawn (an adopted server) and its descendants."""
    procs = descendants_and_self(pid)
    for proc in procs:
        _signal_proc(proc, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        _signal_proc(proc, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5.0)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_proc(proc: psutil.Process, sig: signal.Signals) -> None:
    try:
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        pass
