"""BabyAI (PyPI `minigrid==3.2.0`) as an AgentGym game, with a text rendering of the agent's view.

Items as AgentGym's agentenv-babyai defines them: `data_idx` plays level LEVELS[data_idx % 40] (its 40
levels, same order) reset with seed data_idx // 40. The observation is the goal, the visible objects
with their position relative to the agent, what is ahead and what is carried, then the available
actions (AgentGym appends "Available actions: [...]" the same way). Reward: minigrid's success reward
1 - 0.9 * steps / max_steps when the mission is accomplished, else 0; done when the level terminates
or truncates. Differences from AgentGym (documented): actions are minigrid's own primitive actions
(turn left/right, move forward, pick up, drop, toggle) instead of AgentGym's BFS macro actions
("go to red ball 1"); and AgentGym's cumulative `score` (which sums rewards over steps) is replaced by
the final success reward. Splits (ours): seeds 0-2 (items 0-119) test, seeds 3-9 dev, seeds >= 10 train.
"""

from __future__ import annotations

from loop_agents.envs.agentgym.games.base import GameStep

LEVELS = (
    "GoToRedBallGrey", "GoToRedBall", "GoToRedBallNoDists", "GoToObjS6", "GoToLocalS8N7", "GoToObjMazeS7",
    "GoToImpUnlock", "GoToSeqS5R2", "GoToRedBlueBall", "GoToDoor", "GoToObjDoor", "Open", "OpenRedDoor",
    "OpenDoorLoc", "OpenRedBlueDoorsDebug", "OpenDoorsOrderN4Debug", "Pickup", "UnblockPickup", "PickupLoc",
    "PickupDistDebug", "PickupAbove", "PutNextLocalS6N4", "PutNextS7N4Carrying", "Unlock", "UnlockLocalDist",
    "KeyInBox", "UnlockPickupDist", "BlockedUnlockPickup", "UnlockToUnlock", "ActionObjDoor", "FindObjS7",
    "KeyCorridorS6R3", "OneRoomS20", "MoveTwoAcrossS8N9", "SynthS5R2", "SynthLoc", "SynthSeq", "MiniBossLevel",
    "BossLevel", "BossLevelNoUnlock",
)  # fmt: skip
ACTIONS = {"turn left": 0, "turn right": 1, "move forward": 2, "pick up": 3, "drop": 4, "toggle": 5}
ITEMS_PER_SEED = len(LEVELS)
TRAIN_SEEDS_FROM, DEV_SEEDS_FROM = 10, 3
N_ITEMS = ITEMS_PER_SEED * 110  # seeds 0..109: test 3, dev 7, train 100 seeds
SYSTEM_PROMPT = (
    "You are an agent in a grid world. Each turn give one action from the available actions "
    "(turn left, turn right, move forward, pick up, drop, toggle). Reply with the action only."
)
_VIEW_CENTRE, _VIEW_BOTTOM = 3, 6  # the agent's cell in minigrid's 7x7 egocentric view


def _steps(n: int, word: str) -> str:
    return f"{n} step{'s' if n != 1 else ''} {word}"


def describe_view(image, carrying) -> str:
    """Objects in the 7x7 egocentric view, nearest first, with positions relative to the agent."""
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX

    idx_to_state = {v: k for k, v in STATE_TO_IDX.items()}

    seen = []
    for i in range(image.shape[0]):
        for j in range(image.shape[1]):
            kind = IDX_TO_OBJECT[int(image[i, j, 0])]
            if kind not in ("door", "key", "ball", "box", "goal", "lava") or (i, j) == (
                _VIEW_CENTRE,
                _VIEW_BOTTOM,
            ):
                continue
            color = IDX_TO_COLOR[int(image[i, j, 1])]
            name = (
                f"{color} {idx_to_state[int(image[i, j, 2])]} door" if kind == "door" else f"{color} {kind}"
            )
            ahead, right = _VIEW_BOTTOM - j, i - _VIEW_CENTRE
            where = [_steps(ahead, "ahead")] if ahead else []
            if right:
                where.append(_steps(abs(right), "to the right" if right > 0 else "to the left"))
            seen.append((ahead + abs(right), f"a {name} {' and '.join(where)}"))
    parts = [
        ("You see " + ", ".join(text for _, text in sorted(seen)) + ".") if seen else "You see no objects."
    ]
    front = IDX_TO_OBJECT[int(image[_VIEW_CENTRE, _VIEW_BOTTOM - 1, 0])]
    if front not in ("empty", "floor", "unseen"):
        parts.append(f"Right in front of you is a {front}.")
    parts.append(
        f"You are carrying a {carrying.color} {carrying.type}." if carrying else "You carry nothing."
    )
    return " ".join(parts)


class BabyAIGame:
    system_prompt = SYSTEM_PROMPT

    def __init__(self) -> None:
        import minigrid  # noqa: F401  (registers the BabyAI levels with gymnasium)

        self.env = None
        self.goal = ""
        self.reward = 0.0
        self.done = False

    def _observation(self, image) -> str:
        actions = ", ".join(f'"{a}"' for a in ACTIONS)
        view = describe_view(image, self.env.unwrapped.carrying)
        return f"Your goal: {self.goal}\n{view}\nAvailable actions: [{actions}]"

    def reset(self, data_idx: int) -> GameStep:
        import gymnasium as gym

        if data_idx >= N_ITEMS:
            raise ValueError(
                f"babyai item {data_idx} does not exist: there are {N_ITEMS} items (0..{N_ITEMS - 1})"
            )
        if self.env is not None:
            self.env.close()
        self.env = gym.make(f"BabyAI-{LEVELS[data_idx % ITEMS_PER_SEED]}-v0")
        obs, _ = self.env.reset(seed=data_idx // ITEMS_PER_SEED)
        self.goal, self.reward, self.done = obs["mission"], 0.0, False
        return GameStep(self._observation(obs["image"]), 0.0, False, 0.0, False)

    def step(self, action: str) -> GameStep:
        key = " ".join(action.strip().lower().rstrip(".").split())
        if key not in ACTIONS:
            valid = ", ".join(ACTIONS)
            return GameStep(f"The action {action!r} is not recognized. Valid actions: {valid}.", 0.0, False,
                            self.reward, False)  # fmt: skip
        obs, reward, terminated, truncated, _ = self.env.step(ACTIONS[key])
        self.reward, self.done = float(reward), bool(terminated or truncated)
        text = self._observation(obs["image"]) + (
            "\nThe task is completed." if terminated and reward > 0 else ""
        )
        return GameStep(text, self.reward, self.done, self.reward, bool(terminated and reward > 0))

    def available_actions(self) -> list[str]:
        return list(ACTIONS)

    def splits(self) -> dict[str, list[int]]:
        def seeds(lo: int, hi: int) -> list[int]:
            return list(range(lo * ITEMS_PER_SEED, hi * ITEMS_PER_SEED))

        return {"train": seeds(TRAIN_SEEDS_FROM, N_ITEMS // ITEMS_PER_SEED), "dev": seeds(DEV_SEEDS_FROM, TRAIN_SEEDS_FROM),
                "test": seeds(0, DEV_SEEDS_FROM)}  # fmt: skip

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
