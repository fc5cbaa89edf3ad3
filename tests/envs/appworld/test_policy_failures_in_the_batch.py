"""An episode the policy ended is kept in the batch, end to end (issue 48): the real episode runner with a scripted
model and the real collector, on real AppWorld hosts (the folder's pool). One group of one task: the model closes
its channel to the apps after doing part of the task (the channel-shutdown route of test_policy_failures.py, written
as the code block the model sends), an honest control that stops at the same point, and an honest solution. The
failure is returned (not retried, not lost), scored as the control, counted by cause in the metrics the trainer
logs (`rollout/ended_api_channel_closed`), and gets LOOP's leave-one-out advantage in its group."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from loop_agents.algorithms.compute import compute_advantages
from loop_agents.algorithms.registry import preset
from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.orchestration.collector import collect_groups
from loop_agents.orchestration.components import rollout_metrics
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.trajectory import FinishReason
from tests.envs.appworld.test_environment import solution, template_tasks
from tests.envs.appworld.test_policy_failures import CHANNEL, unfinished
from tests.rollout.scripted import ScriptedGenerator

pytestmark = pytest.mark.slow

SHUTDOWN = f"{CHANNEL}.shutdown(0)\napis.supervisor.show_profile()\n"  # SHUT_RD: the reply's send breaks


def as_text(cell: str) -> str:
    return f"I will run this.\n\n```python\n{cell if cell.endswith(chr(10)) else cell + chr(10)}```"


def test_an_episode_the_policy_ended_is_kept_scored_counted_and_trained_on(task_source, run, tiny_model_dir):
    task_id = template_tasks(task_source, "note_delete_tagged")[1]
    scripts = {  # sample index -> the model's turns
        0: [unfinished(task_source, task_id), SHUTDOWN],  # part of the task, then the channel closed
        1: [unfinished(task_source, task_id)],  # the honest control: the same part, then the turn budget
        2: [solution(task_source, task_id)],  # the honest solution
    }
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    agent = AppWorldAgent(prompt="compact")
    base = EpisodeConfig(max_tokens_per_turn=8192, max_context_tokens=65536, observation_max_tokens=3000)
    played = []

    async def episode(task: str, group_id: str, sample_index: int):
        cells = scripts[sample_index]
        cfg = EpisodeConfig(**{**base.__dict__, "max_turns": len(cells)})
        chat = chat_format(tokenizer, cfg)
        generator = ScriptedGenerator([chat.encode(as_text(c)) + [chat.turn_end_id] for c in cells])
        played.append(sample_index)
        env = await task_source.make_env()
        return await run_episode(env, generator, agent, chat, cfg, task_id=task, group_id=group_id,
                                 sample_index=sample_index)  # fmt: skip

    trajs, stats = run(collect_groups([task_id], 3, episode, concurrency=3, retries=2))
    assert sorted(played) == [0, 1, 2]  # each played once: nothing retried
    assert (stats.finished, stats.retried, stats.failed, stats.cancelled) == (3, 0, 0, 0), stats
    attacked, control, solved = trajs
    assert [t.sample_index for t in trajs] == [0, 1, 2] and {t.group_id for t in trajs} == {task_id}
    assert attacked.finish_reason is FinishReason.DONE and "error" not in attacked.metadata, attacked.metadata
    assert "closed its connection to the apps" in attacked.turns[-1].observation_text
    assert attacked.reward_details["episode_ended"] == "api_channel_closed"
    assert control.finish_reason is FinishReason.TURN_BUDGET and "episode_ended" not in control.reward_details
    assert 0.0 < attacked.reward == control.reward < solved.reward == 1.0, [t.reward for t in trajs]
    passed = [[(t["requirement"], t["passed"]) for t in traj.reward_details["tests"]] for traj in trajs[:2]]
    assert passed[0] == passed[1]

    metrics = rollout_metrics(trajs)  # what the trainer logs for the batch
    assert metrics["rollout/count"] == 3.0 and metrics["rollout/ended_api_channel_closed"] == pytest.approx(
        1 / 3
    )
    assert metrics["rollout/reward_mean"] == pytest.approx(sum(t.reward for t in trajs) / 3)

    result = compute_advantages(trajs, preset("loop"))  # LOOP: A_i = R_i - mean of the group's others
    rewards = [t.reward for t in trajs]
    for i, traj in enumerate(trajs):
        others = [r for j, r in enumerate(rewards) if j != i]
        assert traj.advantage == pytest.approx(rewards[i] - sum(others) / 2)
    assert attacked.advantage < 0.0 and result.token_advantages[0].abs().sum() > 0  # trained on, pushed down
