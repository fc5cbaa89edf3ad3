"""Lost work of a collection: the words for an iteration's or an evaluation's lost episodes, and the stop rule.

An episode is lost when it failed after its retries (orchestration/collector.py counts it under its cause). Every
iteration line says how many were lost and why; an iteration that lost more than `collect.max_lost_fraction` of its
episodes, or finished none, stops the run (`LostWorkError`: one line naming the cause and the last error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loop_agents.errors import LostWorkError
from loop_agents.orchestration.collector import LOSS_CAUSES


def lost_causes(metrics: Mapping[str, Any], prefix: str = "collect/") -> list[tuple[str, int]]:
    """(cause, episodes) of the causes that lost any, most first."""
    found = [(cause, int(metrics.get(f"{prefix}lost_{cause}") or 0)) for cause in LOSS_CAUSES]
    return sorted(((c, n) for c, n in found if n), key=lambda item: -item[1])


def lost_text(metrics: Mapping[str, Any], prefix: str = "collect/") -> str:
    """`lost 0`, or `lost 5 (3 env_timeout, 2 env_error)`."""
    lost = int(metrics.get(f"{prefix}lost") or 0)
    causes = ", ".join(f"{n} {cause}" for cause, n in lost_causes(metrics, prefix))
    return f"lost {lost}" + (f" ({causes})" if causes else "")


def check_lost_work(
    iteration: int, metrics: Mapping[str, Any], errors: Mapping[str, str], planned: int, max_fraction: float
) -> None:
    """Raise LostWorkError when the iteration lost more than `max_fraction` of its `planned` episodes or finished
    none; the message names the main cause and its last error."""
    lost, finished = int(metrics.get("collect/lost") or 0), int(metrics.get("collect/finished") or 0)
    if finished > 0 and lost <= max_fraction * planned:
        return
    causes = lost_causes(metrics)
    last = f"; last {causes[0][0]}: {errors.get(causes[0][0], '?')}" if causes else ""
    rule = "no episode finished" if finished == 0 else f"more than collect.max_lost_fraction={max_fraction:g}"
    raise LostWorkError(f"iteration {iteration} {lost_text(metrics)} of {planned} episodes: {rule}{last}")
