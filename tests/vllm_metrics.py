"""vLLM's Prometheus page (/metrics), read by the tests that must act while a server samples."""

from __future__ import annotations

import re

_RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} (\S+)", re.M)


def requests_running(metrics_text: str) -> float:
    """Requests the server is running now, summed over its engines (0 for an empty page)."""
    return sum(float(value) for value in _RUNNING.findall(metrics_text))
