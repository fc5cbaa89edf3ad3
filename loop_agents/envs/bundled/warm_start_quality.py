"""How good a gem hunt warm start is, measured without vLLM: the predictor of whether RL takes off.

P(optimal dev episode): for n clean dev demonstrations (the scripted solver, no noise), the teacher-forced
probability that the model samples the solver's exact actions, exp(sum over action tokens of log pi),
averaged over the episodes. It factors into the chain part (every `open` action) and the answer part
(the final `answer <code>` action, whose code is copied from the last observation):
    P(episode) = P(opens) * P(answer | opens)
and we also report the mean probability of each of the code's two symbols (teacher-forced), the skill
that turns partial credit into success. `sampled_dev` plays dev tasks with Hugging Face sampling: the success RL starts from.
"""

from __future__ import annotations

import re

import torch

from loop_agents.envs.bundled.demonstrations import generate_demonstrations
from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id, task_ids
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.demonstration import action_spans, demonstration_trajectory

# the code inside a tool call: `answer(code)` (the gem hunt's tools) or `act(action="answer <code>")` (OpenEnv's)
ANSWER_CALL_CODE = re.compile(r'(?:"name": "answer", "arguments": \{"code": "|"action": "answer )([^"]*)"')


def code_token_positions(traj, chat: ChatFormat) -> list[int]:
    """Indices in `traj.token_ids` of the code symbols of its last action (`answer 4 7` -> the 4 and the 7; in
    tool form the symbols inside the call's `"code": "4 7"` or `"action": "answer 4 7"`)."""
    last = action_spans(traj.loss_mask)[-1][:-1]  # without <|im_end|>
    texts = {t: chat.decode([traj.token_ids[t]]) for t in last}
    call = ANSWER_CALL_CODE.search("".join(texts.values()))
    if call is None:
        # "4","7" or "B","7"
        return [t for t, text in texts.items() if text.strip() and text.strip() != "answer"]
    positions, offset = [], 0
    for t, text in texts.items():  # the tokens whose characters fall inside the code's
        if offset < call.end(1) and offset + len(text) > call.start(1) and text.strip():
            positions.append(t)
        offset += len(text)
    return positions


def optimal_episode_probabilities(
    model, chat: ChatFormat, n_tasks: int, quoted: bool = False
) -> dict[str, float]:
    """Means over n clean dev demonstrations of P(episode), P(opens), P(answer | opens) and P(code symbol k), in
    `chat`'s form (text actions or tool calls; `quoted`: the observations as GemHuntGame(quoted=True) writes them)."""
    demonstrations = generate_demonstrations(n_tasks, 0.0, seed=123, split="dev", quoted=quoted)
    return episode_probabilities(model, chat, demonstrations)


@torch.no_grad()
def episode_probabilities(model, chat: ChatFormat, demonstrations: list) -> dict[str, float]:
    """Means over (task_id, messages) clean demonstrations of P(episode), P(opens), P(answer | opens) and
    P(code symbol k), teacher-forced."""
    sums = {"p_optimal_dev_episode": 0.0, "p_opens": 0.0, "p_answer": 0.0, "p_code_1": 0.0, "p_code_2": 0.0}
    for task_id, messages in demonstrations:
        traj = demonstration_trajectory(chat, messages, task_id)
        ids = torch.tensor([traj.token_ids])
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        chosen = logprobs.gather(1, ids[0, 1:, None])[:, 0]  # chosen[p] = log pi(token p+1)
        spans = action_spans(traj.loss_mask[1:])
        answer = chosen[spans[-1]].sum()
        opens = sum((chosen[span].sum() for span in spans[:-1]), torch.tensor(0.0))
        code = [t - 1 for t in code_token_positions(traj, chat)]  # chosen[t - 1] = log pi(token t)
        sums["p_optimal_dev_episode"] += float((opens + answer).exp())
        sums["p_opens"] += float(opens.exp())
        sums["p_answer"] += float(answer.exp())
        sums["p_code_1"] += float(chosen[code[0]].exp())
        sums["p_code_2"] += float(chosen[code[-1]].exp())
    return {key: value / len(demonstrations) for key, value in sums.items()}


@torch.no_grad()
def play(model, chat: ChatFormat, task_id: str, max_new_tokens: int, spare_moves: int, temperature: float):
    """One episode with HF sampling, token ids built turn by turn as in the rollouts."""
    game = GemHuntGame(generate_task(parse_task_id(task_id)), spare_moves=spare_moves)
    ids = chat.initial_ids(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": game.first_observation()}]
    )
    stop = chat.stop_token_ids(["<|im_end|>", "<|endoftext|>"])
    for _ in range(game.max_moves):
        ids = ids + chat.generation_prompt_ids
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            eos_token_id=stop,
            pad_token_id=stop[-1],
        )
        sampled = out[0, len(ids) :].tolist()
        ids = ids + sampled + chat.close_turn_ids(sampled)
        observation, _, done = game.step(chat.decode(sampled).strip())
        if done:
            break
        ids = ids + chat.observation_ids(observation)
    return game


def sampled_dev(
    model, chat: ChatFormat, n_tasks: int, spare_moves: int, temperature: float, seed: int
) -> dict:
    """Success rate, mean partial-credit reward and P(reached the gem) on the first `n_tasks` dev tasks."""
    torch.manual_seed(seed)
    games = [play(model, chat, t, 12, spare_moves, temperature) for t in task_ids("dev")[:n_tasks]]
    return {
        "success": sum(g.solved for g in games) / len(games),
        "reward": sum(g.reward for g in games) / len(games),
        "reached_gem": sum(g.found == len(g.task.chain) for g in games) / len(games),
        "tasks": len(games),
    }
