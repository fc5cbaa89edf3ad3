"""A small environment written with OpenEnv's own server code (its `Environment` base class and `create_app`), for
the tests of our OpenEnv client: guess a number in [0, 9] seeded by the reset; each wrong guess is told higher or
lower; reward 1 on the right guess (done), else 0; the episode ends after 4 guesses. Its action field is `guess`,
its observation's text field `prompt` (so the client's field mapping is exercised), plus a numeric field.

`SLOW_STEP_S` (environment) makes every step sleep that long (the timeout test); a guess of "crash" raises.
"""

from __future__ import annotations

import os
import random
import time

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    guess: str = Field(description="a number from 0 to 9")


class GuessObservation(Observation):
    prompt: str = Field(default="", description="what the player is told")
    guesses_left: int = Field(default=4)


class GuessEnvironment(Environment[GuessAction, GuessObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.secret, self.left = 0, 0
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs) -> GuessObservation:
        self.secret = random.Random(seed).randrange(10)
        self.left = 4
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(prompt="Guess my number from 0 to 9.", guesses_left=self.left, reward=0.0)

    def step(self, action: GuessAction, timeout_s=None, **kwargs) -> GuessObservation:
        time.sleep(float(os.environ.get("SLOW_STEP_S", "0")))
        if action.guess == "crash":
            raise RuntimeError("the guess environment crashed")
        self._state.step_count += 1
        self.left -= 1
        try:
            value = int(action.guess)
        except ValueError:
            return GuessObservation(
                prompt="Not a number.", guesses_left=self.left, done=self.left <= 0, reward=0.0
            )
        if value == self.secret:
            return GuessObservation(prompt="Right!", guesses_left=self.left, done=True, reward=1.0)
        hint = "higher" if self.secret > value else "lower"
        return GuessObservation(
            prompt=f"No, {hint}.", guesses_left=self.left, done=self.left <= 0, reward=0.0
        )

    @property
    def state(self) -> State:
        return self._state


def secret_of(seed: int) -> int:
    return random.Random(seed).randrange(10)


app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=32)
