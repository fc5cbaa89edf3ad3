"""The gem hunt game: one task's state machine, synchronous and pure Python.

Used in-process by `BundledEnvironment` and over HTTP by the AgentGym-protocol server (the same game
object behind both, so the two paths give identical episodes).

Actions (one per turn; case, extra spaces, a leading "the" and a final "." are ignored):
    open <color> <thing>     look inside a container of the room
    answer <code>            finish with the gem's code (digits, spaces optional)
Anything else is answered with an error observation and costs a move, as AgentGym answers invalid
actions. An episode ends on `answer` or when the move limit (optimal length + `spare_moves`) is used up.

Reward (partial credit, in [0, 1]): (chain containers found in order + 1 if the code is right) /
(chain length + 1). A chain container counts as found only when opened after its predecessor was
found: a lucky open of a container the agent was not sent to shows its content but earns nothing.
Success = the right code was answered.

With `quoted=True` the observations put every container name and the code in double quotes (`a note says "red
box".`). The tool-calling agent's arguments are JSON strings, and a byte-level BPE tokenizer cuts a word after an
opening quote differently from the same word after a space (` yellow` against `"`+`y`+`ellow` in the tiny model's
vocabulary): a model copying a name from an unquoted observation into `{"container": "..."}` must learn to map one
token sequence onto another, while from a quoted one it copies the same tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loop_agents.envs.bundled.tasks import COLORS, THINGS, GemHuntTask

SYSTEM_PROMPT = "Find the gem. Reply with one action: open <color> <thing>, or answer <code>."
_OPEN = re.compile(r"^open (?:the )?(\w+) (\w+)$")
_ANSWER = re.compile(r"^answer ([\d ]+)$")
USAGE = "Unknown action. Use open <color> <thing> or answer <code>."


def normalize_action(action: str) -> str:
    return " ".join(action.strip().lower().rstrip(".").split())


@dataclass
class GemHuntGame:
    """State of one episode of one task."""

    task: GemHuntTask
    spare_moves: int = 1  # moves allowed beyond the optimal episode length
    found: int = 0  # chain containers found in order
    solved: bool = False
    done: bool = False
    moves: int = 0
    history: list[str] = field(default_factory=list)  # actions as sent
    quoted: bool = False  # names and the code in double quotes (the tool-calling agent's form, see above)

    def __post_init__(self) -> None:
        if self.spare_moves < 0:
            raise ValueError(f"spare_moves must be >= 0, got {self.spare_moves}")

    @property
    def max_moves(self) -> int:
        return self.task.required_actions + self.spare_moves

    def _q(self, text: str) -> str:
        return f'"{text}"' if self.quoted else text

    def first_observation(self) -> str:
        room = ", ".join(self._q(name) for name in self.task.room)
        return f"Room: {room}. Start at the {self._q(self.task.chain[0])}."

    def _next_hint(self) -> str:
        if self.found == len(self.task.chain):
            return f"The code is {self._q(self.task.code)}."
        if self.found == 0:
            return f"Start at the {self._q(self.task.chain[0])}."
        return f"The note says {self._q(self.task.chain[self.found])}."

    def _open(self, name: str) -> str:
        chain = self.task.chain
        if name not in self.task.room:
            return f"There is no {self._q(name)} here. {self._next_hint()}"
        if name not in chain:
            return f"{self._q(name)}: nothing. {self._next_hint()}"
        position = chain.index(name)
        if position == self.found:  # found in order: progress
            self.found += 1
        if position == len(chain) - 1:
            return f"{self._q(name)}: the gem! Its code is {self._q(self.task.code)}."
        return f"{self._q(name)}: a note says {self._q(chain[position + 1])}."

    def step(self, action: str) -> tuple[str, float, bool]:
        """Apply one action; returns (observation, reward so far, done)."""
        if self.done:
            raise ValueError(f"the episode of task {self.task.task_id} is over; reset before stepping")
        self.history.append(action)
        self.moves += 1
        text = normalize_action(action)
        if match := _OPEN.match(text):
            color, thing = match.groups()
            if color in COLORS and thing in THINGS:
                observation = self._open(f"{color} {thing}")
            else:
                observation = f"There is no {self._q(f'{color} {thing}')} here. {self._next_hint()}"
        elif match := _ANSWER.match(text):
            self.solved = match.group(1).replace(" ", "") == self.task.code.replace(" ", "")
            self.done = True
            observation = "Correct! You got the gem." if self.solved else "Wrong code."
        else:
            observation = USAGE
        if not self.done and self.moves >= self.max_moves:
            self.done = True
            observation += " Out of moves."
        return observation, self.reward, self.done

    @property
    def reward(self) -> float:
        return (self.found + int(self.solved)) / (len(self.task.chain) + 1)

    def optimal_action(self) -> str:
        """What a perfect player does next (the scripted solver; also the demonstrations' teacher)."""
        if self.found == len(self.task.chain):
            return f"answer {self.task.code}"
        return f"open {self.task.chain[self.found]}"

    def available_actions(self) -> list[str]:
        """Every well-formed action (the answer is listed as a pattern: there are 90 codes)."""
        return [f"open {name}" for name in self.task.room] + ["answer <code>"]
