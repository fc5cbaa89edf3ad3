"""One Trajectory type, used from the rollout to the learner, the viewer and the eval scripts.

A trajectory is token-exact: `token_ids` are the ids the chat template produced for prompts and
observations plus the ids vLLM sampled, stored as sampled (never decoded and re-encoded).
`loss_mask[t] == 1` exactly on sampled tokens, including each turn's sampled stop token;
`sample_logprobs[t]` is vLLM's log-probability of token t where the mask is 1 and 0.0 elsewhere.
Appending a turn costs O(new tokens).

A trajectory is one sequence, or several (`segment_starts`): an agent program behind the gateway may send a
history that does not extend its previous call's, and that call's prompt starts a new sequence of the same
episode. The learner runs each segment as a sequence of its own (positions from 0, attention within it); the
episode keeps one reward and one advantage.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class FinishReason(StrEnum):
    """Why an episode ended."""

    DONE = "done"  # the environment said the task is finished
    TURN_BUDGET = "turn_budget"  # max turns reached
    CONTEXT_BUDGET = "context_budget"  # the next turn would not fit in the context
    ENV_ERROR = "env_error"  # the environment failed and could not be recovered
    INFERENCE_ERROR = "inference_error"  # the inference server failed and could not be recovered
    CANCELLED = "cancelled"  # collection was cut (straggler cut, shutdown)
    # an agent program behind the gateway (scored on the environment's state, like every policy-caused ending)
    PROGRAM_ERROR = "program_error"  # it raised, or exited non-zero
    PROGRAM_TIMEOUT = "program_timeout"  # it ran past agent.timeout_s and was stopped


@dataclass
class Turn:
    """One agent turn: the sampled span [gen_start, gen_end) and the observation that followed."""

    gen_start: int
    gen_end: int
    action_text: str = ""
    observation_text: str = ""
    finish_reason: str = "stop"  # vLLM's: "stop" or "length"
    observation_start: int = -1  # span [observation_start, observation_end) of the observation ids
    observation_end: int = -1  # that followed, or -1 when the episode ended before they were appended
    observation_truncated: bool = False  # the observation was cut to the token budget
    action_error: str | None = None  # the agent found no action; the observation is its feedback
    generate_s: float = 0.0  # wall time of the generation request(s), retries included
    env_s: float = 0.0  # wall time of the environment step
    adapter: str | None = None  # the LoRA adapter that sampled this turn's tokens (None: the base model)
    policy_version: int | None = None  # that adapter's policy version (partial rollouts: may change per turn)


@dataclass
class Trajectory:
    """A multi-turn episode as the learner sees it (token ids, loss mask, logprobs, reward)."""

    task_id: str
    group_id: str
    sample_index: int = 0
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sample_logprobs: list[float] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    reward: float = 0.0
    success: bool = False
    reward_details: dict[str, Any] = field(default_factory=dict)
    finish_reason: FinishReason = FinishReason.DONE
    advantage: float | None = None
    iteration: int | None = None
    policy_version: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    # indices of token_ids where a new sequence starts, besides 0 (ascending; empty: one sequence)
    segment_starts: list[int] = field(default_factory=list)

    def append_context(self, ids: list[int]) -> None:
        """Append prompt/observation tokens (not trained on)."""
        self.token_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.sample_logprobs.extend([0.0] * len(ids))

    def append_generation(self, ids: list[int], logprobs: list[float]) -> tuple[int, int]:
        """Append sampled tokens (trained on); returns their span [start, end)."""
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} sampled ids but {len(logprobs)} logprobs")
        start = len(self.token_ids)
        self.token_ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.sample_logprobs.extend(logprobs)
        return start, len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_generated_tokens(self) -> int:
        return sum(self.loss_mask)

    def token_versions(self) -> list[int | None]:
        """[T] the policy version that sampled each token (None on context tokens): each turn's own version,
        else the trajectory's `policy_version` (an episode sampled by one adapter throughout)."""
        versions: list[int | None] = [None] * len(self.token_ids)
        for turn in self.turns:
            version = self.policy_version if turn.policy_version is None else turn.policy_version
            versions[turn.gen_start : turn.gen_end] = [version] * (turn.gen_end - turn.gen_start)
        if not self.turns and self.policy_version is not None:  # built without turns (tests, demonstrations)
            versions = [self.policy_version if m else None for m in self.loss_mask]
        return versions

    def oldest_version(self) -> int | None:
        """The oldest policy version that sampled any of the trajectory's tokens (None when unknown)."""
        known = [v for v in self.token_versions() if v is not None]
        return min(known) if known else self.policy_version

    def last_trainable_index(self) -> int | None:
        """Index of the last token with loss mask 1 (where a trajectory reward belongs)."""
        for i in range(len(self.loss_mask) - 1, -1, -1):
            if self.loss_mask[i]:
                return i
        return None

    def validate(self) -> None:
        """Raise if the parallel lists disagree or the reward is not finite."""
        n = len(self.token_ids)
        if len(self.loss_mask) != n or len(self.sample_logprobs) != n:
            raise ValueError(
                f"trajectory {self.task_id}/{self.sample_index}: token_ids={n}, "
                f"loss_mask={len(self.loss_mask)}, sample_logprobs={len(self.sample_logprobs)}"
            )
        starts = [0, *self.segment_starts]
        if any(b <= a for a, b in zip(starts, starts[1:], strict=False)) or (
            self.segment_starts and starts[-1] >= n
        ):
            raise ValueError(
                f"trajectory {self.task_id}/{self.sample_index}: bad segment_starts {self.segment_starts}"
            )
        if any(self.loss_mask[s] for s in self.segment_starts):
            raise ValueError(
                f"trajectory {self.task_id}/{self.sample_index}: a segment starts on a sampled token"
            )
        if not math.isfinite(self.reward):
            raise ValueError(f"trajectory of task {self.task_id!r} has non-finite reward {self.reward}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["finish_reason"] = self.finish_reason.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        data = dict(data)
        data["turns"] = [Turn(**t) for t in data.get("turns", [])]
        data["finish_reason"] = FinishReason(data.get("finish_reason", "done"))
        return cls(**data)


def save_trajectories(path: str | Path, trajectories: list[Trajectory]) -> None:
    """Write trajectories as JSON Lines (one trajectory per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as f:
        for traj in trajectories:
            f.write(json.dumps(traj.to_dict()) + "\n")
    tmp.replace(path)


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Read a JSON Lines file written by `save_trajectories`."""
    with Path(path).open() as f:
        return [Trajectory.from_dict(json.loads(line)) for line in f if line.strip()]
