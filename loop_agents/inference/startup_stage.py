"""What a starting vLLM server is doing, read from the end of its log (for the start-up progress lines).

vLLM prints its start-up as log lines; the newest line that names a known step says the stage. Read only the
last `TAIL_BYTES` of the file: the log of a long-lived server grows, and this runs every few seconds.
"""

from __future__ import annotations

from pathlib import Path

TAIL_BYTES = 64 * 1024

# (text in a log line, the stage it starts), in the order vLLM goes through them
STAGES = (
    ("=== ", "launching the Python process"),
    ("applied vLLM patch", "importing vLLM"),
    ("non-default args", "reading the model's config"),
    ("Resolved architecture", "reading the model's config"),
    ("Initializing a V1 LLM engine", "starting the engine process"),
    ("Starting to load model", "loading the model weights"),
    ("Loading weights took", "setting up the KV cache"),
    ("KV cache", "setting up the KV cache"),
    ("init engine", "warming up the model"),
    ("Capturing CUDA graph", "capturing CUDA graphs"),
    ("Supported tasks", "starting the HTTP server"),
    ("Starting vLLM server", "starting the HTTP server"),
    ("Application startup complete", "answering its first request"),
)


def stage_of(lines: list[str]) -> str | None:
    """The stage of the newest line in `lines` that names one; None when none does."""
    for line in reversed(lines):
        for needle, stage in STAGES:
            if needle in line:
                return stage
    return None


def log_stage(log_path: Path) -> str | None:
    """The start-up stage of the server writing `log_path` (None: unreadable or nothing known yet).

    Only the part after the log's last '=== ... starting:' header counts (a log holds every start of the
    server in a run)."""
    try:
        with Path(log_path).open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - TAIL_BYTES, 0))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    start = text.rfind("\n=== ")
    return stage_of((text[start + 1 :] if start >= 0 else text).splitlines())
