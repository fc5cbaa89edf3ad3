"""A thread that probes a VLLMServer and restarts it when it is dead (exited) or hung (probes time out)."""

from __future__ import annotations

import logging
import threading
import time

from loop_agents.inference.server import VLLMServer

logger = logging.getLogger(__name__)


class HealthWatchdog:
    """Restarts `server` after `config.health_failures_before_restart` consecutive failed probes.

    In-flight requests on a dead server fail at once (connection reset); on a hung one they hit the client's
    request timeout. Either way the client raises InferenceFailure and the caller retries; after the restart
    the same URL serves the same adapter name again.
    """

    def __init__(self, server: VLLMServer) -> None:
        self.server = server
        self.restarts = 0
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self.last_recovery_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vllm-health-watchdog", daemon=True)

    def start(self) -> None:
        """Begin probing in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Stop probing (does not stop the server)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.server.config.health_timeout_s * 3 + 5)

    def _run(self) -> None:
        config = self.server.config
        first_failure_at: float | None = None
        while not self._stop.wait(config.health_interval_s):
            healthy = self.server.probe_unless_busy()
            if healthy is None or healthy:
                self.consecutive_failures, first_failure_at = 0, None
                continue
            self.consecutive_failures += 1
            first_failure_at = first_failure_at or time.monotonic()
            if self.consecutive_failures < config.health_failures_before_restart:
                continue
            logger.warning(
                "vLLM server at %s failed %d probes; restarting", self.server.url, self.consecutive_failures
            )
            try:
                self.server.restart()
                self.restarts += 1
                self.last_recovery_s = time.monotonic() - first_failure_at
                self.last_error = None
            except Exception as exc:  # keep watching: the next round tries again
                self.last_error = repr(exc)
                logger.exception("vLLM server restart failed")
            self.consecutive_failures, first_failure_at = 0, None
