"""`InferenceServerActor`: the Ray actor that owns one VLLMServer and its health watchdog.

Create it with `make_inference_server_actor(config)`: on GPU it asks Ray for `len(config.gpu_ids)` GPUs, but the
server subprocess is pinned with CUDA_VISIBLE_DEVICES from `config.gpu_ids` (the gpu_allocation preset), so the
actor must be placed on the node that has them. Call `shutdown()` before `ray.kill`: a SIGKILLed actor cannot
stop its server (whose process group is separate so that one signal stops vLLM's engine workers too).
"""

from __future__ import annotations

import atexit
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import ray

from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.server import VLLMServer
from loop_agents.inference.watchdog import HealthWatchdog


class InferenceServer:
    """The actor's body; also usable in-process (tests, single-process runs)."""

    def __init__(
        self,
        config: InferenceConfig,
        log_path: str | None = None,
        gpu_ids: list[int] | None = None,
        watchdog: bool = True,
    ) -> None:
        if gpu_ids is not None:
            config = replace(config, gpu_ids=list(gpu_ids))
        self.server = VLLMServer(config)
        if log_path is not None:
            self.server.log_path = Path(log_path)
        self.watchdog = HealthWatchdog(self.server) if watchdog else None
        atexit.register(self.shutdown)

    def start(self) -> str:
        """Start the server (and the watchdog); returns the URL."""
        url = self.server.start()
        if self.watchdog is not None and not self.watchdog._thread.is_alive():
            self.watchdog.start()
        return url

    def url(self) -> str:
        """Base URL of the server."""
        return self.server.url

    def pid(self) -> int | None:
        """Process id of the server's API process (for tests and diagnostics)."""
        return self.server.pid

    def publish_adapter(
        self, adapter_path: str, name: str | None = None, retain_previous: bool = False
    ) -> str:
        """Serve a new LoRA adapter; returns its name. No request samples from the previous one afterwards,
        unless `retain_previous` keeps it loaded for a collection in flight (then `unload_adapter` it)."""
        return self.server.publish_adapter(adapter_path, name=name, retain_previous=retain_previous)

    def load_adapter(self, adapter_path: str, name: str) -> str:
        """Load an extra adapter (evaluation) beside the published one."""
        return self.server.load_adapter(adapter_path, name)

    def unload_adapter(self, name: str) -> None:
        """Unload an adapter loaded with load_adapter or retained by publish_adapter."""
        self.server.unload_adapter(name)

    def current_adapter(self) -> str | None:
        """Name of the adapter new requests should use."""
        return self.server.current_adapter

    def health(self) -> dict[str, Any]:
        """Liveness, restart count and timings."""
        return {
            "healthy": self.server.check_health(),
            "url": self.server.url,
            "pid": self.server.pid,
            "adapter": self.server.current_adapter,
            "start_count": self.server.start_count,
            "last_startup_s": self.server.last_startup_s,
            "last_publish_s": self.server.last_publish_s,
            "restarts": self.watchdog.restarts if self.watchdog else 0,
            "last_recovery_s": self.watchdog.last_recovery_s if self.watchdog else None,
            "suspended": self.server.suspended,
        }

    def restart(self) -> str:
        """Kill and restart the server, reloading the current adapter; returns the URL."""
        return self.server.restart()

    def set_quiet(self, quiet: bool) -> None:
        """Health probes without a sample while the learner computes on this server's cores (VLLMServer.set_quiet)."""
        self.server.set_quiet(quiet)

    def suspend(self) -> None:
        """Free the device for the learner (exclusive time-sharing)."""
        self.server.suspend()

    def resume(self) -> str:
        """Take the device back; returns the URL."""
        return self.server.resume()

    def shutdown(self) -> None:
        """Stop the watchdog and kill the server's process tree."""
        if self.watchdog is not None:
            self.watchdog.stop()
        self.server.stop()


InferenceServerActor = ray.remote(InferenceServer)


def make_inference_server_actor(
    config: InferenceConfig, name: str | None = None, watchdog: bool = True
) -> Any:
    """Create the Ray actor with GPU resources matching `config.gpu_ids` (none on CPU)."""
    options: dict[str, Any] = {"num_cpus": 0, "num_gpus": len(config.gpu_ids), "max_concurrency": 4}
    if name is not None:
        options["name"] = name
    return InferenceServerActor.options(**options).remote(
        InferenceConfig(**asdict(config)), watchdog=watchdog
    )
