"""One episode's model calls -> its token-exact Trajectory, in segments.

Each call's prompt is placed after what the episode holds so far: when it starts with the current segment's ids
(the program sent its history back and the recorded ids were spliced in), only the new ids are appended, as
context; otherwise (the program truncated, reordered or rewrote its history) the prompt opens a new segment of the
same trajectory (`Trajectory.segment_starts`), which the learner runs as a sequence of its own. The sampled ids
follow with loss mask 1 and the sampler's log-probs; everything else (system, user, tool messages, the template's
turn ends) is context with loss mask 0.

The segments of an episode share its reward and its one LOOP advantage: the episode is one rollout of the task,
and the leave-one-out baseline is over K episodes, not over their pieces (docs/gateway.md, Segments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loop_agents.gateway.messages import key_of_template_message
from loop_agents.inference.protocol import Completion
from loop_agents.rollout.trajectory import Trajectory, Turn


@dataclass
class RecordedCall:
    """One answered model call: what it was prompted with, what was sampled, and the key of the message."""

    generation_prompt_ids: list[int]
    sampled_ids: list[int]
    logprobs: list[float]
    key: tuple[str, tuple[tuple[str, str], ...]]
    segment: int
    turn: Turn


class EpisodeRecorder:
    """Builds the episode's Trajectory call by call."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.calls: list[RecordedCall] = []
        self.segment_start = 0  # where the current segment begins in trajectory.token_ids

    @property
    def segments(self) -> int:
        return len(self.trajectory.segment_starts) + (1 if self.calls else 0)

    def splices(self, messages: list[dict[str, Any]]) -> dict[int, tuple[list[int], list[int]]]:
        """For each assistant message of `messages` the model wrote: (generation prompt ids, sampled ids) of its
        call. Messages are matched to calls in order (a repeated message takes the next call that wrote it)."""
        spliced: dict[int, tuple[list[int], list[int]]] = {}
        next_call = 0
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            key = key_of_template_message(message)
            match = next((c for c in self.calls[next_call:] if c.key == key), None)
            if match is None:
                match = next((c for c in reversed(self.calls[:next_call]) if c.key == key), None)
            if match is None:
                continue  # the program's own text: rendered by the template, as context
            spliced[i] = (match.generation_prompt_ids, match.sampled_ids)
            next_call = self.calls.index(match) + 1
        return spliced

    def new_context(self, prompt_ids: list[int]) -> tuple[bool, int]:
        """(extends the current segment, ids the prompt would add to the trajectory)."""
        current = self.trajectory.token_ids[self.segment_start :]
        if self.calls and prompt_ids[: len(current)] == current:
            return True, len(prompt_ids) - len(current)
        return False, len(prompt_ids)

    def place_prompt(self, prompt_ids: list[int], observation_text: str = "") -> None:
        """Append the prompt's new ids as context (opening a new segment when it does not extend the current)."""
        traj = self.trajectory
        extends, _ = self.new_context(prompt_ids)
        if extends:
            start = len(traj.token_ids)
            traj.append_context(prompt_ids[len(traj.token_ids) - self.segment_start :])
            previous = self.calls[-1].turn
            if previous.observation_start < 0:  # what followed the previous turn in the same segment
                previous.observation_start, previous.observation_end = start, len(traj.token_ids)
                previous.observation_text = observation_text
            return
        if self.calls:
            traj.segment_starts.append(len(traj.token_ids))
        self.segment_start = len(traj.token_ids)
        traj.append_context(prompt_ids)

    def record(
        self,
        generation_prompt_ids: list[int],
        completion: Completion,
        key: tuple[str, tuple[tuple[str, str], ...]],
        action_text: str,
        generate_s: float,
    ) -> RecordedCall:
        """Append the sampled ids (loss mask 1, with their log-probs) after the placed prompt."""
        start, end = self.trajectory.append_generation(completion.token_ids, completion.logprobs)
        turn = Turn(
            gen_start=start,
            gen_end=end,
            action_text=action_text,
            finish_reason=completion.finish_reason,
            generate_s=generate_s,
            adapter=completion.adapter,
        )
        self.trajectory.turns.append(turn)
        call = RecordedCall(
            list(generation_prompt_ids),
            list(completion.token_ids),
            list(completion.logprobs),
            key,
            segment=len(self.trajectory.segment_starts),
            turn=turn,
        )
        self.calls.append(call)
        return call
