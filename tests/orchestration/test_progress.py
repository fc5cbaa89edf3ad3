"""The driver's progress bars: shown on a terminal with counts and an ETA, absent (and free) elsewhere."""

from __future__ import annotations

import io

from rich.console import Console

from loop_agents.orchestration.progress import PhaseProgress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120), out


def test_a_terminal_gets_a_bar_with_counts_and_eta() -> None:
    console, out = _console(terminal=True)
    bars = PhaseProgress(True, console)
    with bars.phase("collect 3/30", 1) as update:
        assert update is not None
        for done in range(1, 33):
            update(done, 32)
        console.file.flush()
    text = out.getvalue()
    assert "collect 3/30" in text and "32/32" in text and "ETA" in text


def test_no_terminal_or_switched_off_means_no_bar_and_no_callback() -> None:
    for terminal, enabled in ((False, True), (True, False)):
        console, out = _console(terminal)
        with PhaseProgress(enabled, console).phase("learn 1/3", 4) as update:
            assert update is None
        assert out.getvalue() == ""
