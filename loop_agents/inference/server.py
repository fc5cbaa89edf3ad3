"""`VLLMServer`: one real vLLM OpenAI-compatible server subprocess, its LoRA adapters, restarts and time-sharing.

Publishing a new adapter (`publish_adapter`) follows the reference's runtime-LoRA path (study §1.7) without its
barriers: the server itself guarantees that once the call returns no request samples from the old adapter:
1. load the new adapter under a new unique name; local clients switch to it;
2. unload the old one, so a request that still names it is rejected (404; the client re-reads the name);
3. pause the engine until requests admitted before step 2 have finished (`/pause?mode=wait`; on timeout they
   are aborted and their clients retry), clear the prefix cache (its KV entries were computed with the old
   adapter), resume.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import httpx
import psutil

from loop_agents.inference.adapter_check import validate_adapter_dir
from loop_agents.inference.api_key import auth_headers, ensure_run_key
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.errors import AdapterError, InferenceServerError
from loop_agents.inference.launch import server_command, server_environment
from loop_agents.inference.process import ServerProcess, kill_process_tree
from loop_agents.ports import free_port, port_is_free

_GENERATED_TOKENS = re.compile(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)", re.M)


class AdapterFollower(Protocol):
    """A client that can be told which adapter to use (VLLMClient)."""

    def use_adapter(self, name: str | None) -> None: ...


class VLLMServer:
    """Owns one vLLM server process; thread-safe (a watchdog thread may restart it while others publish)."""

    def __init__(self, config: InferenceConfig) -> None:
        config.validate()
        self.config = config
        self._lock = threading.RLock()
        self._process: ServerProcess | None = None
        self._adopted_pid: int | None = None
        self._port: int | None = config.port
        self._version = 0
        self._suspended = False
        self._quiet = False  # health probes skip the one-token sample (set_quiet)
        self.current_adapter: str | None = None
        self.current_adapter_path: str | None = None
        self.extra_adapters: dict[
            str, str
        ] = {}  # name -> path of adapters loaded beside the policy (evaluation)
        self.log_path = Path(config.run_dir) / "vllm_server.log"
        self.start_count = 0
        self.last_startup_s: float | None = None
        self.last_publish_s: float | None = None
        # One pooled client: httpx.post() builds a new client and SSL context per call (~70 ms each).
        ensure_run_key()  # the server it starts and this client share the run's key (inference/api_key.py)
        self._http = httpx.Client(trust_env=False, headers=auth_headers())
        self._generated_tokens: float | None = None  # vLLM's counter at the last timed-out health probe

    # ---------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:40123 (stable across restarts while the port stays free)."""
        if self._port is None:
            raise InferenceServerError("server has no port yet: call start() first")
        return f"http://{self.config.host}:{self._port}"

    @property
    def pid(self) -> int | None:
        """Process id of the API server process (None when stopped)."""
        if self._process is not None:
            return self._process.pid
        return self._adopted_pid

    @property
    def suspended(self) -> bool:
        """True between suspend() and resume()."""
        return self._suspended

    def start(self) -> str:
        """Start (or adopt) the server and wait until it is ready; returns its URL. Idempotent."""
        with self._lock:
            if self.is_running():
                return self.url
            if self._port is not None and not port_is_free(self._port, self.config.host):
                if self.config.adopt_existing and self._try_adopt(self._port):
                    return self.url
                if self.config.port is not None:
                    raise InferenceServerError(_port_in_use_message(self._port))
                self._port = None  # our own previous port was taken meanwhile: pick another
            if self._port is None:
                self._port = free_port(self.config.host)
            started = time.monotonic()
            cmd = server_command(self.config, self._port)
            process = ServerProcess(
                cmd, server_environment(self.config), self.log_path, cpu_affinity=self.config.cpu_affinity
            )
            try:
                process.wait_ready(
                    self.url,
                    self.config.model_path,
                    self.config.served_model_name,
                    self.config.startup_timeout_s,
                )
            except BaseException:
                process.kill_tree(self.config.shutdown_timeout_s)
                raise
            self._process = process
            self.start_count += 1
            self.last_startup_s = time.monotonic() - started
            if self.current_adapter is not None and self.current_adapter_path is not None:
                self._load_adapter(self.current_adapter, self.current_adapter_path)
            for extra_name, extra_path in self.extra_adapters.items():
                self._load_adapter(extra_name, extra_path)
            return self.url

    def stop(self, kill_adopted: bool = False) -> None:
        """Kill the whole server process tree (an adopted server is only detached unless `kill_adopted`)."""
        with self._lock:
            if self._process is not None:
                self._process.kill_tree(self.config.shutdown_timeout_s)
                self._process = None
            if self._adopted_pid is not None:
                if kill_adopted:
                    kill_process_tree(self._adopted_pid, self.config.shutdown_timeout_s)
                self._adopted_pid = None

    def restart(self) -> str:
        """Kill and start again on the same port, then reload the current adapter under the same name."""
        with self._lock:
            self.stop(kill_adopted=True)
            self._suspended = False
            return self.start()

    def is_running(self) -> bool:
        """True if the server process exists (it may still be hung; see check_health)."""
        if self._process is not None:
            return self._process.exit_code() is None
        if self._adopted_pid is not None:
            return psutil.pid_exists(self._adopted_pid)
        return False

    def check_health(self, probe_timeout_s: float | None = None) -> bool:
        """Process alive, `/health` answers 200 and (if configured) one token is sampled within the timeout, or the
        engine's generated-token count moved since the last timed-out probe (busy with a queue, not hung)."""
        if not self.is_running():
            return False
        timeout = self.config.health_timeout_s
        try:
            if self._http.get(f"{self.url}/health", timeout=timeout).status_code != 200:
                return False
            if self.config.health_probe_generate and not self._quiet:
                body = {
                    "model": self.config.served_model_name,
                    "prompt": [0],
                    "max_tokens": 1,
                    "temperature": 0.0,
                }
                try:
                    probe_timeout = probe_timeout_s or timeout
                    reply = self._http.post(f"{self.url}/v1/completions", json=body, timeout=probe_timeout)
                    return reply.status_code == 200
                except httpx.TimeoutException:
                    return self._engine_progressed()  # queued behind real work is busy, not hung
            return True
        except httpx.HTTPError:
            return False

    def _engine_progressed(self) -> bool:
        """True if vLLM's generated-token counter moved since the previous call (the engine is sampling)."""
        text = self._http.get(f"{self.url}/metrics", timeout=self.config.health_timeout_s).text
        generated = sum(float(v) for v in _GENERATED_TOKENS.findall(text))
        progressed = self._generated_tokens is not None and generated > self._generated_tokens
        self._generated_tokens = generated
        return progressed

    def set_quiet(self, quiet: bool) -> None:
        """While quiet, a health probe is `/health` only (a dead process or API still shows), without the one-token
        sample that would catch a hung engine. For a learner that computes on the server's cores while the server
        has nothing to sample (CPU, synchronous): each sample wakes the engine's OpenMP threads on those cores, and
        on a 2-core machine the 25 M trl_compare learner took 14.4-16.5 s an iteration with a sample every 5 s
        against 11.7-13.2 s without (2026-11-26, same run settings)."""
        self._quiet = quiet

    def probe_unless_busy(self) -> bool | None:
        """check_health(), or None without probing while a start, publish or suspension holds the server."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return None if self._suspended else self.check_health()
        finally:
            self._lock.release()

    # ---------------------------------------------------------------- time-sharing
    def suspend(self) -> None:
        """Free the accelerator for the learner: stop the process ("stop") or vLLM sleep level 1 ("sleep", GPU)."""
        with self._lock:
            if self._suspended:
                return
            if self.config.time_share_mode == "sleep":
                self._admin_post("/sleep", params={"level": "1"})
            else:
                self.stop()
            self._suspended = True

    def resume(self) -> str:
        """Undo suspend(): start again (reloading the adapter) or wake up; returns the URL."""
        with self._lock:
            if self._suspended and self.config.time_share_mode == "sleep":
                self._admin_post("/wake_up")
            self._suspended = False
            return self.start()

    # ---------------------------------------------------------------- adapters
    def publish_adapter(
        self,
        adapter_path: str | Path,
        name: str | None = None,
        clients: Iterable[AdapterFollower] = (),
        retain_previous: bool = False,
    ) -> str:
        """Serve the adapter at `adapter_path` to all new requests; returns its name. See the module docstring.

        `retain_previous`: the adapter being replaced stays loaded as an extra adapter, and its requests run
        on undrained (async one-step-off: a collection already in flight samples from it); the caller
        unloads it with `unload_adapter` when that collection is done.
        """
        path = self._validated_adapter_path(adapter_path)
        with self._lock:
            started = time.monotonic()
            if name is None:
                self._version += 1
                name = f"{self.config.adapter_name_prefix}-{self._version}"
            if name == self.current_adapter or name in self.extra_adapters:
                raise AdapterError(f"adapter name {name!r} is already loaded; publish under a new name")
            self._load_adapter(name, path)
            old, old_path = self.current_adapter, self.current_adapter_path
            self.current_adapter, self.current_adapter_path = name, path
            for client in clients:
                client.use_adapter(name)
            if retain_previous:
                # vLLM keys cached prefix blocks by adapter, so the old adapter's blocks are never reused
                if old is not None:
                    self.extra_adapters[old] = old_path
            else:
                if old is not None:
                    self._admin_post("/v1/unload_lora_adapter", {"lora_name": old})
                self._drain_and_clear_cache()
            self.last_publish_s = time.monotonic() - started
            return name

    def _validated_adapter_path(self, adapter_path: str | Path) -> str:
        """The adapter's absolute path, after checking it fits this server (rank) and its model (shapes)."""
        path = str(Path(adapter_path).resolve())
        validate_adapter_dir(
            path, self.config.max_lora_rank if self.config.enable_lora else 0, self.config.model_path
        )
        return path

    def load_adapter(self, adapter_path: str | Path, name: str) -> str:
        """Load an extra adapter beside the published one (e.g. a checkpoint under evaluation); returns `name`."""
        path = self._validated_adapter_path(adapter_path)
        with self._lock:
            if name == self.current_adapter or name in self.extra_adapters:
                raise AdapterError(f"adapter name {name!r} is already loaded")
            self._load_adapter(name, path)
            self.extra_adapters[name] = path
            return name

    def unload_adapter(self, name: str) -> None:
        """Unload an extra adapter (from load_adapter, or one publish_adapter retained); the published one is
        replaced by publish_adapter."""
        with self._lock:
            if name not in self.extra_adapters:
                raise AdapterError(
                    f"adapter {name!r} was not loaded with load_adapter (loaded: {list(self.extra_adapters)})"
                )
            del self.extra_adapters[name]
            self._admin_post("/v1/unload_lora_adapter", {"lora_name": name})

    def loaded_adapters(self) -> list[str]:
        """Names of the LoRA adapters the server reports in /v1/models."""
        reply = self._http.get(f"{self.url}/v1/models", timeout=self.config.admin_timeout_s)
        reply.raise_for_status()
        return [m["id"] for m in reply.json()["data"] if m.get("parent") is not None]

    def reset_prefix_cache(self) -> None:
        """Drop cached KV blocks (they were computed by the previous weights)."""
        self._admin_post("/reset_prefix_cache")

    def _load_adapter(self, name: str, path: str) -> None:
        self._admin_post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})

    def _drain_and_clear_cache(self) -> None:
        try:
            self._admin_post(
                "/pause",
                params={"mode": "wait", "clear_cache": "true"},
                timeout_s=self.config.publish_drain_timeout_s,
            )
        except InferenceServerError:
            # Requests still running on the old adapter after the drain budget are aborted; their clients retry.
            self._admin_post("/abort_requests", {})
            self._admin_post("/pause", params={"mode": "abort", "clear_cache": "true"})
        try:
            self.reset_prefix_cache()
        finally:
            self._admin_post("/resume")

    def _admin_post(
        self, path: str, body: dict | None = None, params: dict | None = None, timeout_s: float | None = None
    ) -> None:
        try:
            reply = self._http.post(
                f"{self.url}{path}",
                json=body,
                params=params,
                timeout=timeout_s or self.config.admin_timeout_s,
            )
        except httpx.HTTPError as exc:
            raise InferenceServerError(f"POST {path} to {self.url} failed: {exc!r}") from exc
        if reply.status_code != 200:
            raise InferenceServerError(
                f"POST {path} {body or ''} -> HTTP {reply.status_code}: {reply.text[:500]}"
            )

    # ---------------------------------------------------------------- adoption
    def _try_adopt(self, port: int) -> bool:
        """Adopt the server on `port` only if its argv equals ours and it serves our model (the reference adopts blindly)."""
        owner = _listening_process(port)
        if owner is None:
            return False
        expected = server_command(self.config, port)[1:]
        try:
            actual = owner.cmdline()
        except psutil.Error:
            return False
        if actual[1:] != expected:
            raise InferenceServerError(
                f"port {port} is served by pid {owner.pid} with different settings; not adopting.\n"
                f"expected: {' '.join(expected)}\nfound:    {' '.join(actual[1:])}"
            )
        self._adopted_pid = owner.pid
        ServerProcess.wait_ready(
            _AdoptedView(),
            self.url,
            self.config.model_path,
            self.config.served_model_name,
            self.config.admin_timeout_s,
        )
        return True


class _AdoptedView:
    """Lets ServerProcess.wait_ready poll an adopted server (no exit code, no log of ours)."""

    log_path = Path("<adopted server>")

    def exit_code(self) -> None:
        return None

    def log_tail(self) -> str:
        return ""


def _listening_process(port: int) -> psutil.Process | None:
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            return psutil.Process(conn.pid)
    return None


def _port_in_use_message(port: int) -> str:
    owner = _listening_process(port)
    who = f"pid {owner.pid} ({' '.join(owner.cmdline())[:200]})" if owner else "another process"
    return f"port {port} is already in use by {who}; choose another port or set adopt_existing for a matching server"
