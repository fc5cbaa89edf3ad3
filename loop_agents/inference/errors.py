"""Errors of the inference package, each saying whether a retry can help."""

from __future__ import annotations

from loop_agents.inference.protocol import InferenceFailure


class InferenceServerError(RuntimeError):
    """The server could not be started, adopted, or administered (the message names the cause and the log file)."""


class InvalidInferenceRequest(ValueError):
    """The request itself is wrong (prompt too long, unknown model, bad parameter); retrying cannot help."""


class AdapterError(ValueError):
    """A LoRA adapter directory is unusable for this server (missing files, rank above max_lora_rank)."""


class RequestAborted(InferenceFailure):
    """The server aborted the request (e.g. during a publish that timed out draining); retry it."""
