"""ScalingInter-RL turn budgets: how many agent turns an episode may take at training iteration i.

AgentGym-RL (docs/reference-agentgym-rl.md §3) caps the interaction rounds per episode and raises the cap
in stages ("ScalingInter-RL"): with stage length K and budgets [b_0, b_1, ...], training step s
(1-based) uses b_stage with stage = min(floor((s - 1) / K), len - 1). Its scheduler keeps a mutable
counter that is restored on resume one step behind, so a run resumed exactly at a stage boundary
jumps to the next stage ~K steps early (reference §3, §8.1 item 8). Here the budget is a pure
function of the iteration number; a resumed run asks with the same iteration and gets the same
budget as an uninterrupted run. There is no state to save.

Schedules:
- `fixed`: every iteration uses `max_turns`.
- `stepwise`: iteration i (1-based) uses budgets[min((i - 1) // stage_iterations, len(budgets) - 1)].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class TurnSchedule(Protocol):
    """Turn budget as a function of the (1-based) training iteration."""

    def budget(self, iteration: int) -> int: ...


def _check_iteration(iteration: int) -> None:
    if not isinstance(iteration, int) or iteration < 0:
        raise ValueError(
            f"iteration must be a non-negative int (1-based; 0 = before training), got {iteration!r}"
        )


@dataclass(frozen=True)
class FixedTurnSchedule:
    """AgentGym-RL's `fixed` rounds: the same budget at every iteration."""

    max_turns: int

    def __post_init__(self) -> None:
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ValueError(f"turn_schedule.max_turns must be an int >= 1, got {self.max_turns!r}")

    def budget(self, iteration: int) -> int:
        _check_iteration(iteration)
        return self.max_turns


@dataclass(frozen=True)
class StepwiseTurnSchedule:
    """ScalingInter-RL's `scaling_inter_stepwise`: budgets[k] for iterations k*K+1 .. (k+1)*K, then the last."""

    budgets: tuple[int, ...]
    stage_iterations: int

    def __post_init__(self) -> None:
        if not self.budgets:
            raise ValueError("turn_schedule.budgets must list at least one budget for kind=stepwise")
        if any(not isinstance(b, int) or b < 1 for b in self.budgets):
            raise ValueError(f"turn_schedule.budgets must all be ints >= 1, got {list(self.budgets)}")
        if not isinstance(self.stage_iterations, int) or self.stage_iterations < 1:
            raise ValueError(
                f"turn_schedule.stage_iterations must be an int >= 1, got {self.stage_iterations!r}"
            )

    def stage(self, iteration: int) -> int:
        """Index into `budgets` used at `iteration` (iteration 0, before training, counts as stage 0)."""
        _check_iteration(iteration)
        return min(max(iteration - 1, 0) // self.stage_iterations, len(self.budgets) - 1)

    def budget(self, iteration: int) -> int:
        return self.budgets[self.stage(iteration)]


def make_turn_schedule(cfg: Any) -> FixedTurnSchedule | StepwiseTurnSchedule:
    """Build the schedule from a config with `kind`, `max_turns`, `budgets`, `stage_iterations`
    (the `env.turn_schedule` node of the Hydra config, or any object/dict with those fields)."""
    get = cfg.get if isinstance(cfg, dict) else lambda key, default=None: getattr(cfg, key, default)
    kind = get("kind", "fixed")
    if kind == "fixed":
        return FixedTurnSchedule(int(get("max_turns", 10)))
    if kind == "stepwise":
        budgets: Sequence[int] = get("budgets", ()) or ()
        return StepwiseTurnSchedule(tuple(int(b) for b in budgets), int(get("stage_iterations", 100)))
    raise ValueError(f"turn_schedule.kind must be 'fixed' or 'stepwise', got {kind!r}")
