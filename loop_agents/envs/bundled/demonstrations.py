"""Warm-start demonstrations for the gem hunt: a scripted solver whose actions are deliberately noisy.

With probability `noise` each action is replaced by a random wrong one (opening another container of
the room, or answering a wrong code). A model cloned from these demonstrations plays the right action
about (1 - noise) of the time, so it solves some tasks but not most; RL then has room to sharpen it.
Demonstrations are chat messages in the layout the rollouts use: system prompt, first observation,
then alternating assistant actions and user observations, ending with the last action.
"""

from __future__ import annotations

import random

from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
from loop_agents.envs.bundled.tasks import SPLITS, generate_task


def noisy_action(game: GemHuntGame, noise: float, rng: random.Random) -> str:
    """The solver's action, replaced by a random wrong one with probability `noise`."""
    best = game.optimal_action()
    if rng.random() >= noise:
        return best
    if best.startswith("answer"):
        wrong = [f"{a} {b}" for a in range(1, 10) for b in range(10) if f"{a} {b}" != game.task.code]
        return f"answer {rng.choice(wrong)}"
    return f"open {rng.choice([n for n in game.task.room if f'open {n}' != best])}"


def demonstration(
    index: int, noise: float, rng: random.Random, spare_moves: int = 1, quoted: bool = False
) -> list[dict[str, str]]:
    """One episode of task `index` played by the noisy solver, as chat messages (`quoted`: GemHuntGame's)."""
    game = GemHuntGame(generate_task(index), spare_moves=spare_moves, quoted=quoted)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": game.first_observation()},
    ]
    while True:
        action = noisy_action(game, noise, rng)
        messages.append({"role": "assistant", "content": action})
        observation, _, done = game.step(action)
        if done:
            return messages
        messages.append({"role": "user", "content": observation})


def generate_demonstrations(
    count: int, noise: float, seed: int = 0, split: str = "train", spare_moves: int = 1, quoted: bool = False
) -> list[tuple[str, list[dict[str, str]]]]:
    """`count` (task_id, messages) demonstrations on distinct tasks of `split`, deterministic in `seed`."""
    if split not in SPLITS:
        raise ValueError(f"unknown bundled split {split!r}; choose one of {sorted(SPLITS)}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"demonstration noise must be in [0, 1], got {noise}")
    indices = list(SPLITS[split])
    if count > len(indices):
        raise ValueError(f"asked for {count} demonstrations but split {split!r} has {len(indices)} tasks")
    rng = random.Random(f"gemhunt-demos:{seed}")
    chosen = rng.sample(indices, count)
    return [(f"gemhunt_{i}", demonstration(i, noise, rng, spare_moves, quoted)) for i in chosen]


def heldout_clean_demonstrations(
    count: int,
    exclude: set[str],
    split: str = "train",
    spare_moves: int = 1,
    seed: int = 0,
    quoted: bool = False,
) -> list[tuple[str, list[dict[str, str]]]]:
    """`count` noise-free demonstrations on tasks of `split` not in `exclude` (the training demonstrations'
    task ids): the held-out set a warm start is checked on without touching dev."""
    free = [i for i in SPLITS[split] if f"gemhunt_{i}" not in exclude]
    if count > len(free):
        raise ValueError(
            f"asked for {count} held-out demonstrations but only {len(free)} {split} tasks are unused"
        )
    rng = random.Random(f"gemhunt-heldout:{seed}")
    chosen = rng.sample(free, count)
    return [(f"gemhunt_{i}", demonstration(i, 0.0, rng, spare_moves, quoted)) for i in chosen]
