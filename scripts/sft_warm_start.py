"""Build a run's full-weight warm start alone (what `learner.sft_target=full` does first in a run).

    python scripts/sft_warm_start.py experiment=demo run.seed=1 run.dir=runs/demo_s1 [--eval-tasks 200]

Takes the same Hydra overrides as `loop_agents.train`, so the model (tiny sizes included), the
demonstrations and the SFT settings are exactly those of the run. It writes `run.dir/warm_model`,
which a later `loop_agents.train` with the same run directory reuses, and reports P(optimal dev
episode) (`p_optimal`, the predictor of whether RL can start). `--eval-tasks N` then plays N
dev gem hunt tasks with Hugging Face sampling (no vLLM) and prints success and mean reward: the
number RL starts from. The demonstrations' token layout (loss on each assistant action and its
`<|im_end|>` only) is `loop_agents.orchestration.warm_start.demonstration_trajectory`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from loop_agents.config.load import compose_or_exit
from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id, task_ids
from loop_agents.orchestration.driver import policy_model_path
from loop_agents.rollout.chat import ChatFormat


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


def evaluate(model, chat: ChatFormat, n_tasks: int, spare_moves: int, temperature: float, seed: int) -> dict:
    """Success rate and mean partial-credit reward on the first `n_tasks` dev tasks (sampled)."""
    torch.manual_seed(seed)
    games = [play(model, chat, t, 12, spare_moves, temperature) for t in task_ids("dev")[:n_tasks]]
    return {
        "success": sum(g.solved for g in games) / len(games),
        "reward": sum(g.reward for g in games) / len(games),
        "tasks": len(games),
    }


@torch.no_grad()
def p_optimal(model, chat: ChatFormat, n_tasks: int) -> float:
    """Mean over n clean dev demonstrations of P(the model samples the solver's exact actions), teacher-forced:
    exp(sum of the action tokens' log-probs). Around 0.05 RL takes off on the demo; around 0.001 it does not."""
    from loop_agents.envs.bundled.demonstrations import generate_demonstrations
    from loop_agents.orchestration.warm_start import demonstration_trajectory

    total = 0.0
    for task_id, messages in generate_demonstrations(n_tasks, 0.0, seed=123, split="dev"):
        traj = demonstration_trajectory(chat, messages, task_id)
        ids = torch.tensor([traj.token_ids])
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        chosen = logprobs.gather(1, ids[0, 1:, None])[:, 0]
        total += float(chosen[torch.tensor(traj.loss_mask[1:], dtype=torch.bool)].sum().exp())
    return total / n_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eval-tasks", type=int, default=0, help="dev tasks to play after SFT (0 = none)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of that check")
    parser.add_argument(
        "--p-optimal", type=int, default=100, help="clean dev episodes for P(optimal episode)"
    )
    args, overrides = parser.parse_known_args()
    cfg = compose_or_exit(overrides)
    if cfg.learner.sft_target != "full" or cfg.learner.sft_epochs == 0:
        parser.error("needs learner.sft_target=full and learner.sft_epochs > 0 (experiment=demo sets both)")
    run_dir = Path(cfg.run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    warm = Path(policy_model_path(cfg, run_dir))
    report = json.loads((warm / "warm_start.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(warm)
    model = AutoModelForCausalLM.from_pretrained(warm, dtype=torch.float32).eval()
    if args.p_optimal:
        report["p_optimal_dev_episode"] = p_optimal(model, ChatFormat(tokenizer), args.p_optimal)
    if args.eval_tasks:
        t0 = time.perf_counter()
        spare = cfg.env.options.get("spare_moves", 1)
        report["dev"] = evaluate(
            model, ChatFormat(tokenizer), args.eval_tasks, spare, args.temperature, cfg.run.seed
        )
        report["eval_s"] = time.perf_counter() - t0
    print(json.dumps({"warm_model": str(warm), **report}, indent=2))


if __name__ == "__main__":
    main()
