"""Rich progress bars with ETA for the driver's two long phases: collecting rollouts and learning.

Shown only on a terminal (`logging.progress`, and rich's own detection: a TTY, or TTY_COMPATIBLE=1 /
FORCE_COLOR set); a log file gets the one-line summary per iteration instead of bar redraws. Each phase is
one transient bar: it disappears when the phase ends, so the iteration lines stay readable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

Update = Callable[[int, int], None]  # (completed, total)


class PhaseProgress:
    """`with bars.phase("collect 3/30", total) as update: ... update(done, total)`; `update` is None when
    the bars are off, so callers skip the work of measuring progress."""

    def __init__(self, enabled: bool, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal

    @contextmanager
    def phase(self, description: str, total: int) -> Iterator[Update | None]:
        if not self.enabled:
            yield None
            return
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=self.console, transient=True) as bars:
            task = bars.add_task(description, total=max(total, 1))

            def update(completed: int, new_total: int) -> None:
                bars.update(task, completed=completed, total=max(new_total, 1))

            yield update
