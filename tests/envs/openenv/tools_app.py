"""A tools-only environment written with OpenEnv 0.10's own `MCPEnvironment` and `create_app` (run in
`.venv-openenv`, never imported by the main venv's tests): guess a number in [0, 9] through the MCP tool
`guess(number: int)`; a wrong guess is told higher or lower; the right one ends the episode with reward 1 (in
simulation mode the reward comes with the step, as OpenEnv's MCP environments give it); 4 guesses at most. There is
no text action: the action class is OpenEnv's `CallToolAction`, as in OpenEnv's own echo environment.

It has OpenEnv's Task API: splits `train` (20 tasks) and `eval` (5), each task `{"id": "<split>-<index>"}`, selected
by `reset(split=, index=)`.
"""

from __future__ import annotations

import random

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State

SPLITS = {"train": 20, "eval": 5}
GUESSES = 4


def secret_of(split: str, index: int) -> int:
    return random.Random(f"{split}-{index}").randrange(10)


class NumberToolsEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("number_tools")

        @mcp.tool
        def guess(number: int) -> str:
            """Guess the secret number (0 to 9).

            Args:
                number: the guess
            """
            return self._guess(number)

        super().__init__(mcp)
        self.secret, self.left, self.solved = 0, 0, False
        self._state = State()

    # -- OpenEnv's Task API ------------------------------------------------------------------------------------
    def list_splits(self) -> list[dict]:
        return [{"name": "train", "type": "train"}, {"name": "eval", "type": "validation"}]

    def list_tasks(self, split: str) -> list[dict]:
        return [{"id": f"{split}-{index}", "index": index} for index in range(SPLITS[split])]

    def num_tasks(self, split: str) -> int:
        return SPLITS[split]

    def get_task(self, split: str, index: int) -> dict:
        if not 0 <= index < SPLITS[split]:
            raise IndexError(index)
        return {"id": f"{split}-{index}", "index": index}

    # -- episodes ------------------------------------------------------------------------------------------------
    def reset(
        self, seed=None, episode_id=None, split: str = "train", index: int = 0, **kwargs
    ) -> Observation:
        self.secret, self.left, self.solved = secret_of(split, int(index)), GUESSES, False
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(reward=0.0, metadata={"task": f"{split}-{index}"})

    def _guess(self, number: int) -> str:
        self.left -= 1
        if number == self.secret:
            self.solved = True
            return "Right!"
        return f"No, {'higher' if self.secret > number else 'lower'}. {self.left} guesses left."

    def _scored(self, observation: CallToolObservation) -> CallToolObservation:
        self._state.step_count += 1
        observation.done = self.solved or self.left <= 0
        observation.reward = 1.0 if self.solved else 0.0
        return observation

    def step(self, action, timeout_s=None, **kwargs):
        observation = super().step(action, timeout_s=timeout_s, **kwargs)
        return self._scored(observation) if isinstance(observation, CallToolObservation) else observation

    async def step_async(self, action, timeout_s=None, **kwargs):
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        return self._scored(observation) if isinstance(observation, CallToolObservation) else observation

    def _step_impl(self, action, timeout_s=None, **kwargs) -> Observation:
        raise ValueError("this environment takes tool calls only")

    @property
    def state(self) -> State:
        return self._state


app = create_app(
    NumberToolsEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="number_tools",
    max_concurrent_envs=64,
)
