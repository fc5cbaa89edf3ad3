"""Our environment families in TRL's `environment_factory` contract (see `environment.py`)."""

from loop_agents.envs.trl.environment import trl_environment, trl_environments

__all__ = ["trl_environment", "trl_environments"]
