"""The run's ETA line: elapsed, iterations left x the mean of the recent iterations."""

from __future__ import annotations

from loop_agents.orchestration.run_eta import RunEta


def test_eta_is_iterations_left_times_the_recent_mean():
    now = [1000.0]
    eta = RunEta(18, window=2, started=900.0, clock=lambda: now[0])
    assert eta.line(1, 40.0) == (
        "[driver] run: iteration 1/18, 1 min 40 s elapsed; 17 left x 40 s (mean of the last 1) = ETA 11 min 20 s"
    )
    now[0] = 1030.0
    eta.line(2, 30.0)
    now[0] = 1050.0
    # the window holds the last two (30 s, 20 s): the first, slower iteration no longer counts
    assert eta.line(3, 20.0).endswith("15 left x 25 s (mean of the last 2) = ETA 6 min 15 s")


def test_last_iteration_says_the_evaluations_follow():
    eta = RunEta(3, started=0.0, clock=lambda: 125.0)
    assert (
        eta.line(3, 10.0)
        == "[driver] run: iteration 3/3, 2 min 05 s elapsed; training done, the final evaluations follow"
    )
