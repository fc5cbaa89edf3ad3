"""What a scenario template produces for one task variant, and the unit tests it is scored by."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class UnitTest:
    """One `with test(requirement):` block of the task's evaluation.py.

    `code` runs inside `evaluate(test, public_data, private_data, main_user, models,
    ground_truth_answer)` with `predicted_answer` already parsed; `label` is AppWorld's
    `no_op_fail` (a no-op solution must fail it) or `no_op_pass`.
    """

    requirement: str
    code: str
    label: str = "no_op_fail"


@dataclass
class TaskContent:
    """A task variant after its rows were created in the task databases."""

    instruction: str
    answer: Any  # ground-truth answer (None for tasks that only change state)
    tests: list[UnitTest]
    solution: str  # correct hand-written solution code (one cell), kept as ground_truth/solution.py
    public_data: dict[str, Any] = field(default_factory=dict)
    private_data: dict[str, Any] = field(default_factory=dict)
    num_api_calls: int = 0  # API calls the solution makes (metadata only)
