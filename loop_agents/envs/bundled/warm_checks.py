"""The gem hunt warm start's checks and loss weights: what makes its SFT stop at the right time.

readiness: `model -> P(optimal held-out episode)`, the teacher-forced probability of the scripted solver's exact
episode on held-out checks; RL takes off on the demo once it is around 0.05 (docs: the demo).
stall probe: `model -> reason or None`: the warm start has stalled when it copies the gem's code no better than
`learner.sft_stall_copy` (teacher-forced P(code symbol), averaged over both symbols and the checks; chance is 0.1).
"""

from __future__ import annotations

from typing import Any

from loop_agents.envs.bundled.config import BundledEnvConfig
from loop_agents.envs.bundled.demonstrations import heldout_clean_demonstrations
from loop_agents.envs.bundled.warm_start_quality import (
    ANSWER_CALL_CODE,
    code_token_positions,
    episode_probabilities,
)
from loop_agents.rollout.chat import ChatFormat


class GemHuntWarmChecks:
    """`learner.sft_check_episodes` noise-free demonstrations on train tasks the warm start does not train on (dev
    stays held out), scored teacher-forced once per model state and shared by the readiness rule and the stall probe
    (both read the same epoch's factors)."""

    def __init__(
        self,
        cfg: Any,
        settings: BundledEnvConfig,
        chat: ChatFormat,
        training_task_ids: set[str],
        quoted: bool = False,
    ) -> None:
        self.chat = chat
        self.episodes = heldout_clean_demonstrations(
            int(cfg.learner.sft_check_episodes),
            training_task_ids,
            cfg.env.train_split,
            settings.spare_moves,
            quoted=quoted,
        )
        self._last: tuple[tuple[int, int], dict[str, float]] | None = None

    def factors(self, model) -> dict[str, float]:
        """`episode_probabilities` of the check episodes; computed again only after the weights changed (an
        optimizer step bumps the parameters' in-place version counter)."""
        state = (id(model), next(model.parameters())._version)
        if self._last is None or self._last[0] != state:
            self._last = (state, episode_probabilities(model, self.chat, self.episodes))
        return self._last[1]

    def readiness(self, model) -> float:
        return self.factors(model)["p_optimal_dev_episode"]


def warm_start_checks(
    cfg: Any, settings: BundledEnvConfig, chat: ChatFormat, training_task_ids: set[str], quoted: bool = False
):
    """(readiness, stall probe); the probe is None (the readiness rule decides) unless `learner.sft_stall_copy` is
    set. `quoted`: the check episodes' observations quote names (as the training demonstrations' do)."""
    checks = GemHuntWarmChecks(cfg, settings, chat, training_task_ids, quoted)
    threshold = cfg.learner.get("sft_stall_copy")
    if threshold is None:
        return checks.readiness, None

    def probe(model) -> str | None:
        factors = checks.factors(model)
        copy = (factors["p_code_1"] + factors["p_code_2"]) / 2
        return f"code copied at P {copy:.2f} < {threshold:g}" if copy < threshold else None

    return checks.readiness, probe


def code_token_weights(
    demos, chat: ChatFormat, weight: float, text_loss_tokens: list[int] | None = None
) -> list[list[float]]:
    """Per-token weights: `weight` on the code symbols of each demonstration's final `answer <code>`, 1 elsewhere
    (a noisy demonstration may run out of moves before answering: all 1).

    `text_loss_tokens[i]`: the trained tokens demonstration i has as text actions, when `demos` are in another form
    (tool calls). The code's weight is then scaled by (its trained tokens / those), so that the code keeps the share
    of the loss it has in text form: a tool call's scaffolding made the demo's trained tokens 5x as many (143 vs 28
    a demonstration), the code's share fell from 16 % to 3.6 %, and three orders of a tool-form warm start copied
    the code at chance (P 0.10) after an epoch (2026-11-29)."""
    weights = []
    for index, traj in enumerate(demos):
        row = [1.0] * len(traj.token_ids)
        last_action = next(m["content"] for m in reversed(traj.messages) if m["role"] == "assistant")
        scale = 1.0
        if text_loss_tokens is not None:
            scale = max(1.0, sum(traj.loss_mask) / max(text_loss_tokens[index], 1))
        # the answer as a text action or as a tool call
        if last_action.startswith("answer ") or ANSWER_CALL_CODE.search(last_action):
            for position in code_token_positions(traj, chat):
                row[position] = weight * scale
        weights.append(row)
    return weights
