"""TRL's side of the `trl_compare` benchmark; runs in the TRL venv (.venv-trl, see install.sh).

    .venv-trl/bin/python benchmarks/trl_compare/trl_side.py SPEC.json

SPEC (written by benchmarks/trl_compare.py): model_dir, task_ids (the exact prompt order our task
sampler draws), group size, tasks per generation, minibatch, max_new_tokens, lr, LoRA, threads,
generations. GRPOTrainer with HF `generate` (its default generation path on CPU), LoRA, beta 0 (no
reference model), loss_type "grpo", group-std scaled advantages, clip 0.2, one pass over each generation
batch in optimizer steps of `minibatch` completions, and the gem hunt reward of one turn computed by the
very code our environment runs (GemHuntGame + TextActionAgent's action parsing). Prints one JSON line
prefixed `TRL_RESULT ` with the time of each generation batch (generation + reward + learning).

With `max_turns` > 1 in SPEC the episodes are multi-turn, through TRL's documented multi-turn path: a
`rollout_func` that plays each episode turn by turn with the trainer's own model (HF `generate`, all
unfinished episodes of the batch in one call per turn), renders each observation with the chat template
turn by turn (loop_agents.rollout.chat.ChatFormat, the same ids our runner builds) and returns `env_mask`
so that only sampled tokens are trained on; the reward is the gem hunt game's at the end of the episode.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # loop_agents' pure-Python gem hunt game (no vLLM/Ray needed)


def gem_hunt_reward(completions, task_id, **_) -> list[float]:
    """Reward of a one-turn gem hunt episode: the completion is the action, as our text agent parses it."""
    from loop_agents.envs.bundled.game import GemHuntGame
    from loop_agents.envs.bundled.tasks import generate_task, parse_task_id
    from loop_agents.rollout.text_agent import TextActionAgent

    agent = TextActionAgent()
    rewards = []
    for completion, tid in zip(completions, task_id, strict=True):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        game = GemHuntGame(generate_task(parse_task_id(tid)), spare_moves=1)
        parsed = agent.parse_action(text)
        if parsed.action is not None:
            game.step(parsed.action)
        rewards.append(game.reward)
    return rewards


def episode_reward(completions, episode_reward, **_) -> list[float]:
    """Multi-turn: the reward the rollout function recorded when each episode ended."""
    return [float(r) for r in episode_reward]


def multi_turn_rollout(spec: dict, tokenizer, task_ids: list[str]):
    """TRL `rollout_func` playing gem hunt episodes of up to `max_turns` turns, batched per turn."""
    import torch
    from transformers import GenerationConfig
    from trl.models import unwrap_model_for_generation

    from loop_agents.envs.bundled.game import GemHuntGame
    from loop_agents.envs.bundled.tasks import generate_task, parse_task_id
    from loop_agents.rollout.chat import ChatFormat
    from loop_agents.rollout.text_agent import TextActionAgent

    chat, agent = ChatFormat(tokenizer), TextActionAgent()
    stop_ids = chat.stop_token_ids(["<|im_end|>", "<|endoftext|>"])  # our EpisodeConfig's stop tokens
    pad_id = tokenizer.pad_token_id
    games = {}
    for tid in task_ids:
        first = GemHuntGame(generate_task(parse_task_id(tid))).first_observation()
        if games.setdefault(first, tid) != tid:
            raise ValueError(f"tasks {games[first]} and {tid} open with the same observation")
    generation = GenerationConfig(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=int(spec["max_new_tokens"]),
        eos_token_id=stop_ids, pad_token_id=pad_id,
    )  # fmt: skip

    def rollout(prompts: list[list[dict]], trainer) -> dict:
        episodes = []
        for messages in prompts:
            game = GemHuntGame(generate_task(parse_task_id(games[messages[-1]["content"]])), spare_moves=1)
            prompt = chat.initial_ids(messages) + chat.generation_prompt_ids
            episodes.append({"game": game, "prompt": prompt, "completion": [], "mask": [], "done": False})
        with (
            unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model,
            torch.no_grad(),
        ):
            for turn in range(int(spec["max_turns"])):
                active = [e for e in episodes if not e["done"]]
                if not active:
                    break
                rows = [e["prompt"] + e["completion"] for e in active]
                width = max(map(len, rows))
                ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows])
                attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
                new = model.generate(input_ids=ids, attention_mask=attention, generation_config=generation)
                for episode, row in zip(active, new[:, width:].tolist(), strict=True):
                    end = next((i + 1 for i, t in enumerate(row) if t in stop_ids), len(row))
                    sampled = row[:end]
                    episode["completion"] += sampled
                    episode["mask"] += [1] * len(sampled)
                    parsed = agent.parse_action(chat.decode(sampled))
                    if parsed.action is None:  # as our runner: feedback, no move spent
                        observation, done = parsed.feedback, False
                    else:
                        observation, _, done = episode["game"].step(parsed.action)
                    if done or turn + 1 == int(spec["max_turns"]):
                        episode["done"] = True
                        continue
                    context = (
                        chat.close_turn_ids(sampled)
                        + chat.observation_ids(observation)
                        + chat.generation_prompt_ids
                    )
                    episode["completion"] += context
                    episode["mask"] += [0] * len(context)
        return {
            "prompt_ids": [e["prompt"] for e in episodes],
            "completion_ids": [e["completion"] for e in episodes],
            "logprobs": None,  # HF generate gives none; TRL recomputes old log-probs, as in single-turn
            "env_mask": [e["mask"] for e in episodes],
            "episode_reward": [e["game"].reward for e in episodes],
        }

    return rollout


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    import torch

    torch.set_num_threads(int(spec["threads"]))
    t_start = time.perf_counter()
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
    from loop_agents.envs.bundled.tasks import generate_task, parse_task_id

    def prompt(tid: str) -> list[dict]:
        game = GemHuntGame(generate_task(parse_task_id(tid)), spare_moves=1)
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": game.first_observation()},
        ]

    data = Dataset.from_list([{"prompt": prompt(t), "task_id": t} for t in spec["task_ids"]])
    k, per_gen, mb = int(spec["group_size"]), int(spec["tasks_per_generation"]), int(spec["minibatch"])
    generation_batch = per_gen * k
    steps_per_generation = generation_batch // mb
    generations = int(spec["generations"])

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.marks: list[float] = []
            self.completion_lengths: list[float] = []
            self.num_tokens: list[float] = []
            self.rewards: list[float] = []  # mean training reward of each generation batch

        def on_train_begin(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % steps_per_generation == 0:
                self.marks.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                self.completion_lengths.append(float(logs["completions/mean_length"]))
            if logs and "reward" in logs:
                self.rewards.append(float(logs["reward"]))
            if logs and "num_tokens" in logs:
                self.num_tokens.append(float(logs["num_tokens"]))

    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"], padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = GRPOConfig(
        output_dir=spec["output_dir"],
        use_cpu=True,
        bf16=bool(spec.get("bf16", False)),  # autocast on CPU, as `--precision bf16` gives ours
        fp16=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=int(spec.get("seed", 0)),
        learning_rate=float(spec["lr"]),
        max_grad_norm=1.0,
        lr_scheduler_type="constant",
        num_train_epochs=1,
        max_steps=generations * steps_per_generation,
        per_device_train_batch_size=mb,
        gradient_accumulation_steps=1,
        steps_per_generation=steps_per_generation,
        num_generations=k,
        max_completion_length=int(spec["max_new_tokens"]),
        temperature=1.0,
        top_p=1.0,
        beta=0.0,
        num_iterations=1,
        epsilon=0.2,
        loss_type="grpo",
        scale_rewards="group",
        shuffle_dataset=False,
        use_vllm=False,
        dataloader_num_workers=0,
        model_init_kwargs={"dtype": torch.float32},
    )
    lora = spec["lora"]
    multi_turn = int(spec.get("max_turns", 1)) > 1
    trainer = GRPOTrainer(
        model=spec["model_dir"],
        reward_funcs=episode_reward if multi_turn else gem_hunt_reward,
        rollout_func=multi_turn_rollout(spec, tokenizer, spec["task_ids"]) if multi_turn else None,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=LoraConfig(
            r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=0.0,
            target_modules=lora["target_modules"],
            task_type="CAUSAL_LM",
        ),
        callbacks=[timer := Timer()],
    )
    t_ready = time.perf_counter()
    trainer.train()
    t_end = time.perf_counter()
    blocks = [b - a for a, b in zip(timer.marks, timer.marks[1:], strict=False)]
    result = {
        "generation_batch": generation_batch,
        "steps_per_generation": steps_per_generation,
        "block_s": blocks,
        "startup_s": t_ready - t_start,
        "process_s": t_end - t_start,
        "completion_length_mean": (
            sum(timer.completion_lengths) / len(timer.completion_lengths)
            if timer.completion_lengths
            else None
        ),
        "tokens_per_sample_mean": (timer.num_tokens[-1] / (generations * generation_batch))
        if timer.num_tokens
        else None,
        "reward": timer.rewards,
        "threads": torch.get_num_threads(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print("TRL_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
