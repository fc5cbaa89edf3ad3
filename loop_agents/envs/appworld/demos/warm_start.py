"""AppWorld warm-start demonstrations as chat messages, in the layout the rollouts use.

Kept episodes: a clean script only if the engine's tests all pass, a noisy variant only if they do not.
For every train task with a kept clean episode, `demos_per_task` demonstrations are drawn: a noisy one
(any kind the task has) with probability `demo_noise`, else the clean one, so a policy cloned from them
solves some tasks but not most, as the gem hunt's warm start does. Each demonstration is the agent's own
first messages, then per cell an assistant message (one ```python block) and the engine's output
formatted and cut exactly as the episode runner does; it ends with the last cell.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.demos.episodes import played_episodes, task_info
from loop_agents.rollout.environment import ResetResult


@dataclass
class DemoSet:
    """The drawn demonstrations and how the played episodes were sorted."""

    demonstrations: list[tuple[str, list[dict[str, str]]]]  # (task_id, messages)
    kinds: Counter = field(default_factory=Counter)  # kind of each drawn demonstration
    played: int = 0
    dropped: Counter = field(default_factory=Counter)  # clean that failed, noisy that passed, by kind
    tasks_without_clean: list[str] = field(default_factory=list)


def kept_episodes(played: list[dict[str, Any]]) -> tuple[dict[str, dict], dict[str, list[dict]], Counter]:
    """(task -> clean episode that passed, task -> noisy episodes that failed, dropped counts by kind)."""
    clean: dict[str, dict] = {}
    noisy: dict[str, list[dict]] = defaultdict(list)
    dropped: Counter = Counter()
    for episode in played:
        is_clean = episode["kind"] == "clean"
        if episode["success"] != is_clean:
            dropped[episode["kind"]] += 1
        elif is_clean:
            clean[episode["task_id"]] = episode
        else:
            noisy[episode["task_id"]].append(episode)
    return clean, noisy, dropped


def episode_messages(agent: Any, info: dict[str, Any], episode: dict[str, Any], cut) -> list[dict[str, str]]:
    """The agent's first messages, then each cell and (except after the last) its formatted output."""
    reset = ResetResult(observation=info["instruction"], info=info)
    messages = list(agent.initial_messages(reset))
    outputs = episode["outputs"]
    for index, output in enumerate(outputs):
        messages.append({"role": "assistant", "content": f"```python\n{episode['cells'][index]}\n```"})
        if index < len(outputs) - 1:
            messages.append({"role": "user", "content": agent.format_observation(cut(output), reset)})
    return messages


def appworld_demonstrations(config: AppWorldConfig, agent: Any, split: str, cut) -> DemoSet:
    """Draw the warm start's demonstrations of `split` (see the module doc); `cut` is the runner's
    observation cut (text -> text)."""
    played = played_episodes(config, split, config.demo_seed)
    clean, noisy, dropped = kept_episodes(played)
    rng = random.Random(f"appworld-demos:{config.demo_seed}")
    result = DemoSet(demonstrations=[], played=len(played), dropped=dropped)
    for task_id in sorted({episode["task_id"] for episode in played}):
        if task_id not in clean:
            result.tasks_without_clean.append(task_id)
            continue
        info = task_info(config.root_path, task_id)
        for _ in range(config.demos_per_task):
            noisy_here = noisy.get(task_id, [])
            episode = (
                rng.choice(noisy_here) if noisy_here and rng.random() < config.demo_noise else clean[task_id]
            )
            result.kinds[episode["kind"]] += 1
            result.demonstrations.append((task_id, episode_messages(agent, info, episode, cut)))
    if not result.demonstrations:
        raise ValueError(f"no scripted AppWorld episode of split {split!r} passed the engine's tests")
    return result
