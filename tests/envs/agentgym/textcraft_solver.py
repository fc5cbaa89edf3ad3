"""A scripted TextCraft player: reads the crafting commands of the first observation and plans gets/crafts."""

from __future__ import annotations

import math
import re

_CRAFT = re.compile(r"^craft (\d+) (.+) using (.+)$")


def plan(observation: str) -> list[str]:
    """Actions that craft the goal, using the first listed recipe of each item (base items are fetched)."""
    recipes: dict[str, tuple[int, list[tuple[int, str]]]] = {}
    for line in observation.splitlines():
        if match := _CRAFT.match(line.strip()):
            count, item, inputs = match.groups()
            parts = [p.strip().split(" ", 1) for p in inputs.split(",")]
            recipes.setdefault(item, (int(count), [(int(n), name) for n, name in parts]))
    goal = re.search(r"Goal: craft (.+)\.", observation).group(1)
    actions: list[str] = []

    def make(item: str, needed: int) -> None:
        if item not in recipes:
            actions.append(f"get {needed} {item}")
            return
        produced, inputs = recipes[item]
        times = math.ceil(needed / produced)
        for n, name in inputs:
            make(name, n * times)
        actions.append(
            f"craft {produced * times} {item} using " + ", ".join(f"{n * times} {name}" for n, name in inputs)
        )

    make(goal, 1)
    return actions
