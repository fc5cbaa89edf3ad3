"""vLLM's Prometheus page (/metrics), read by the tests that must act while a server samples or count what it did."""

from __future__ import annotations

import re


def metric_sum(metrics_text: str, name: str) -> float:
    """The value of metric `name` (e.g. `vllm:num_requests_running`) summed over its label sets (0 if absent)."""
    pattern = rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)"
    return sum(float(value) for value in re.findall(pattern, metrics_text, re.M))


def requests_running(metrics_text: str) -> float:
    """Requests the server is running now, summed over its engines (0 for an empty page)."""
    return metric_sum(metrics_text, "vllm:num_requests_running")
