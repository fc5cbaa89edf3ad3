"""An environment written with OpenEnv's own server code whose action schema rejects malformed actions: guess a
number from 0 to 9 in at most 12 characters (`{"guess": "7"}`); a longer guess is OpenEnv's VALIDATION_ERROR reply,
which the agent must read as an observation. An accepted guess earns 0.25 (so a policy that writes longer actions
than the schema allows learns from the rejections it reads), the right one 1 and ends the episode; 6 guesses.

Environment variables (read when the app is imported): `STRICT_MAX_SESSIONS` (OpenEnv's max concurrent sessions,
default 32), `STRICT_MAX_LENGTH` (the longest guess accepted, default 12) and `STRICT_HANG_STEP` (1: every step
waits forever, a hung environment).
"""

from __future__ import annotations

import asyncio
import os
import random

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class StrictAction(Action):
    guess: str = Field(
        max_length=int(os.environ.get("STRICT_MAX_LENGTH", "12")), description="a number from 0 to 9"
    )


class StrictObservation(Observation):
    prompt: str = Field(default="", description="what the player is told")


class StrictEnvironment(Environment[StrictAction, StrictObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.secret, self.left = 0, 0
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs) -> StrictObservation:
        self.secret, self.left = random.Random(seed).randrange(10), 6
        self._state = State(episode_id=episode_id, step_count=0)
        return StrictObservation(prompt="Guess my number: answer with one digit from 0 to 9.", reward=0.0)

    def step(self, action: StrictAction, timeout_s=None, **kwargs) -> StrictObservation:
        raise RuntimeError("the server calls step_async")

    async def step_async(self, action: StrictAction, timeout_s=None, **kwargs) -> StrictObservation:
        if os.environ.get("STRICT_HANG_STEP") == "1":
            await asyncio.Event().wait()  # never set: a step that hangs
        self._state.step_count += 1
        self.left -= 1
        if action.guess.strip() == str(self.secret):
            return StrictObservation(prompt="Right!", done=True, reward=1.0)
        try:
            hint = "higher" if self.secret > int(action.guess) else "lower"
        except ValueError:
            hint = "a number from 0 to 9"
        return StrictObservation(prompt=f"No, {hint}.", done=self.left <= 0, reward=0.25)

    @property
    def state(self) -> State:
        return self._state


app = create_app(StrictEnvironment, StrictAction, StrictObservation, env_name="strict_guess",
                 max_concurrent_envs=int(os.environ.get("STRICT_MAX_SESSIONS", "32")))  # fmt: skip
