"""The iteration line's lost part and the rule that stops a run that loses work (orchestration/lost_work.py)."""

from __future__ import annotations

import pytest

from loop_agents.errors import LostWorkError
from loop_agents.orchestration.lost_work import check_lost_work, lost_text


def metrics(finished: int, **lost: int) -> dict[str, float]:
    row = {"collect/finished": finished, "collect/lost": sum(lost.values())}
    return {**row, **{f"collect/lost_{cause}": n for cause, n in lost.items()}}


def test_the_iteration_line_says_what_was_lost_and_why():
    assert lost_text(metrics(16)) == "lost 0"
    assert lost_text(metrics(12, env_error=1, env_timeout=3)) == "lost 4 (3 env_timeout, 1 env_error)"


def test_losing_more_than_the_bound_or_finishing_nothing_stops_the_run_in_one_line():
    check_lost_work(3, metrics(12, env_error=4), {}, 16, 0.25)  # 4 of 16: at the bound, the run goes on
    with pytest.raises(LostWorkError) as err:
        check_lost_work(3, metrics(11, env_error=1, env_timeout=4), {"env_timeout": "step timed out after 120.0 s"},
                        16, 0.25)  # fmt: skip
    assert str(err.value) == (
        "iteration 3 lost 5 (4 env_timeout, 1 env_error) of 16 episodes: more than collect.max_lost_fraction=0.25; "
        "last env_timeout: step timed out after 120.0 s"
    )
    with pytest.raises(
        LostWorkError, match="iteration 2 lost 1 \\(1 env_capacity\\) of 1 episodes: no episode"
    ):
        check_lost_work(2, metrics(0, env_capacity=1), {"env_capacity": "at capacity"}, 1, 1.0)  # even at 1.0
