"""ScienceWorld (PyPI `scienceworld==1.2.3`, a Java simulator) as an AgentGym game.

Items as AgentGym's agentenv-sciworld defines them: every (task, variation) pair, tasks in
ScienceWorld's task-id order, except task ids 5-1, 5-2, 9-1, 9-2, 9-3, 10-1, 10-2; `data_idx` indexes
that list. Reset loads the pair and looks around; the first observation is the task description plus
the look-around text. Reward = ScienceWorld's score (0-100 progress, negative on failure), the
AgentGym-RL trajectory reward; `score` = max(score, 0) / 100 is our partial credit in [0, 1], success =
score 100. Splits (our choice, AgentGym ships item lists we do not have): ScienceWorld's own train /
dev / test variation split of each task, so no variation is shared between splits (AgentGym #49
reports 61 test items overlapping training in its lists).
"""

from __future__ import annotations

from loop_agents.envs.agentgym.games.base import GameStep

EXCLUDED_TASK_IDS = ("5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2")
SYSTEM_PROMPT = (
    "You are a scientist in a text world. Each turn give one action, e.g. `look around`, `go to kitchen`, "
    "`open door to kitchen`, `pick up thermometer`, `focus on substance`, `wait`. Reply with the action only."
)


class SciWorldGame:
    system_prompt = SYSTEM_PROMPT

    def __init__(self, step_limit: int = 100) -> None:
        from scienceworld import ScienceWorldEnv
        from scienceworld.constants import ID2TASK

        self.env = ScienceWorldEnv("", envStepLimit=step_limit)
        self.items: list[tuple[str, int]] = []
        for task_id, name in ID2TASK.items():
            if task_id not in EXCLUDED_TASK_IDS:
                self.items += [(name, v) for v in range(self.env.get_max_variations(name))]
        self._splits: dict[str, list[int]] | None = None
        self.last_score = 0.0

    def _result(self, observation: str, score: float, done: bool) -> GameStep:
        self.last_score = score
        return GameStep(observation, score, done, max(score, 0.0) / 100.0, score >= 100)

    def reset(self, data_idx: int) -> GameStep:
        if data_idx >= len(self.items):
            raise ValueError(f"sciworld item {data_idx} does not exist: there are {len(self.items)} items")
        name, variation = self.items[data_idx]
        self.env.load(name, variation, simplificationStr="")
        self.env.reset()
        look, _, _, info = self.env.step("look around")
        return self._result(f"{self.env.get_task_description()}\n{look}", float(info["score"]), False)

    def step(self, action: str) -> GameStep:
        observation, _, completed, info = self.env.step(action.strip())
        return self._result(observation, float(info["score"]), bool(completed))

    def available_actions(self) -> list[str]:
        return list(self.env.get_possible_actions())

    def gold_actions(self, data_idx: int) -> list[str]:
        """ScienceWorld's own solution of an item (for scripted tests); leaves that item freshly loaded."""
        name, variation = self.items[data_idx]
        self.env.load(name, variation, simplificationStr="", generateGoldPath=True)
        self.env.reset()
        return list(self.env.get_gold_action_sequence())

    def splits(self) -> dict[str, list[int]]:
        if self._splits is None:
            by_task: dict[str, dict[str, set[int]]] = {}
            for name in dict.fromkeys(n for n, _ in self.items):
                self.env.load(name, 0, simplificationStr="")
                by_task[name] = {
                    "train": set(self.env.get_variations_train()),
                    "dev": set(self.env.get_variations_dev()),
                    "test": set(self.env.get_variations_test()),
                }
            self._splits = {
                split: [i for i, (n, v) in enumerate(self.items) if v in by_task[n][split]]
                for split in ("train", "dev", "test")
            }
        return self._splits

    def close(self) -> None:
        self.env.close()
