"""BabyAI (PyPI `minigrid==3.2.0`) as an AgentGym game.

Items as AgentGym's agentenv-babyai defines them: `data_idx` plays level LEVELS[data_idx % 40] (its 40
levels, same order) reset with seed data_idx // 40. Two action sets (`/create` body `action_set`):

- `agentgym` (default): AgentGym's text interface (babyai_text.py): its observation text, its
  high-level actions ("go to red ball 1", "pickup grey key 1", "toggle and go through blue locked door
  1", "check available actions") and the "Available actions: [...]" line after every observation.
  Reward and score as its server computes them: `reward` = minigrid's reward of the last primitive step
  (1 - 0.9 * steps / max_steps on success, else 0), kept after invalid actions; `score` = the running
  sum of `reward` over the episode's replies (AgentGym's client reports `score`); done = the mission is
  accomplished with reward > 0.5 (a later or failed termination does not end the episode, as theirs).
- `primitive`: minigrid's own actions (turn left/right, move forward, pick up, drop, toggle), our own
  view text; `reward` = `score` = the success reward when accomplished, done on termination/truncation.

minigrid 3.2 registers GoToObjS6 only as `-v1` (the `-v0` AgentGym names was deprecated), so the
newest registered version of a level is used when `-v0` is gone; minigrid 3.2 also generates some
levels differently from AgentGym's minigrid<2.5, so a seed can give a different layout than theirs.
Splits (ours): seeds 0-2 (items 0-119) test, seeds 3-9 dev, seeds >= 10 train.
"""

from __future__ import annotations

import loop_agents.envs.agentgym.games.babyai_text as text
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
ACTION_SETS = ("agentgym", "primitive")
SYSTEM_PROMPTS = {
    "agentgym": (
        "You are an agent in a grid world who must accomplish the goal you are given. Each turn give one "
        "action from the available actions listed after the observation: turn left, turn right, move "
        "forward, go to <obj> <id>, pickup <obj> <id>, drop, go through <door> <id> (an open door), toggle "
        "and go through <door> <id> (a closed door, or a locked door when you carry a key of its colour), "
        "toggle (a closed or locked door right in front of you), check available actions. Reply with the "
        "action only."
    ),
    "primitive": (
        "You are an agent in a grid world. Each turn give one action from the available actions "
        "(turn left, turn right, move forward, pick up, drop, toggle). Reply with the action only."
    ),
}
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


def level_id(level: str) -> str:
    """The gymnasium id of a BabyAI level: `-v0` as AgentGym names it, else the newest registered version."""
    import gymnasium as gym

    versions = sorted(
        int(k.rsplit("-v", 1)[1]) for k in gym.registry if k.rsplit("-v", 1)[0] == f"BabyAI-{level}"
    )
    if not versions:
        raise ValueError(f"minigrid has no BabyAI level {level!r}")
    return f"BabyAI-{level}-v{0 if 0 in versions else versions[-1]}"


def agentgym_goal(mission: str) -> str:
    """AgentGym rewrites sequencing words of the mission into "and"."""
    return mission.replace("then", "and").replace("after you", "and")


class BabyAIGame:
    score_scale = 1.0

    def __init__(self, action_set: str = "agentgym", task_set: str = "ours") -> None:
        import minigrid  # noqa: F401  (registers the BabyAI levels with gymnasium)

        if action_set not in ACTION_SETS:
            raise ValueError(f"babyai has no action set {action_set!r}; supported: {list(ACTION_SETS)}")
        if task_set not in ("ours", "agentgym"):  # one item mapping: AgentGym's
            raise ValueError(f"babyai has no task set {task_set!r}; supported: ['ours', 'agentgym']")
        self.action_set = action_set
        self.system_prompt = SYSTEM_PROMPTS[action_set]
        self.env = None
        self.goal = ""
        self.reward = 0.0
        self.score = 0.0
        self.done = False
        self.actions: dict[str, list[int]] = {}
        self.errors: dict[str, str] = {}
        self.image = None

    def on_create(self, env_id: int, body: dict) -> GameStep | None:
        return None

    def reset(self, data_idx: int) -> GameStep:
        import gymnasium as gym

        if data_idx >= N_ITEMS:
            raise ValueError(
                f"babyai item {data_idx} does not exist: there are {N_ITEMS} items (0..{N_ITEMS - 1})"
            )
        if self.env is not None:
            self.env.close()
        self.env = gym.make(level_id(LEVELS[data_idx % ITEMS_PER_SEED]))
        obs, _ = self.env.reset(seed=data_idx // ITEMS_PER_SEED)
        self.reward, self.score, self.done = 0.0, 0.0, False
        if self.action_set == "primitive":
            self.goal = obs["mission"]
            return GameStep(self._primitive_observation(obs["image"]), 0.0, False, 0.0, False)
        self.goal = agentgym_goal(obs["mission"])
        self.image = obs["image"]
        description = self._scan(obs)
        observation = f"Your goal: {self.goal}\n{description}{text.listing(self.actions)}"
        return GameStep(observation, 0.0, False, 0.0, False, {"deleted": False})

    def _scan(self, obs) -> str:
        """Describe the view and recompute the possible actions (AgentGym's postprocess_obs)."""
        scan = text.ViewScan(self.env.unwrapped, obs["image"], obs["direction"])
        carrying = self.env.unwrapped.carrying
        self.actions, self.errors = text.action_space(scan, carrying)
        return text.describe(scan, carrying)

    def step(self, action: str) -> GameStep:
        if self.action_set == "primitive":
            return self._primitive_step(action)
        key = action.lower().strip()
        if "check" in key:
            observation = "You can take the following actions: " + ", ".join(self.actions)
        elif key == "":
            observation = "No change in state."
        elif key not in self.actions:
            observation = self.errors.get(key, "The action is not recognized. Please check valid actions.")
        else:
            observation = self._run(self.actions[key])
        self.score += self.reward
        return GameStep(
            observation + text.listing(self.actions), self.reward, self.done, self.score, self.done
        )

    def _run(self, primitives: list[int]) -> str:
        """Execute a high-level action; stop at the first primitive that leaves the view unchanged."""
        for primitive in primitives:
            obs, reward, terminated, _, _ = self.env.step(primitive)
            if (obs["image"] != self.image).sum() == 0:
                break
            self.image = obs["image"]
        self.image = obs["image"]
        done = bool(terminated)
        observation = self._scan(obs) + ("\n The task is completed." if done else "")
        self.reward = float(reward)
        if done and self.reward <= 0.5:  # AgentGym: a slow or failed termination does not end the episode
            done = False
        if self.reward == 1 and not done:
            done = True
            observation += "\n The task is completed."
        self.done = done
        return observation

    def _primitive_observation(self, image) -> str:
        actions = ", ".join(f'"{a}"' for a in ACTIONS)
        view = describe_view(image, self.env.unwrapped.carrying)
        return f"Your goal: {self.goal}\n{view}\nAvailable actions: [{actions}]"

    def _primitive_step(self, action: str) -> GameStep:
        key = " ".join(action.strip().lower().rstrip(".").split())
        if key not in ACTIONS:
            valid = ", ".join(ACTIONS)
            return GameStep(f"The action {action!r} is not recognized. Valid actions: {valid}.", 0.0, False,
                            self.reward, False)  # fmt: skip
        obs, reward, terminated, truncated, _ = self.env.step(ACTIONS[key])
        self.reward, self.done = float(reward), bool(terminated or truncated)
        observation = self._primitive_observation(obs["image"]) + (
            "\nThe task is completed." if terminated and reward > 0 else ""
        )
        return GameStep(observation, self.reward, self.done, self.reward, bool(terminated and reward > 0))

    def available_actions(self) -> list[str]:
        return list(ACTIONS) if self.action_set == "primitive" else list(self.actions)

    def splits(self) -> dict[str, list[int]]:
        def seeds(lo: int, hi: int) -> list[int]:
            return list(range(lo * ITEMS_PER_SEED, hi * ITEMS_PER_SEED))

        return {"train": seeds(TRAIN_SEEDS_FROM, N_ITEMS // ITEMS_PER_SEED), "dev": seeds(DEV_SEEDS_FROM, TRAIN_SEEDS_FROM),
                "test": seeds(0, DEV_SEEDS_FROM)}  # fmt: skip

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
