"""Reward of an AppWorld episode from the engine's unit-test report (docs/reference-ml-loop.md §4.4).

partial: R = passes / num_tests (LOOP's training default, `sparse_reward: false`, penalties 0);
success: R = 1 if every test passed else 0 (LOOP's evaluation setting).
"""

from __future__ import annotations

from typing import Any

from loop_agents.rollout.environment import Evaluation


def evaluation_from_report(report: dict[str, Any], mode: str) -> Evaluation:
    """Turns AppWorld's `TestTracker.to_dict()` into an Evaluation with per-test details."""
    passes, failures = report.get("passes"), report.get("failures")
    if not isinstance(passes, list) or not isinstance(failures, list):
        raise ValueError(f"AppWorld evaluation report lacks passes/failures lists: {sorted(report)}")
    num_tests = report.get("num_tests") or len(passes) + len(failures)
    if num_tests <= 0:
        raise ValueError(f"AppWorld evaluation report has no tests: {report}")
    success = bool(report.get("success")) and not failures
    if mode == "partial":
        reward = len(passes) / num_tests
    elif mode == "success":
        reward = 1.0 if success else 0.0
    else:
        raise ValueError(f"unknown AppWorld reward mode {mode!r} (partial | success)")
    tests = [{"requirement": p["requirement"], "passed": True, "message": ""} for p in passes]
    tests += [
        {"requirement": f["requirement"], "passed": False, "message": f.get("trace", "")} for f in failures
    ]
    details = {
        "num_tests": num_tests,
        "num_passed": len(passes),
        "pass_fraction": len(passes) / num_tests,
        "difficulty": report.get("difficulty"),
        "tests": tests,
    }
    return Evaluation(reward=reward, success=success, details=details)
