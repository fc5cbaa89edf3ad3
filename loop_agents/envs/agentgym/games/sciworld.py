"""ScienceWorld (PyPI `scienceworld==1.2.3`, a Java simulator) as an AgentGym game.

Items as AgentGym's agentenv-sciworld defines them: every (task, variation) pair, tasks in
ScienceWorld's task-id order, except task ids 5-1, 5-2, 9-1, 9-2, 9-3, 10-1, 10-2; `data_idx` indexes
that list (the `task_set` option accepts `ours` and `agentgym`: they are the same list). Reset loads
the pair and looks around; as AgentGym's server, the reply carries `task_name`, `var_num`,
`task_description` and the look-around text as `observation` (AgentGym's client shows
task_description + "\n" + observation). `score` = ScienceWorld's cumulative score on its 0-100 scale
(negative on failure), which AgentGym's client reports and AgentGym-RL takes as the trajectory reward;
`reward` = this step's change of the score (ScienceWorld's own reward); success = score 100. Splits (our choice, AgentGym ships item lists we do not have): ScienceWorld's own train /
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
    score_scale = 100.0

    def __init__(self, step_limit: int = 100, task_set: str = "ours", action_set: str = "agentgym") -> None:
        from scienceworld import ScienceWorldEnv
        from scienceworld.constants import ID2TASK

        if task_set not in ("ours", "agentgym"):
            raise ValueError(f"sciworld has no task set {task_set!r}; supported: ['ours', 'agentgym']")
        if action_set != "agentgym":
            raise ValueError(f"sciworld has no action set {action_set!r}; supported: ['agentgym']")

        self.env = ScienceWorldEnv("", envStepLimit=step_limit)
        self.items: list[tuple[str, int]] = []
        for task_id, name in ID2TASK.items():
            if task_id not in EXCLUDED_TASK_IDS:
                self.items += [(name, v) for v in range(self.env.get_max_variations(name))]
        self._splits: dict[str, list[int]] | None = None
        self.last_score = 0.0

    def on_create(self, env_id: int, body: dict) -> GameStep | None:
        return None

    def _result(
        self, observation: str, reward: float, info: dict, done: bool, extra: dict | None = None
    ) -> GameStep:
        self.last_score = float(info["score"])
        return GameStep(
            observation, float(reward), bool(done), self.last_score, self.last_score >= 100, extra or {}
        )

    def reset(self, data_idx: int) -> GameStep:
        if data_idx >= len(self.items):
            raise ValueError(f"sciworld item {data_idx} does not exist: there are {len(self.items)} items")
        name, variation = self.items[data_idx]
        self.env.load(name, variation, simplificationStr="")
        description = self.env.get_task_description()
        look, reward, done, info = self.env.step("look around")
        extra = {"task_name": name, "var_num": variation, "task_description": description, "deleted": False}
        return self._result(look, reward, info, done, extra)

    def step(self, action: str) -> GameStep:
        observation, reward, completed, info = self.env.step(action.strip())
        return self._result(observation, reward, info, completed)

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
