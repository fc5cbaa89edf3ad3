"""Deprecated: the Environment protocol lives in `loop_agents.rollout.environment` (below the episode runner that
consumes it). This alias keeps environment families written against the old path importing, with one warning."""

from __future__ import annotations

import warnings

from loop_agents.rollout.environment import (  # noqa: F401 - re-exported for families written before the move
    Environment,
    EnvironmentFailure,
    Evaluation,
    ResetResult,
    StepResult,
    TaskSource,
)

warnings.warn(
    "loop_agents.envs.protocol moved to loop_agents.rollout.environment; import it from there",
    DeprecationWarning,
    stacklevel=2,
)
