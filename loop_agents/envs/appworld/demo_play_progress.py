"""Progress of playing AppWorld's scripted demonstrations, read from the files the players write.

`envs/appworld/demos/episodes.py` plays the plan in worker processes under a temporary folder of
`<root>/loop_agents_demos/`: each worker reads `plan_<n>.json` (a list of episodes) and appends one line per
played episode to `played_<n>.jsonl`. Counting those lines against the plans' lengths gives the progress
without touching the players; a line every 10 s says how many are played, the rate and the ETA.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loop_agents.progress_lines import EVERY_S, Ticker


def played_counts(demos_dir: Path) -> tuple[int, int]:
    """(episodes played, episodes planned) over the play folders now under `demos_dir` (0, 0: none)."""
    done = total = 0
    for plan in demos_dir.glob("*/plan_*.json"):
        try:
            total += len(json.loads(plan.read_text()))
            played = plan.with_name(plan.name.replace("plan_", "played_")).with_suffix(".jsonl")
            if played.exists():
                with played.open("rb") as f:
                    done += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        except (OSError, ValueError):  # a plan being written or a folder being removed: next time
            continue
    return done, total


@contextmanager
def played_demos_progress(root: Path, every_s: float = EVERY_S) -> Iterator[None]:
    """While the block runs, print '[warm start] 120/1920 demonstration episodes played (6 %), ...' at most
    every `every_s` if episodes are being played under `root` (nothing when they come from the cache)."""
    stop = threading.Event()
    demos_dir = Path(root) / "loop_agents_demos"

    def watch() -> None:
        ticker: Ticker | None = None
        while not stop.wait(1.0):
            done, total = played_counts(demos_dir)
            if total == 0:
                continue
            if ticker is None or ticker.total != total:
                ticker = Ticker("warm start", total, "demonstration episodes played", every_s)
            ticker.update(done)

    thread = threading.Thread(target=watch, name="demo play progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
