"""Families written against the Environment protocol's old path (`loop_agents.envs.protocol`) still import it,
with one DeprecationWarning naming the new one (`loop_agents.rollout.environment`)."""

from __future__ import annotations

import importlib
import sys

import pytest

from loop_agents.rollout import environment


def test_the_old_protocol_path_imports_the_same_classes_with_a_warning():
    sys.modules.pop("loop_agents.envs.protocol", None)
    with pytest.warns(DeprecationWarning, match="loop_agents.rollout.environment"):
        old = importlib.import_module("loop_agents.envs.protocol")
    for name in (
        "Environment",
        "EnvironmentFailure",
        "Evaluation",
        "ResetResult",
        "StepResult",
        "TaskSource",
    ):
        assert getattr(old, name) is getattr(environment, name)
