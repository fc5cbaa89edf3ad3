"""Writes a small run directory of real Trajectory objects, token ids from the tiny model's tokenizer.

Layout and contents (hand-chosen so tests can assert exact values):
- rollouts/iter_000001.jsonl, iter_000002.jsonl: tasks alpha_1, alpha_2, beta_1 and an XSS-named task,
  K=3 rollouts each, LOO advantages, |A| filter flags;
- eval/dev_iter_000002.jsonl: alpha_1 pass, alpha_2 pass, beta_1 fail -> TGC 2/3, SGC 1/2;
- metrics.jsonl, config.yaml.
Model text carries HTML/JS payloads: the viewer must show them as text.
"""

from __future__ import annotations

import json
from pathlib import Path

from loop_agents.rollout.trajectory import FinishReason, Trajectory, Turn, save_trajectories

XSS_TEXT = '</pre><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'
XSS_TASK = 'evil<b>"&_1'
TASKS = ["alpha_1", "alpha_2", "beta_1", XSS_TASK]
K = 3
# rewards[task] for samples 0..2 (iteration 1); iteration 2 adds 0.25 capped at 1
REWARDS = {
    "alpha_1": [1.0, 0.5, 0.0],
    "alpha_2": [1.0, 1.0, 1.0],
    "beta_1": [0.0, 0.0, 0.5],
    XSS_TASK: [0.5, 0.0, 0.0],
}


def make_trajectory(tokenizer, task_id: str, sample: int, reward: float, iteration: int) -> Trajectory:
    """A 2-turn AppWorld-style episode built turn by turn with the tokenizer's chat template."""
    traj = Trajectory(
        task_id=task_id, group_id=f"{iteration}:{task_id}", sample_index=sample, iteration=iteration
    )
    traj.messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Solve task {task_id}."},
    ]
    prompt_ids = tokenizer.apply_chat_template(
        traj.messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    traj.append_context(list(prompt_ids))
    end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    actions = [
        "```python\nprint(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))\n```",
        f"# assuming a dummy id\n```python\napis.supervisor.complete_task(answer={sample})\n```\n{XSS_TEXT}",
    ]
    observations = [
        f"Output:\n{XSS_TEXT}\nlogin(username, password)",
        "Output:\nMarked the active task complete.",
    ]
    for turn_index, (action, observation) in enumerate(zip(actions, observations, strict=True)):
        ids = tokenizer.encode(action, add_special_tokens=False) + [end_id]
        logprobs = [-0.01 * ((i * 7 + sample) % 50) for i in range(len(ids))]
        start, end = traj.append_generation(ids, logprobs)
        turn = Turn(gen_start=start, gen_end=end, action_text=action, observation_text=observation)
        traj.messages.append({"role": "assistant", "content": action})
        if turn_index == 0:
            obs_ids = tokenizer.encode(
                f"\n<|im_start|>user\n{observation}<|im_end|>\n<|im_start|>assistant\n",
                add_special_tokens=False,
            )
            turn.observation_start = len(traj.token_ids)
            traj.append_context(obs_ids)
            turn.observation_end = len(traj.token_ids)
            traj.messages.append({"role": "user", "content": observation})
        traj.turns.append(turn)
    traj.reward = reward
    traj.success = reward == 1.0
    traj.finish_reason = FinishReason.DONE if sample != 2 else FinishReason.TURN_BUDGET
    passed = int(round(reward * 2))
    traj.reward_details = {
        "num_tests": 2,
        "difficulty": 2 if task_id.startswith("beta") else 1,
        "tests": [
            {
                "requirement": "assert answers match",
                "passed": passed >= 1,
                "message": "" if passed >= 1 else XSS_TEXT,
            },
            {
                "requirement": "assert no extra changes",
                "passed": passed >= 2,
                "message": "" if passed >= 2 else "diff",
            },
        ],
    }
    traj.validate()
    return traj


def loo_advantages(rewards: list[float]) -> list[float]:
    """LOOP Eq. 3: A_i = R_i - mean_{j != i} R_j."""
    k = len(rewards)
    return [r - (sum(rewards) - r) / (k - 1) for r in rewards]


def write_run_dir(run_dir: Path, tokenizer) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text("algorithm:\n  name: loop\n  note: <script>cfg</script>\n")
    metrics = []
    for iteration in (1, 2):
        trajectories = []
        for task_id in TASKS:
            rewards = [min(1.0, r + 0.25 * (iteration - 1)) for r in REWARDS[task_id]]
            for sample, (reward, adv) in enumerate(zip(rewards, loo_advantages(rewards), strict=True)):
                traj = make_trajectory(tokenizer, task_id, sample, reward, iteration)
                traj.advantage = adv
                traj.metadata["filtered"] = abs(adv) < 0.01
                trajectories.append(traj)
        save_trajectories(run_dir / "rollouts" / f"iter_{iteration:06d}.jsonl", trajectories)
        rewards_all = [t.reward for t in trajectories]
        metrics.append({"iteration": iteration, "rollout/reward_mean": sum(rewards_all) / len(rewards_all)})
    evals = [
        make_trajectory(tokenizer, task_id, 0, reward, 2)
        for task_id, reward in (("alpha_1", 1.0), ("alpha_2", 1.0), ("beta_1", 0.5))
    ]
    save_trajectories(run_dir / "eval" / "dev_iter_000002.jsonl", evals)
    metrics.append({"iteration": 2, "eval/tgc": 2 / 3, "eval/sgc": 0.5})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return run_dir
