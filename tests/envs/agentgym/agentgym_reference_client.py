"""AgentGym's env clients, re-implemented from their source (WooooDyy/AgentGym, agentenv/agentenv/envs/
babyai.py and sciworld.py at f434743, textcraft.py at 0412982) for conformance tests: the same HTTP
calls, the same field accesses (a missing field raises KeyError as theirs do), the same action parsing
and the same StepOutput. The PyPI `agentenv` (0.0.1) is an empty placeholder, so their classes cannot be
installed from a registry; this file holds exactly the parts a trainer touches: constructor, reset,
observe, step, close. Their BabyAI and SciWorld clients have no close; ours posts /close as their
TextCraft client does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import requests


@dataclass
class StepOutput:
    state: str
    reward: float
    done: bool


class _Client:
    def __init__(self, env_server_base: str, data_len: int, timeout: int = 300) -> None:
        self.env_server_base = env_server_base
        self.timeout = timeout
        self.data_len = data_len
        created = requests.post(f"{env_server_base}/create", timeout=timeout, **self._create_kwargs())
        if created.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {created}")
        created = created.json()
        self.env_id = created["id"]
        self._after_create(created)

    def _create_kwargs(self) -> dict[str, Any]:
        return {}

    def _after_create(self, created: dict[str, Any]) -> None:
        pass

    def __len__(self) -> int:
        return self.data_len

    def _post(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        data["id"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()

    def observe(self) -> str:
        return self.info["observation"]

    def close(self) -> dict[str, Any]:
        return self._post("close", {})


def _after_action_label(action: str) -> str:
    """BabyAI's and SciWorld's parsing: the text after "Action:", a trailing "</s>" cut by 5 characters."""
    if action.endswith("</s>"):
        action = action[:-5]
    parts = action.split("Action:")
    return parts[1].strip() if len(parts) > 1 else parts[0].strip()


class BabyAIEnvClient(_Client):
    def step(self, action: str) -> StepOutput:
        response = self._post("step", {"action": _after_action_label(action)})
        self.info = {"observation": response["observation"], "reward": response["reward"],
                     "score": response["score"], "done": response["done"]}  # fmt: skip
        return StepOutput(state=response["observation"], reward=response["score"], done=response["done"])

    def reset(self, data_idx: int = 0) -> dict[str, Any]:
        response = self._post("reset", {"data_idx": data_idx})
        self.info = {"observation": response["observation"], "reward": response["reward"],
                     "score": response["score"], "done": response["done"]}  # fmt: skip
        return response


class SciworldEnvClient(_Client):
    def step(self, action: str) -> StepOutput:
        response = self._post("step", {"action": _after_action_label(action)})
        self.info = {"observation": response["observation"], "reward": response["reward"],
                     "score": response["score"], "done": response["done"]}  # fmt: skip
        return StepOutput(state=response["observation"], reward=response["score"], done=response["done"])

    def reset(self, data_idx: int = 0) -> dict[str, Any]:
        response = self._post("reset", {"data_idx": data_idx})
        self.info = {"observation": response["task_description"] + "\n" + response["observation"],
                     "reward": 0, "score": 0, "done": False}  # fmt: skip
        return response


class TextCraftEnvClient(_Client):
    def _create_kwargs(self) -> dict[str, Any]:
        return {"json": {"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None}}

    def _after_create(self, created: dict[str, Any]) -> None:
        self.info = {"observation": created["observation"], "reward": 0, "done": False}

    def step(self, action: str) -> StepOutput:
        matches = re.findall(r"Action:\s*(.*?)(?=\n|$)", action, re.DOTALL)
        if len(matches) > 1:
            return StepOutput(
                state="Error: Only one 'Action' is allowed per response. Please adjust your response.",
                reward=0,
                done=False,
            )
        action = matches[-1] if matches else ""
        action = " ".join(re.sub(r"[^A-Za-z0-9, ]+", "", action).split()).strip()
        if action.lower() == "look":
            action = "inventory"
        response = self._post("step", {"action": action})
        self.info = {
            "observation": response["observation"],
            "reward": response["reward"],
            "done": response["done"],
        }
        return StepOutput(state=response["observation"], reward=response["reward"], done=response["done"])

    def reset(self, idx: int = 0) -> dict[str, Any]:
        response = self._post("reset", {"data_idx": idx})
        self.info.update({"observation": response["observation"], "reward": 0, "done": False})
        return response
