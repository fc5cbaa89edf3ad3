"""RL algorithms as small pure functions: advantage estimators, losses, aggregation, filtering.

An algorithm = an advantage estimator (advantages/) + a per-token loss (losses/) + an aggregation
(aggregation.py), chosen by `AlgorithmConfig`; `registry.preset("loop")` gives the LOOP paper's
defaults. The learner is algorithm-blind: it receives per-token advantages and calls these.
"""

from loop_agents.algorithms.aggregation import aggregate, trajectory_weights
from loop_agents.algorithms.compute import AdvantageResult, compute_advantages
from loop_agents.algorithms.config import AlgorithmConfig, loop_clip_range
from loop_agents.algorithms.filtering import filter_by_advantage
from loop_agents.algorithms.registry import preset

__all__ = [
    "AdvantageResult",
    "AlgorithmConfig",
    "aggregate",
    "compute_advantages",
    "filter_by_advantage",
    "loop_clip_range",
    "preset",
    "trajectory_weights",
]
