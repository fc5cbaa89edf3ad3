"""The whole run's ETA, one line after each iteration: elapsed, iterations left x the recent mean iteration.

    [driver] run: iteration 6/18, 3 min 10 s elapsed; 12 left x 31 s (mean of the last 5) = ETA 6 min 12 s

The mean is over the last `window` iterations of this process (a resumed run does not count the iterations
of before, and the first iterations' start-up costs leave the window). The held-out evaluation after training
comes on top; the line says so on the last iteration rather than pretending it is done.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from loop_agents.progress_lines import format_duration


class RunEta:
    """`eta.line(iteration, seconds of that iteration)` -> the run's progress line."""

    def __init__(self, last_iteration: int, window: int = 5, started: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.last_iteration, self.clock = last_iteration, clock
        self.started = clock() if started is None else started  # epoch seconds (the process's start)
        self.recent: deque[float] = deque(maxlen=window)

    def line(self, iteration: int, iteration_s: float) -> str:
        self.recent.append(iteration_s)
        elapsed = format_duration(self.clock() - self.started)
        head = f"[driver] run: iteration {iteration}/{self.last_iteration}, {elapsed} elapsed"
        left = self.last_iteration - iteration
        if left <= 0:
            return f"{head}; training done, the final evaluations follow"
        mean = sum(self.recent) / len(self.recent)
        return (
            f"{head}; {left} left x {format_duration(mean)} (mean of the last {len(self.recent)}) "
            f"= ETA {format_duration(left * mean)}"
        )
