"""The bundled learnable environment ("gem hunt"): in-process, procedurally generated, partial credit.

See tasks.py for the task family and splits, game.py for actions and reward, demonstrations.py for
the warm-start data. The same game is also served over the AgentGym protocol (envs/agentgym).
"""

from loop_agents.envs.bundled.config import BundledEnvConfig
from loop_agents.envs.bundled.demonstrations import generate_demonstrations
from loop_agents.envs.bundled.env import BundledEnvironment, BundledTaskSource
from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id, task_ids

__all__ = [
    "SYSTEM_PROMPT",
    "BundledEnvConfig",
    "BundledEnvironment",
    "BundledTaskSource",
    "GemHuntGame",
    "generate_demonstrations",
    "generate_task",
    "parse_task_id",
    "task_ids",
]
