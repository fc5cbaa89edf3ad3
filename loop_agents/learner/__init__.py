"""The learner: LoRA policy (+ critic) trained with FSDP2 on any backend, algorithm-blind.

`Learner(LearnerConfig, AlgorithmConfig)`: `train_iteration(trajectories)`, `save_checkpoint(dir,
extra_state)`, `load_checkpoint(dir)`, `export_adapter(dir)`, `stress_test()`, `compute_values(...)`.
"""

from loop_agents.learner.checkpoint import latest_complete_checkpoint
from loop_agents.learner.config import LearnerConfig
from loop_agents.learner.trainer import Learner

__all__ = ["Learner", "LearnerConfig", "latest_complete_checkpoint"]
